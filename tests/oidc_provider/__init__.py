"""A real OpenID provider for the SSO tests: django-oauth-toolkit with OIDC, its own Django
project (settings, SQLite, an RSA key, users and groups made per run), run as a subprocess
on loopback by tests/oidc_provider/process.py."""
