"""HAL's OAuth authorization server for `/mcp` (MCP authorization, revision 2026-07-28),
built on authlib's server side (ADR 0026).

- metadata: protected resource (RFC 9728) naming HAL as its authorization server, and the
  authorization server's own (RFC 8414), both from HAL's public URL (HAL_PUBLIC_URL, else
  the request's scheme and validated Host);
- clients register themselves (RFC 7591, public clients only: `token_endpoint_auth_method`
  "none"); redirect URIs https, loopback http with any port, or a native app's scheme;
- authorization code with PKCE S256 only (a request without a challenge is refused at the
  authorization endpoint, `plain` is not offered), `state` and `redirect_uri` required;
  `iss` in every authorization response (RFC 9207); the `resource` (RFC 8707) must be
  HAL's own /mcp URL and is bound to the grant, so a token is refused at any other
  resource;
- refresh tokens rotate on every use; a rotated one or a spent code presented again
  revokes the whole grant.

The writes are hal/actions/mcp_oauth.py's; this module is the protocol.
"""

from __future__ import annotations

from typing import Any

from authlib.common.urls import add_params_to_uri
from authlib.integrations.django_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import (
    InvalidGrantError,
    InvalidRequestError,
    OAuth2Error,
)
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, RefreshTokenGrant
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint, InvalidClientMetadataError
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9207 import IssuerParameter
from django.conf import settings

from hal.actions import mcp_oauth
from hal.actions.base import Actor
from hal.models import McpOAuthClient, McpOAuthToken
from hal.models.mcp_oauth import OAUTH_SCOPE, redirect_uri_problem

MCP_PATH = "/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource"
ASM_PATH = "/.well-known/oauth-authorization-server"
AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
REGISTER_PATH = "/oauth/register"
REVOKE_PATH = "/oauth/revoke"
MAX_REDIRECT_URIS = 10


def public_base(scheme: str, host: str) -> str:
    """HAL's public origin: HAL_PUBLIC_URL when configured, else the request's own."""
    configured = str(getattr(settings, "HAL_PUBLIC_URL", "") or "").rstrip("/")
    return configured or f"{scheme}://{host.lower()}"


def issuer_of(base: str) -> str:
    # With its trailing slash: the form clients render a root URL in (pydantic's, the
    # official SDK's), which they compare the RFC 9207 `iss` against as a plain string.
    return base + "/"


def resource_of(base: str) -> str:
    """The canonical URI of HAL's MCP server: the audience of every token (RFC 8707)."""
    return base + MCP_PATH


def protected_resource_metadata(base: str) -> dict[str, Any]:
    """RFC 9728 metadata of /mcp."""
    return {
        "resource": resource_of(base),
        "authorization_servers": [issuer_of(base)],
        "scopes_supported": [OAUTH_SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "HAL",
    }


def authorization_server_metadata(base: str) -> dict[str, Any]:
    """RFC 8414 metadata of HAL's authorization server."""
    return {
        "issuer": issuer_of(base),
        "authorization_endpoint": base + AUTHORIZE_PATH,
        "token_endpoint": base + TOKEN_PATH,
        "registration_endpoint": base + REGISTER_PATH,
        "revocation_endpoint": base + REVOKE_PATH,
        "revocation_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": [OAUTH_SCOPE],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
        "client_id_metadata_document_supported": False,
    }


class InvalidTargetError(OAuth2Error):
    """RFC 8707 §2: the requested resource is not this server's."""

    error = "invalid_target"


class _S256Only(CodeChallenge):
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]


def _one_resource(request: Any, expected: str, required: bool) -> None:
    values = request.payload.datalist.get("resource", [])
    if len(values) > 1:
        raise InvalidTargetError("Only HAL's /mcp may be named as the resource.")
    if not values:
        if required:
            raise InvalidTargetError("Name the resource: HAL's /mcp URL.")
        return
    if values[0] != expected:
        raise InvalidTargetError("This server issues tokens for its own /mcp only.")


