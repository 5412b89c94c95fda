"""Django settings for HAL, read from the environment (see .env.example)."""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str = "") -> str:
    """Return an environment variable, or its documented default."""
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    """Return an environment flag: 1/true/yes/on are true."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    """Return a comma-separated environment variable as a list."""
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


DATA_DIR = Path(env("HAL_DATA_DIR", str(BASE_DIR / "data")))
DEBUG = env_bool("HAL_DEBUG", False)
PRODUCTION = env_bool("HAL_PRODUCTION", False)

# The embedded default generates a per-installation key on first run instead of
# shipping one; production must set it explicitly.
SECRET_KEY = env("DJANGO_SECRET_KEY")
# HAL_SECRETLESS=1 (always set for `manage.py mcp`): a process that runs read tools only
# gets no secret key and no vault. Its key signs nothing that outlives the process.
SECRETLESS = env_bool("HAL_SECRETLESS", False)
if SECRETLESS:
    import secrets as _secrets

    SECRET_KEY = _secrets.token_urlsafe(50)
elif not SECRET_KEY:
    from hal.paths import local_secret_key

    SECRET_KEY = local_secret_key(DATA_DIR)

ALLOWED_HOSTS = env_list("HAL_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("HAL_CSRF_TRUSTED_ORIGINS", "")
# Addresses (or networks) of the proxies whose X-Forwarded-For HAL believes (hal/asgi.py):
# the TLS proxy on this host by default. Add a load balancer's address only if the proxy
# passes its header on; never a network clients can connect from.
HAL_TRUSTED_PROXIES = env_list("HAL_TRUSTED_PROXIES", "127.0.0.1,::1")

# Not daphne's app: it only swaps `runserver` for an ASGI one and imports daphne's server
# (twisted, autobahn: ~1 s) into every manage.py command. HAL's web process is daphne itself
# (`python -m daphne hal.asgi:application`: make run, the units), which needs no app.
INSTALLED_APPS = [
    "hal.views.admin_apps.HalAdminConfig",  # django.contrib.admin with HAL's gated site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "csp",
    "django_tasks",
    "django_tasks_db",
    "hal",
    "vault",
    "providers",
    "chatrooms",
    "webfetch",
    "runbooks",
    "reviews",
    "investigations",
    "notifications",
    "alerts",
]

MIDDLEWARE = [
    # First: it times and counts every request, the ones answered early included.
    "hal.web.middleware.HttpMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "hal.web.middleware.RequestIdMiddleware",
    # Before the session: NUL in a cookie, path, query or form field is a 400 on every DB.
    "hal.web.middleware.InputTextMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "hal.web.middleware.OperatorLanguageMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "hal.web.middleware.HalErrorMiddleware",
]

ROOT_URLCONF = "hal.urls"
ASGI_APPLICATION = "hal.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "hal.views.context.console",
                "hal.views.context.emergency",
            ],
        },
    }
]

DATABASE_URL = env("DATABASE_URL")
_SQLITE_BUSY = float(env("HAL_SQLITE_BUSY_TIMEOUT_SECONDS", "20"))
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env("HAL_SQLITE_PATH", str(DATA_DIR / "hal.sqlite3")),
            "OPTIONS": {
                # WAL lets the web process read while the worker writes;
                # IMMEDIATE makes writers queue instead of failing mid-transaction.
                "transaction_mode": "IMMEDIATE",
                # How long a writer waits for another's lock before "database is locked"
                # (hal_worker then retries with backoff: hal/management/worker_retry.py).
                "timeout": _SQLITE_BUSY,
                "init_command": (
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                    f"PRAGMA busy_timeout={int(_SQLITE_BUSY * 1000)};"
                ),
            },
        }
    }
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not :memory:, so a daphne subprocess (browser tests) sees the same data.
    _test_db = str(Path(tempfile.gettempdir()) / f"hal-test-{os.getpid()}.sqlite3")
    DATABASES["default"]["TEST"] = {"NAME": env("HAL_TEST_DB_NAME") or _test_db}
# Connections. Under daphne every HTTP request runs its sync code in a thread of its own,
# so a "persistent" connection (CONN_MAX_AGE > 0) would be opened per request and left
# behind with its thread: keep 0 there. On PostgreSQL psycopg 3's pool hands each request
# a connection already open instead (a new one cost a connect + auth per request); the
# chat's own DB threads (hal/db/threads.py) keep theirs checked out, so the pool must be
# larger than HAL_CHAT_DB_THREADS plus the requests served at once.
DATABASES["default"]["CONN_MAX_AGE"] = int(env("HAL_DB_CONN_MAX_AGE", "0"))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env_bool("HAL_DB_CONN_HEALTH_CHECKS", True)
_pool_max = int(env("HAL_DB_POOL_MAX_SIZE", "0"))  # opt-in: no gain measured yet
if (
    DATABASES["default"]["ENGINE"].endswith("postgresql")
    and _pool_max > 0
    and importlib.util.find_spec("psycopg_pool") is not None  # psycopg[pool], in the lock
):
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(4, _pool_max),
        "max_size": _pool_max,
        "timeout": float(env("HAL_DB_POOL_TIMEOUT", "10")),
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django refuses a pool with persistent ones
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL")
# Annotated: the two branches' values differ, and readers (health) index into them.
CHANNEL_LAYERS: dict[str, dict[str, Any]]
if REDIS_URL:
    # Pub/sub (default): an event is one PUBLISH that each process holding a member of the
    # group receives; the list layer ("lists") costs four round trips per group_send plus
    # a blocking pop, ≈ 7× the latency per event (docs/performance.md), and drops a
    # socket from its groups after a day (group_expiry). Events missed while a socket
    # reconnects come back through the chat's resume, not through the layer.
    _layer_kind = env("HAL_CHANNEL_LAYER", "pubsub")
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": (
                "channels_redis.core.RedisChannelLayer"
                if _layer_kind == "lists"
                else "hal.live.channel_layer.PubSubLayer"
            ),
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket timeout by default, the same 5 s that
                # channels_redis's list layer blocks in BZPOPMIN: idle sockets then fail
                # with "Timeout reading" and every idle WebSocket is closed.
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                "prefix": env("HAL_REDIS_PREFIX", "hal"),
            },
        }
    }
else:
    # channels' in-memory layer with HAL's channel queues: it drops nothing past its stock
    # 100-message capacity (hal/live/channel_queue.py).
    CHANNEL_LAYERS = {"default": {"BACKEND": "hal.live.channel_layer.MemoryLayer"}}

TASKS = {
    "default": {
        "BACKEND": env("HAL_TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
        "QUEUES": ["default", "agent"],
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ko", "한국어")]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_I18N = True
USE_TZ = True
TIME_ZONE = env("HAL_TIME_ZONE", "UTC")

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("HAL_STATIC_ROOT", str(BASE_DIR / "staticfiles")))

# Django's database sessions and model backend, their rows read through hal.db.rows (the
# same rows and rules; each request's two reads cost a fraction of the ORM's).
SESSION_ENGINE = "hal.web.sessions"
AUTHENTICATION_BACKENDS = ["hal.web.sessions.ModelBackend"]
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = int(env("HAL_SESSION_AGE", str(12 * 3600)))
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("HAL_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(env("HAL_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("HAL_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        # Joining browsers' preload list is a deliberate, hard-to-undo choice for the
        # whole domain; HAL leaves it to the operator (HAL_HSTS_PRELOAD=1).
        SILENCED_SYSTEM_CHECKS = ["security.W021"]

# No inline scripts or styles anywhere: every script is an ES module from /static.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'none'"],
        "object-src": ["'none'"],
    }
}

# HAL's own knobs (documented in .env.example).
HAL_SERVE_STATIC = env_bool("HAL_SERVE_STATIC", not PRODUCTION)
HAL_REAUTH_SECONDS = int(env("HAL_REAUTH_SECONDS", "600"))


def _oidc_providers() -> list[dict]:
    """SSO (issue 45, docs/deploy.md): one OpenID provider from HAL_OIDC_*; none = off."""
    if not env("HAL_OIDC_ISSUER", ""):
        return []
    roles = {}
    for pair in env("HAL_OIDC_GROUP_ROLES", "").split(";"):
        group, _sep, role = pair.strip().rpartition("=")
        if group and role:
            roles[group.strip()] = role.strip()
    return [
        {
            "name": "sso",
            "label": env("HAL_OIDC_NAME", "SSO"),
            "issuer": env("HAL_OIDC_ISSUER", ""),
            "client_id": env("HAL_OIDC_CLIENT_ID", ""),
            # The secret from a file (a systemd credential, a mounted secret); empty: from
            # the vault (`manage.py oidc_secret`, purpose oidc.client_secret).
            "secret_file": env("HAL_OIDC_CLIENT_SECRET_FILE", ""),
            "scopes": env("HAL_OIDC_SCOPES", "openid email profile").split(),
            "groups_claim": env("HAL_OIDC_GROUPS_CLAIM", "groups"),
            "group_roles": roles,
        }
    ]


HAL_OIDC_PROVIDERS = _oidc_providers()
# Local accounts that may still log in with a password while SSO is on (comma-separated).
HAL_OIDC_BREAK_GLASS = [n.strip() for n in env("HAL_OIDC_BREAK_GLASS", "").split(",") if n.strip()]
# How often an SSO session is re-checked at the provider (refresh token), in seconds.
HAL_OIDC_RECHECK_SECONDS = int(env("HAL_OIDC_RECHECK_SECONDS", "300"))
HAL_OIDC_LEEWAY_SECONDS = int(env("HAL_OIDC_LEEWAY_SECONDS", "60"))
# Logging out (a POSTed form) ends at the provider's end-session page: browsers apply
# form-action to the redirects after a form, so the provider's origin is allowed there.
for _provider in HAL_OIDC_PROVIDERS:
    _parts = _provider["issuer"].split("/")
    if len(_parts) > 2:
        CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append("/".join(_parts[:3]))
# The largest MCP request body /mcp accepts (hal/mcp/http.py); larger ones get 413.
HAL_MCP_MAX_BODY_BYTES = int(env("HAL_MCP_MAX_BODY_BYTES", str(1024 * 1024)))
# The URL a local CLI turn uses to reach this web process's /mcp; empty: found out
# (hal/mcp/address.py: the address daphne serves on, else its -b/-p, else 127.0.0.1:8000).
HAL_MCP_INTERNAL_URL = env("HAL_MCP_INTERNAL_URL", "")
# While an MCP client listens for resource list changes: how often the change mark is read.
HAL_MCP_CHANGES_POLL_SECONDS = float(env("HAL_MCP_CHANGES_POLL_SECONDS", "5"))
# MCP OAuth (hal/mcp/oauth.py): an access token's life in seconds, a refresh token's in days.
HAL_MCP_OAUTH_ACCESS_SECONDS = int(env("HAL_MCP_OAUTH_ACCESS_SECONDS", "3600"))
HAL_MCP_OAUTH_REFRESH_DAYS = int(env("HAL_MCP_OAUTH_REFRESH_DAYS", "30"))
# Open client registration: at most this many per client address an hour (then 429).
HAL_MCP_OAUTH_REGISTRATIONS_PER_HOUR = int(env("HAL_MCP_OAUTH_REGISTRATIONS_PER_HOUR", "20"))
# The worker deletes dead codes and tokens this many days after they died, grantless
# clients after 24 h; at most this many rows of each kind a run (hal/actions/mcp_oauth_cleanup).
HAL_MCP_OAUTH_PURGE_DAYS = int(env("HAL_MCP_OAUTH_PURGE_DAYS", "7"))
HAL_MCP_OAUTH_CLEANUP_BATCH = int(env("HAL_MCP_OAUTH_CLEANUP_BATCH", "1000"))
HAL_CONFIRMATION_TTL_SECONDS = int(env("HAL_CONFIRMATION_TTL_SECONDS", "600"))
# Failed logins/re-auths allowed per (username, client address), and per client address.
HAL_LOGIN_MAX_FAILURES = int(env("HAL_LOGIN_MAX_FAILURES", "5"))
HAL_LOGIN_MAX_FAILURES_PER_IP = int(env("HAL_LOGIN_MAX_FAILURES_PER_IP", "20"))
HAL_LOGIN_FAILURE_WINDOW_SECONDS = int(env("HAL_LOGIN_FAILURE_WINDOW_SECONDS", "900"))
HAL_WORKER_HEARTBEAT_SECONDS = int(env("HAL_WORKER_HEARTBEAT_SECONDS", "5"))
HAL_WORKER_STALE_SECONDS = int(env("HAL_WORKER_STALE_SECONDS", "60"))
HAL_HEALTH_REQUIRE_WORKER = env_bool("HAL_HEALTH_REQUIRE_WORKER", True)

# HAL observed (issue 47, ADR 0023): GET /metrics of each process answers a client whose
# address (as hal/web/clientip.py reads it) is in these networks, or a bearer token whose
# SHA-256 (hex) is HAL_METRICS_TOKEN_SHA256 — never the token itself. The worker serves
# its own on HAL_METRICS_WORKER_PORT (loopback; 0: not served).
HAL_METRICS_ALLOW = env_list("HAL_METRICS_ALLOW", "127.0.0.1/32,::1/128")
HAL_METRICS_TOKEN_SHA256 = env("HAL_METRICS_TOKEN_SHA256", "").strip().lower()
HAL_METRICS_WORKER_PORT = int(env("HAL_METRICS_WORKER_PORT", "0"))
# HAL_METRICS=off: nothing is counted (no middleware, no counter calls on the socket and
# turn paths), GET /metrics answers 404 and the worker serves no port (bench/capacity.py
# --shape metrics measures the difference). Traces are separate: the OTEL_* variables.
HAL_METRICS = env_bool("HAL_METRICS", True)
if not HAL_METRICS:
    MIDDLEWARE.remove("hal.web.middleware.HttpMetricsMiddleware")

# The web process imports the model SDKs while it starts (hal/asgi.py): ~1-2 s of imports
# that hold the GIL, kept out of the first model call a process serves. The test suite's
# short-lived web processes leave them to that first call (tests/settings.py). Not an
# environment setting: a deployment always preloads.
HAL_PRELOAD_SDKS = True

HAL_VAULT_KEYS = "" if SECRETLESS else env("HAL_VAULT_KEYS")
HAL_VAULT_KEY_FILE = "" if SECRETLESS else env("HAL_VAULT_KEY_FILE", str(DATA_DIR / "vault.keys"))
HAL_VAULT_DISABLED = SECRETLESS  # vault.keyring refuses to load any key

# Web fetch (webfetch/): the loopback switch exists for tests only.
HAL_WEBFETCH_ALLOW_LOOPBACK = env_bool("HAL_WEBFETCH_ALLOW_LOOPBACK", False)
HAL_WEBFETCH_ALLOWED_PORTS = [int(p) for p in env_list("HAL_WEBFETCH_ALLOWED_PORTS", "80,443")]
HAL_WEBFETCH_MAX_BYTES = int(env("HAL_WEBFETCH_MAX_BYTES", "1000000"))
HAL_WEBFETCH_MIN_INTERVAL = float(env("HAL_WEBFETCH_MIN_INTERVAL", "1.0"))
HAL_WEBFETCH_USER_AGENT = env(
    "HAL_WEBFETCH_USER_AGENT", "HAL-webfetch/0.3 (operations console; robots-aware)"
)
HAL_WEBFETCH_CACHE_TTL = float(env("HAL_WEBFETCH_CACHE_TTL", "300"))
HAL_WEBFETCH_CACHE_SIZE = int(env("HAL_WEBFETCH_CACHE_SIZE", "256"))
HAL_TAVILY_BASE_URL = env("HAL_TAVILY_BASE_URL", "https://api.tavily.com")
HAL_WEBFETCH_DDG_FALLBACK = env_bool("HAL_WEBFETCH_DDG_FALLBACK", False)
HAL_WEBFETCH_ENTROPY_FLOOR = float(env("HAL_WEBFETCH_ENTROPY_FLOOR", "1.5"))
# Fleet and node agents.
HAL_AGENT_STALE_SECONDS = int(env("HAL_AGENT_STALE_SECONDS", "90"))
HAL_AGENT_INTERVAL_SECONDS = int(env("HAL_AGENT_INTERVAL_SECONDS", "15"))
HAL_METRICS_RETENTION_SECONDS = int(env("HAL_METRICS_RETENTION_SECONDS", "86400"))
HAL_ENROLMENT_TOKEN_TTL_SECONDS = int(env("HAL_ENROLMENT_TOKEN_TTL_SECONDS", "3600"))
HAL_JOB_LEASE_SECONDS = int(env("HAL_JOB_LEASE_SECONDS", "120"))
HAL_HEALTH_CHECK_TIMEOUT_SECONDS = float(env("HAL_HEALTH_CHECK_TIMEOUT_SECONDS", "5"))
HAL_ARTIFACT_MAX_BYTES = int(env("HAL_ARTIFACT_MAX_BYTES", str(512 * 1024 * 1024)))
# Ops: mail relay observation and DR.
HAL_SMTP_HOST = env("HAL_SMTP_HOST")
HAL_SMTP_PORT = int(env("HAL_SMTP_PORT", "25"))
# Notifications (docs/notifications.md): the From of their e-mails, and the outbox's pace.
HAL_NOTIFY_FROM = env("HAL_NOTIFY_FROM", "hal@localhost")
HAL_NOTIFY_RETRY_BASE_SECONDS = float(env("HAL_NOTIFY_RETRY_BASE_SECONDS", "30"))
HAL_NOTIFY_RETRY_MAX_SECONDS = float(env("HAL_NOTIFY_RETRY_MAX_SECONDS", "3600"))
HAL_NOTIFY_MAX_ATTEMPTS = int(env("HAL_NOTIFY_MAX_ATTEMPTS", "8"))
HAL_NOTIFY_LEASE_SECONDS = float(env("HAL_NOTIFY_LEASE_SECONDS", "120"))
HAL_NOTIFY_POLL_SECONDS = float(env("HAL_NOTIFY_POLL_SECONDS", "5"))
# Incident investigations (docs/investigations.md): how often the worker looks for queued
# ones, when a running one's worker counts as dead, and how many run at once in all.
HAL_INVESTIGATION_POLL_SECONDS = float(env("HAL_INVESTIGATION_POLL_SECONDS", "1"))
HAL_INVESTIGATION_STALE_SECONDS = float(env("HAL_INVESTIGATION_STALE_SECONDS", "60"))
HAL_INVESTIGATION_MAX_RUNNING = int(env("HAL_INVESTIGATION_MAX_RUNNING", "4"))
# How long adding a channel (or "send a new code") waits for the code's receiver.
HAL_NOTIFY_VERIFY_TIMEOUT_SECONDS = float(env("HAL_NOTIFY_VERIFY_TIMEOUT_SECONDS", "3"))
HAL_DR_INCLUDE_KEYS = env_bool("HAL_DR_INCLUDE_KEYS", False)
# pg_dump's limit; a `running` snapshot older than this is marked interrupted (worker sweep).
HAL_DR_SNAPSHOT_TIMEOUT_SECONDS = int(env("HAL_DR_SNAPSHOT_TIMEOUT_SECONDS", "3600"))

# AI connections and providers.
HAL_PUBLIC_URL = env("HAL_PUBLIC_URL")  # e.g. https://hal.example.org (OAuth redirect URI)
HAL_OAUTH_REFRESH_MARGIN_SECONDS = int(env("HAL_OAUTH_REFRESH_MARGIN_SECONDS", "60"))
HAL_OAUTH_TIMEOUT_SECONDS = float(env("HAL_OAUTH_TIMEOUT_SECONDS", "15"))
HAL_VERIFY_TIMEOUT_SECONDS = float(env("HAL_VERIFY_TIMEOUT_SECONDS", "20"))
HAL_PROVIDER_TIMEOUT_SECONDS = float(env("HAL_PROVIDER_TIMEOUT_SECONDS", "60"))
# Every provider stream (SDK and CLI): the longest silence between two events, and a
# generous cap on the whole call (a reply streaming steadily is never cut at 60 s).
HAL_PROVIDER_IDLE_TIMEOUT_SECONDS = float(env("HAL_PROVIDER_IDLE_TIMEOUT_SECONDS", "60"))
HAL_PROVIDER_TOTAL_TIMEOUT_SECONDS = float(env("HAL_PROVIDER_TOTAL_TIMEOUT_SECONDS", "600"))
HAL_PROVIDER_MAX_RETRIES = int(env("HAL_PROVIDER_MAX_RETRIES", "1"))
HAL_LOCAL_CLI_BINARY = env("HAL_LOCAL_CLI_BINARY", "claude")
HAL_LOCAL_CLI_HOME = env("HAL_LOCAL_CLI_HOME") or None
HAL_LOCAL_CLI_MODELS = env_list("HAL_LOCAL_CLI_MODELS") or None
# HAL's own CLI config directory (CLAUDE_CONFIG_DIR, logged in there; no settings file is
# read), the API base URL for the CLI (a gateway), the oldest CLI HAL runs (default: the
# pin in deploy/claude-code.version), and verify's one-token login probe (docs/providers.md).
HAL_LOCAL_CLI_CONFIG_DIR = env("HAL_LOCAL_CLI_CONFIG_DIR") or None
HAL_LOCAL_CLI_BASE_URL = env("HAL_LOCAL_CLI_BASE_URL")
HAL_LOCAL_CLI_MIN_VERSION = env("HAL_LOCAL_CLI_MIN_VERSION") or None
HAL_LOCAL_CLI_VERIFY_PROBE = env_bool("HAL_LOCAL_CLI_VERIFY_PROBE", False)

# Chat rooms.
HAL_CHAT_MAX_MESSAGE_CHARS = int(env("HAL_CHAT_MAX_MESSAGE_CHARS", "20000"))
HAL_CHAT_LEASE_TIMEOUT = float(env("HAL_CHAT_LEASE_TIMEOUT", "15"))  # a web process is dead after
HAL_CHAT_LEASE_HEARTBEAT = float(  # default: a third of the timeout
    env("HAL_CHAT_LEASE_HEARTBEAT", "") or HAL_CHAT_LEASE_TIMEOUT / 3
)
# The active runbooks listed in system prompts are re-read at most this often (seconds)
# by a web process; changes made in the same process show at once (runbooks/active.py).
HAL_RUNBOOK_PROMPT_CACHE_SECONDS = float(env("HAL_RUNBOOK_PROMPT_CACHE_SECONDS", "5"))
HAL_CHAT_ARCHIVE_DAYS = int(env("HAL_CHAT_ARCHIVE_DAYS", "90"))  # 0: "New conversation" deletes
HAL_CHAT_MAX_TOOL_ROUNDS = int(env("HAL_CHAT_MAX_TOOL_ROUNDS", "4"))
HAL_CHAT_HISTORY_MESSAGES = int(env("HAL_CHAT_HISTORY_MESSAGES", "50"))
# Attachments (chatrooms/files, docs/attachments.md): bytes per text file / image / message,
# files per message, an image's longest side and pixel count; models that see images.
HAL_CHAT_ATTACH_TEXT_BYTES = int(env("HAL_CHAT_ATTACH_TEXT_BYTES", str(512 * 1024)))
HAL_CHAT_ATTACH_IMAGE_BYTES = int(env("HAL_CHAT_ATTACH_IMAGE_BYTES", str(5 * 1024 * 1024)))
HAL_CHAT_ATTACH_MESSAGE_BYTES = int(env("HAL_CHAT_ATTACH_MESSAGE_BYTES", str(10 * 1024 * 1024)))
HAL_CHAT_ATTACH_MESSAGE_FILES = int(env("HAL_CHAT_ATTACH_MESSAGE_FILES", "10"))
HAL_CHAT_ATTACH_IMAGE_SIDE = int(env("HAL_CHAT_ATTACH_IMAGE_SIDE", "8000"))
HAL_CHAT_ATTACH_IMAGE_PIXELS = int(env("HAL_CHAT_ATTACH_IMAGE_PIXELS", "40000000"))
HAL_CHAT_VISION_MODELS = env("HAL_CHAT_VISION_MODELS", "")
HAL_CHAT_FRAME_MS = int(env("HAL_CHAT_FRAME_MS", "40"))
HAL_CHAT_TURN_TIMEOUT = float(env("HAL_CHAT_TURN_TIMEOUT", "300"))
HAL_AI_REVIEW_TIMEOUT_SECONDS = float(env("HAL_AI_REVIEW_TIMEOUT_SECONDS", "120"))
if env("HAL_CHAT_DB_THREADS"):
    HAL_CHAT_DB_THREADS = int(env("HAL_CHAT_DB_THREADS"))
if env("HAL_SEND_DB_THREADS"):  # the sends' own lane (hal/db/threads.py)
    HAL_SEND_DB_THREADS = int(env("HAL_SEND_DB_THREADS"))

HAL_BUDGET_TOKENS_PER_DAY = int(env("HAL_BUDGET_TOKENS_PER_DAY", "0"))  # 0: unlimited
HAL_BUDGET_FETCH_BYTES_PER_DAY = int(env("HAL_BUDGET_FETCH_BYTES_PER_DAY", "0"))  # 0: unlimited
# Reservations (providers/reservations.py): prompt characters per estimated input token,
# a budgeted call's output cap (sent as max_tokens), how long a reservation counts at most.
HAL_BUDGET_CHARS_PER_TOKEN = float(env("HAL_BUDGET_CHARS_PER_TOKEN", "3"))
HAL_BUDGET_OUTPUT_TOKENS = int(env("HAL_BUDGET_OUTPUT_TOKENS", "4096"))
HAL_BUDGET_RESERVATION_SECONDS = float(env("HAL_BUDGET_RESERVATION_SECONDS", "900"))
HAL_PROPOSAL_EXPIRY_MINUTES = int(env("HAL_PROPOSAL_EXPIRY_MINUTES", "60"))
HAL_PROPOSAL_EXECUTION_TIMEOUT_SECONDS = float(env("HAL_PROPOSAL_EXECUTION_TIMEOUT_SECONDS", "900"))
HAL_WS_RECHECK_SECONDS = float(env("HAL_WS_RECHECK_SECONDS", "60"))
HAL_CONNECTION_RECHECK_SECONDS = float(env("HAL_CONNECTION_RECHECK_SECONDS", "30"))
HAL_CONNECTION_RECHECK_MAX_SECONDS = float(env("HAL_CONNECTION_RECHECK_MAX_SECONDS", "900"))
HAL_HEALTH_STARTUP_GRACE_SECONDS = float(env("HAL_HEALTH_STARTUP_GRACE_SECONDS", "30"))
# {"provider": ["model", ...]} as JSON; empty: providers/verification.py's defaults.
HAL_PREFERRED_MODELS = json.loads(env("HAL_PREFERRED_MODELS", "") or "{}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("HAL_LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}
