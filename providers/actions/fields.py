"""Input cleaning for AI connections: names, URLs, providers, auth methods, OAuth fields."""

from __future__ import annotations

import ipaddress
from typing import Any, cast
from urllib.parse import urlsplit

from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.oneline import check_one_line, is_one_line
from hal.errors import InvalidInput, NotFound
from hal.web.ids import as_id
from providers.lookalikes import check_connection_name
from providers.models import (
    NAME_RE,
    AIConnection,
)
from vault import api as vault

URL_MAX = 500
# The connection's fields that are one line (a label, an id); traits and instructions are
# prose and keep their line breaks.
ONE_LINE = {"role", "model"}  # client_id has its own isprintable() check


CLIENT_ID_MAX = 200


SCOPES_MAX = 500


CREATE_FIELDS = {
    "name",
    "provider",
    "auth_method",
    "base_url",
    "role",
    "traits",
    "instructions",
    "model",
    "position",
    "oauth",
    "api_key",
}


UPDATE_FIELDS = {
    "name",
    "base_url",
    "role",
    "traits",
    "instructions",
    "model",
    "position",
    "oauth",
    "status",
}


IMMUTABLE_FIELDS = {"provider", "auth_method", "id", "api_key"}


OAUTH_FIELDS = {"authorize_url", "token_url", "client_id", "scopes", "client_secret"}


def resolve_connection(ref: Any) -> AIConnection:
    """Find a connection by instance, id or name (case-insensitive); unknown → 404."""
    if isinstance(ref, AIConnection):
        return ref
    conn = None
    if (pk := as_id(ref)) is not None:  # str.isdigit() also takes "²", which int() refuses
        conn = AIConnection.objects.filter(pk=pk).first()
    if conn is None and isinstance(ref, str) and ref:
        conn = AIConnection.objects.filter(name__iexact=ref.lstrip("@")).first()
    if conn is None:
        raise NotFound(
            format_lazy(_("No AI connection {ref!r}."), ref=ref), code="connection_not_found"
        )
    return conn


def clean_name(value: Any) -> str:
    """Validate an `@name`: 1–40 letters (any script), digits, `_` or `-`."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value.strip()):
        raise InvalidInput(
            _("name must be 1–40 letters, digits, '-' or '_' (no spaces)."), code="invalid_name"
        )
    return value.strip()


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def clean_url(value: Any, *, code: str, label: str, secure: bool = False) -> str:
    """An absolute http(s) URL with a host and no embedded credentials or fragment.

    `secure`: https only, plain http for loopback hosts (OAuth codes and tokens).
    """
    if not isinstance(value, str):
        raise InvalidInput(
            format_lazy(_("{label} must be an http(s) URL."), label=label), code=code
        )
    url = value.strip()
    if not is_one_line(url):
        raise InvalidInput(
            format_lazy(_("{label} must be an absolute http(s) URL."), label=label), code=code
        )
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a malformed port
    except ValueError:
        raise InvalidInput(
            format_lazy(_("{label} is not a valid URL."), label=label), code=code
        ) from None
    del port
    if (
        len(url) > URL_MAX
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.fragment
        or any(ch.isspace() for ch in url)
    ):
        raise InvalidInput(
            format_lazy(_("{label} must be an absolute http(s) URL."), label=label), code=code
        )
    if secure and parts.scheme != "https" and not _loopback(parts.hostname):
        raise InvalidInput(format_lazy(_("{label} must be an https URL."), label=label), code=code)
    return url


def _base_url(value: Any, provider: str) -> str:
    if provider == AIConnection.LOCAL_CLI:
        if value not in (None, ""):
            raise InvalidInput(
                _("A local CLI connection has no base URL."), code="invalid_base_url"
            )
        return ""
    if value in (None, ""):
        return AIConnection.DEFAULT_BASE_URLS[provider]
    return clean_url(value, code="invalid_base_url", label="base_url").rstrip("/")


def _text(value: Any, name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(format_lazy(_("{name} must be text."), name=name), code="invalid_input")
    text = value.strip()
    if name in ONE_LINE:
        check_one_line(text, name)
    if len(text) > limit:
        raise InvalidInput(
            format_lazy(_("{name} is longer than {limit} characters."), name=name, limit=limit),
            code="invalid_input",
        )
    return text


def _position(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
        raise InvalidInput(_("position must be a whole number ≥ 0."), code="invalid_input")
    return value


def _provider(value: Any) -> str:
    if value not in dict(AIConnection.PROVIDER_CHOICES):
        raise InvalidInput(
            _("provider must be anthropic, openai_compat or local_cli."), code="unknown_provider"
        )
    return cast(str, value)  # one of the provider keys above


def _auth_method(value: Any, provider: str) -> str:
    if value in (None, ""):
        # Optional on create (docs/API.md): the provider's usual method.
        return AIConnection.AUTH_FOR_PROVIDER[provider][0]
    if value not in dict(AIConnection.AUTH_CHOICES):
        raise InvalidInput(
            _("auth_method must be api_key, oauth or login."), code="unknown_auth_method"
        )
    if value not in AIConnection.AUTH_FOR_PROVIDER[provider]:
        allowed = ", ".join(AIConnection.AUTH_FOR_PROVIDER[provider])
        raise InvalidInput(
            format_lazy(
                _("A {provider} connection authenticates with {allowed}."),
                provider=provider,
                allowed=allowed,
            ),
            code="invalid_auth_method",
        )
    return cast(str, value)  # one of the auth methods above


def _secret_value(value: Any, what: str) -> str | None:
    """None when absent; whitespace-only or non-text → 400 empty_secret / invalid_secret."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInput(format_lazy(_("{what} must be text."), what=what), code="invalid_secret")
    if not value.strip():
        raise InvalidInput(format_lazy(_("{what} is empty."), what=what), code="empty_secret")
    if value != value.strip() or len(value.encode("utf-8")) > vault.MAX_PLAINTEXT_BYTES:
        raise InvalidInput(
            format_lazy(_("{what} has surrounding spaces or is too long."), what=what),
            code="invalid_secret",
        )
    return value