class CodeGrant(AuthorizationCodeGrant):
    """Authorization code + PKCE S256, for public clients, bound to HAL's /mcp."""

    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]

    def validate_authorization_request(self) -> str:
        redirect_uri = super().validate_authorization_request()
        payload: Any = self.request.payload
        data = payload.data
        try:
            if not data.get("code_challenge") or data.get("code_challenge_method") != "S256":
                raise InvalidRequestError("PKCE with code_challenge_method=S256 is required.")
            for name in ("state", "redirect_uri", "client_id", "response_type"):
                if len(payload.datalist.get(name, [])) > 1:
                    raise InvalidRequestError(f"Multiple '{name}' in request.")
            if not data.get("redirect_uri"):
                raise InvalidRequestError("Missing 'redirect_uri'.")
            if not data.get("state"):  # the client's own CSRF check of the response
                raise InvalidRequestError("Missing 'state'.")
            _one_resource(self.request, self.server.resource, required=False)
        except OAuth2Error as error:
            error.redirect_uri = redirect_uri
            raise
        return redirect_uri

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        mcp_oauth.check_approve_mcp_client(
            actor=self.server.actor,
            client=request.client,
            redirect_uri=data["redirect_uri"],
            code_challenge=data["code_challenge"],
            code_challenge_method=data["code_challenge_method"],
            resource=self.server.resource,
            code=code,
        )

    def query_authorization_code(self, code: str, client: Any) -> Any:
        return mcp_oauth.find_code(code, client)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        code: Any = self.request.authorization_code
        _one_resource(self.request, code.grant.resource, False)

    def delete_authorization_code(self, authorization_code: Any) -> None:
        """Spent by save_token, in the transaction that issues the tokens."""

    def authenticate_user(self, authorization_code: Any) -> Any:
        user = authorization_code.grant.user
        return user if user.is_active else None


class RefreshGrant(RefreshTokenGrant):
    """Refresh with rotation: every use returns a new refresh token, the old one dies."""

    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str) -> McpOAuthToken | None:  # type: ignore[override]
        return mcp_oauth.find_refresh(refresh_token)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        token: Any = self.request.refresh_token
        _one_resource(self.request, token.grant.resource, False)

    def authenticate_user(self, refresh_token: McpOAuthToken) -> Any:
        user = refresh_token.grant.user
        return user if user.is_active else None

    def revoke_old_credential(self, refresh_token: Any) -> None:
        """Rotated out by save_token, in the transaction that issues the new pair."""


class Registration(ClientRegistrationEndpoint):
    """RFC 7591 open registration of public MCP clients (no initial access token)."""

    def authenticate_token(self, request: Any) -> bool:
        return True  # open: a client is nothing until a person approves it

    def resolve_public_key(self, request: Any) -> None:
        return None

    def get_server_metadata(self) -> dict[str, Any]:
        return authorization_server_metadata(self.server.base)

    def generate_client_id(self, request: Any) -> str:
        return mcp_oauth.new_client_id()

    def generate_client_secret(self, request: Any) -> None:  # type: ignore[override]
        return None  # public clients: PKCE instead of a secret

    def extract_client_metadata(self, request: Any) -> dict[str, Any]:
        data = request.payload.data
        if not isinstance(data, dict):
            raise InvalidClientMetadataError("The registration must be a JSON object.")
        uris = data.get("redirect_uris")
        if not isinstance(uris, list) or not 1 <= len(uris) <= MAX_REDIRECT_URIS:
            raise InvalidClientMetadataError("Give 1 to 10 redirect_uris.")
        for uri in uris:
            problem = redirect_uri_problem(uri)
            if problem:
                raise InvalidClientMetadataError(f"redirect_uri {str(uri)[:100]!r}: {problem}")
        grants = data.get("grant_types") or ["authorization_code"]
        if not isinstance(grants, list) or "authorization_code" not in grants:
            raise InvalidClientMetadataError("Only the authorization_code grant is offered.")
        if not set(data.get("response_types") or ["code"]) <= {"code"}:
            raise InvalidClientMetadataError("Only response_type code is offered.")
        name = data.get("client_name")
        if name is not None and (not isinstance(name, str) or not name.isprintable()):
            raise InvalidClientMetadataError("client_name must be printable text.")
        text = {k: data.get(k) for k in ("client_name", "client_uri", "software_id")}
        text["software_version"] = data.get("software_version")
        return {
            **{k: str(v)[:200] for k, v in text.items() if isinstance(v, str) and v},
            "redirect_uris": list(uris),
            # RFC 7591 §3.2.1: the server says what it registered.
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "scope": OAUTH_SCOPE,
        }

    def save_client(
        self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any
    ) -> McpOAuthClient:
        # An identifier like the other system actors' labels (a page shows it as it is).
        actor = Actor(user=None, via="mcp", label="mcp_oauth.register", ip=self.server.ip)
        return mcp_oauth.do_register_client(actor, client_info["client_id"], client_metadata)

    def create_registration_response(self, request: Any) -> tuple[int, dict[str, Any], Any]:
        status, body, headers = super().create_registration_response(request)
        # No secret was issued: say nothing of one (RFC 7591 §3.2.1 lists it as OPTIONAL).
        body = {k: v for k, v in body.items() if v is not None and k != "client_secret_expires_at"}
        return status, body, headers


