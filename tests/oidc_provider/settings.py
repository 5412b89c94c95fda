"""Settings of the test OpenID provider (django-oauth-toolkit); everything per run from
the run directory named by OIDC_TEST_DIR (database, signing key, control token)."""

import os
from pathlib import Path

RUN_DIR = Path(os.environ["OIDC_TEST_DIR"])
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
SECRET_KEY = (RUN_DIR / "django-secret").read_text()
ROOT_URLCONF = "tests.oidc_provider.urls"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": RUN_DIR / "op.sqlite3"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/accounts/login/"
# Cookies are per host, not per port: the provider's must not overwrite HAL's on 127.0.0.1.
SESSION_COOKIE_NAME = "op_session"
CSRF_COOKIE_NAME = "op_csrftoken"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # test speed only
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (RUN_DIR / "signing-key.pem").read_text(),
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "PKCE_REQUIRED": True,
    "SCOPES": {
        "openid": "OpenID Connect",
        "profile": "Profile",
        "email": "E-mail",
        "groups": "Groups",
    },
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validator.GroupsValidator",
    "ACCESS_TOKEN_EXPIRE_SECONDS": 300,
}