def _scopes(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        items = value.split()
    elif isinstance(value, list) and all(isinstance(s, str) for s in value):
        items = [s.strip() for s in value if s.strip()]
    else:
        raise InvalidInput(_("scopes must be a list of strings."), code="invalid_oauth_config")
    if any(not s.isprintable() or " " in s or '"' in s or "\\" in s for s in items):
        raise InvalidInput(_("scopes hold invalid characters."), code="invalid_oauth_config")
    joined = " ".join(dict.fromkeys(items))
    if len(joined) > SCOPES_MAX:
        raise InvalidInput(_("scopes are too long."), code="invalid_oauth_config")
    return joined


def _oauth_changes(value: Any) -> tuple[dict[str, str], str | None]:
    """Validated OAuth config columns from an `oauth` object, plus the client secret if any."""
    if not isinstance(value, dict):
        raise InvalidInput(_("oauth must be an object."), code="invalid_oauth_config")
    unknown = set(value) - OAUTH_FIELDS
    if unknown:
        raise InvalidInput(
            format_lazy(_("Unknown oauth field(s): {unknown}."), unknown=sorted(unknown)),
            code="unknown_field",
        )
    changes: dict[str, str] = {}
    for key, column in (("authorize_url", "oauth_authorize_url"), ("token_url", "oauth_token_url")):
        if key in value:
            raw = value[key]
            changes[column] = (
                ""
                if raw in (None, "")
                else clean_url(raw, code="invalid_oauth_url", label=key, secure=True)
            )
    if "client_id" in value:
        client_id = _text(value["client_id"], "client_id", CLIENT_ID_MAX)
        if any(not ch.isprintable() for ch in client_id):
            raise InvalidInput(
                _("client_id holds invalid characters."), code="invalid_oauth_config"
            )
        changes["oauth_client_id"] = client_id
    if "scopes" in value:
        changes["oauth_scopes"] = _scopes(value["scopes"])
    return changes, _secret_value(value.get("client_secret"), "client_secret")


def _check_model_choice(conn: AIConnection, model: Any) -> str:
    chosen = _text(model, "model", 200)
    if chosen and chosen not in (conn.models or []):
        raise InvalidInput(
            format_lazy(
                _(
                    "{model!r} is not in this connection's verified model list; verify it "
                    "and choose one of the listed models."
                ),
                model=chosen,
            ),
            code="model_unavailable",
        )
    return chosen


def _check_unique_name(name: str, exclude: int | None = None) -> None:
    qs = AIConnection.objects.filter(name__iexact=name)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    if qs.exists():
        raise InvalidInput(
            format_lazy(_("A connection named @{name} already exists."), name=name),
            code="duplicate_name",
        )
    check_connection_name(name, exclude=exclude)  # look-alikes and mixed scripts (UTS #39)