class Revocation(RevocationEndpoint):
    """RFC 7009: a client gives up its access (`claude mcp logout` and the like). Either of
    its tokens revokes the whole grant, as the access page does; an unknown token is 200."""

    CLIENT_AUTH_METHODS = ["none"]

    def query_token(self, token_string: str, token_type_hint: str | None) -> Any:
        return mcp_oauth.find_token(token_string)

    def revoke_token(self, token: Any, request: Any) -> None:
        grant = token.grant
        if grant.revoked_at is None:
            actor = Actor(user=grant.user, via="mcp", ip=self.server.ip)
            mcp_oauth.do_revoke_mcp_grant(actor, grant, "client_revoked")


class HalIssuer(IssuerParameter):
    """RFC 9207 `iss` on authorization responses (authlib's reads a Flask-style
    `response.location`; a Django response has a Location header)."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer

    def get_issuer(self) -> str:
        return self.issuer

    def add_issuer_parameter(self, authorization_server: Any, response: Any) -> None:
        location = response.get("Location") if hasattr(response, "get") else None
        if location:
            response["Location"] = add_params_to_uri(location, {"iss": self.issuer})


class HalAuthorizationServer(AuthorizationServer):
    """authlib's Django server, made for one request (its issuer is the request's)."""

    def __init__(self, base: str, actor: Actor | None = None, ip: str | None = None) -> None:
        super().__init__(McpOAuthClient, McpOAuthToken)
        self.base = base
        self.resource = resource_of(base)
        self.actor = actor
        self.ip = ip
        self.scopes_supported = [OAUTH_SCOPE]
        self.register_token_generator(
            "default",
            BearerTokenGenerator(
                access_token_generator=mcp_oauth.new_access_token,
                refresh_token_generator=mcp_oauth.new_refresh_token,
                expires_generator=lambda client, grant_type: mcp_oauth.access_ttl(),
            ),
        )
        self.register_grant(CodeGrant, [_S256Only(required=True)])
        self.register_grant(RefreshGrant)
        self.register_endpoint(Registration)  # type: ignore[arg-type]  # stubs lag authlib 1.9
        self.register_endpoint(Revocation)
        self.register_extension(HalIssuer(issuer_of(base)))

    def query_client(self, client_id: str) -> McpOAuthClient | None:  # type: ignore[override]
        if not isinstance(client_id, str) or len(client_id) > 64:
            return None
        return McpOAuthClient.objects.filter(client_id=client_id).first()

    def save_token(self, token: dict[str, Any], request: Any) -> McpOAuthToken:  # type: ignore[override]
        code = getattr(request, "authorization_code", None)
        old: Any = getattr(request, "refresh_token", None)
        try:
            if code is not None:
                return mcp_oauth.do_issue_tokens(code.grant, token, code=code)
            return mcp_oauth.do_issue_tokens(old.grant, token, rotated=old)
        except ValueError as exc:  # a concurrent request spent the code or the refresh
            raise InvalidGrantError(str(exc)) from exc
