"""MCP OAuth: the clients that registered themselves, the grants people gave them, the
authorization codes and the tokens (sha256 at rest) of HAL's authorization server for /mcp.

The models carry the small methods authlib's server side asks of them (ClientMixin,
AuthorizationCodeMixin, TokenMixin, by duck typing); every write is an action's
(hal/actions/mcp_oauth.py)."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import AuthorizationCodeMixin, ClientMixin, TokenMixin
from django.conf import settings
from django.db import models
from django.utils import timezone

OAUTH_SCOPE = "mcp:read"  # read tools only: the scope of a personal token
ACCESS_PREFIX = "hal-oat-"
REFRESH_PREFIX = "hal-ort-"
# Schemes a redirect URI may never use (RFC 8252 §8.1 aside: these run or read locally).
_NEVER = {"javascript", "data", "file", "vbscript", "about", "blob", "ws", "wss", "ftp"}


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: Any) -> str | None:
    """Why a redirect URI cannot be registered, or None: https; http to a loopback host
    (any port, RFC 8252 §7.3); a private-use scheme of a native app (§7.1). Never a
    fragment, never credentials in the URI."""
    if not isinstance(uri, str) or not uri or len(uri) > 500 or uri != uri.strip():
        return "not a URI"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 — raises on a malformed port
    except ValueError:
        return "not a URI"
    scheme = parts.scheme.lower()
    if not scheme or parts.fragment or "#" in uri or parts.username or parts.password:
        return "no scheme, or a fragment or credentials"
    if scheme == "https":
        return None if parts.hostname else "no host"
    if scheme == "http":
        return None if parts.hostname and _loopback(parts.hostname) else "http only to loopback"
    if scheme in _NEVER or ("." not in scheme and scheme not in _NATIVE_SCHEMES):
        return "scheme not allowed"
    return None


# Private-use schemes of the MCP clients named in docs/HAL-AI.md that register one without
# a reverse-DNS dot (RFC 8252 §7.1 asks for one; these predate it).
_NATIVE_SCHEMES = {"cursor", "vscode", "vscode-insiders", "claude"}


def redirect_uri_matches(registered: str, requested: str) -> bool:
    """Exact match, except that a loopback http URI may use any port (RFC 8252 §7.3)."""
    if registered == requested:
        return True
    try:
        a, b = urlsplit(registered), urlsplit(requested)
        a_port, b_port = a.port, b.port  # noqa: F841 — raise on a malformed port
    except ValueError:
        return False
    if a.scheme != "http" or b.scheme != "http" or not a.hostname or not b.hostname:
        return False
    if not _loopback(a.hostname) or a.hostname != b.hostname:
        return False
    return (a.path or "/") == (b.path or "/") and a.query == b.query and not b.fragment


class McpOAuthClient(ClientMixin, models.Model):
    """An MCP client that registered itself (RFC 7591): a public client, PKCE only."""

    client_id = models.CharField(max_length=64, unique=True)
    client_name = models.CharField(max_length=200)
    client_uri = models.CharField(max_length=500, blank=True)
    software_id = models.CharField(max_length=200, blank=True)
    software_version = models.CharField(max_length=100, blank=True)
    redirect_uris = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"MCP client {self.client_name} ({self.client_id})"

    # authlib ClientMixin
    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return ""  # none: a redirect_uri is always required (OAuth 2.1)

    def get_allowed_scope(self, scope: Any) -> str:
        return OAUTH_SCOPE  # the only scope there is; whatever was asked, this is granted

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return any(redirect_uri_matches(r, redirect_uri) for r in self.redirect_uris)

    def check_client_secret(self, client_secret: str) -> bool:
        return False  # public clients only: there is no secret

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


class McpOAuthGrant(models.Model):
    """A person's consent to one MCP client: listed on the MCP access page, revocable."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_grants"
    )
    client = models.ForeignKey(McpOAuthClient, on_delete=models.CASCADE, related_name="grants")
    scope = models.CharField(max_length=200, default=OAUTH_SCOPE)
    resource = models.CharField(max_length=500)  # the /mcp URL its tokens are bound to
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"MCP grant {self.pk} of {self.client.client_name}"


class McpOAuthCode(AuthorizationCodeMixin, models.Model):
    """An authorization code (sha256 at rest), single use, bound to its PKCE challenge."""

    grant = models.ForeignKey(McpOAuthGrant, on_delete=models.CASCADE, related_name="codes")
    code_hash = models.CharField(max_length=64, unique=True)
    redirect_uri = models.CharField(max_length=500)
    code_challenge = models.CharField(max_length=128)
    code_challenge_method = models.CharField(max_length=10, default="S256")
    scope = models.CharField(max_length=200, default=OAUTH_SCOPE)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"MCP authorization code {self.pk}"

    # authlib AuthorizationCodeMixin
    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> None:
        return None

    def get_auth_time(self) -> None:
        return None


class McpOAuthToken(TokenMixin, models.Model):
    """An access token and its refresh token (sha256 at rest); a refresh rotates both."""

    grant = models.ForeignKey(McpOAuthGrant, on_delete=models.CASCADE, related_name="tokens")
    access_hash = models.CharField(max_length=64, unique=True)
    refresh_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    scope = models.CharField(max_length=200, default=OAUTH_SCOPE)
    created_at = models.DateTimeField(auto_now_add=True)
    access_expires_at = models.DateTimeField()
    refresh_expires_at = models.DateTimeField(null=True, blank=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"MCP OAuth token {self.pk}"

    # authlib TokenMixin (what the refresh grant asks of the token it is given)
    def check_client(self, client: Any) -> bool:
        return self.grant.client_id == client.pk

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return max(0, int((self.access_expires_at - timezone.now()).total_seconds()))

    def is_expired(self) -> bool:
        return self.access_expires_at <= timezone.now()

    def is_revoked(self) -> bool:
        return self.rotated_at is not None or self.grant.revoked_at is not None
