"""HAL's MCP server over Streamable HTTP at `/mcp` (the official SDK's transport).

The same `HalMCPServer` as `manage.py mcp` (hal/mcp/server.py): the same tool list, the same
dispatch, read tools only. What this module adds is the door:

- a bearer token only: a personal MCP token (`hal-mcp-…`, hal/actions/mcp_tokens.py) or
  an OAuth access token (`hal-oat-…`, hal/mcp/oauth.py) issued for this server's own
  `/mcp` URL; the session cookie is never read, so a browser page cannot ride an
  operator's login into `/mcp`; a 401 names the protected-resource metadata (RFC 9728),
  from which a client finds HAL's authorization server;
- the `Host` must be a loopback literal (hal/mcp/address.py) or a configured name
  (ALLOWED_HOSTS without `*`, HAL_PUBLIC_URL's host), and an `Origin` (browsers send
  one) must be the console's own or a CSRF-trusted one, by the WebSocket rule
  (hal/live/origin.py);
- request bodies bounded (HAL_MCP_MAX_BODY_BYTES) by the SDK's limit middleware;
- POST only: any other method is 405 `Allow: POST` (no GET event stream, no session);
  change notifications ride a 2026-07-28 `subscriptions/listen` POST's response stream
  (hal/mcp/changes.py).

The SDK runs stateless with JSON responses: each POST is authenticated and answered on
its own, so any web process behind the load balancer serves any request (tokens live in
the database), and a revoked token stops working on its next request.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from hal.actions.base import Actor
from hal.actions.mcp_oauth import authenticate_mcp_access
from hal.actions.mcp_tokens import authenticate_mcp_token
from hal.actions.mcp_turn_tokens import scope_of
from hal.live.origin import _headers, _one, _trusted, normalize, own_origin
from hal.mcp.address import is_loopback_host, is_public_name, remember
from hal.mcp.oauth import MCP_PATH, PRM_PATH, public_base, resource_of
from hal.mcp.server import SCOPE_ACTOR, TURN_SCOPE, HalMCPServer
from hal.models.mcp_oauth import ACCESS_PREFIX, OAUTH_SCOPE
from hal.web.clientip import scope_client_ip

DEFAULT_MAX_BODY = 1024 * 1024
# Stateless: the SDK logs "Terminating session: None" at INFO after every request.
logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)


def _scheme_of(scope: dict[str, Any]) -> str:
    """The scheme as Django sees it: behind the TLS proxy daphne's scope says http, and
    Django believes SECURE_PROXY_SSL_HEADER (X-Forwarded-Proto) when it is configured."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        header, secure = proxy
        name = header.removeprefix("HTTP_").replace("_", "-").lower()
        value = _one(_headers(scope), name)
        if value is not None:
            return "https" if value.split(",", 1)[0].strip() == secure else "http"
    return str(scope.get("scheme") or "http")


def _base_of(scope: dict[str, Any]) -> str:
    return public_base(_scheme_of(scope), _one(_headers(scope), "host") or "")


def resource_of_scope(scope: dict[str, Any]) -> str:
    """The URL this request reached /mcp at: the audience an OAuth token must name."""
    return resource_of(_base_of(scope))


def challenge(scope: dict[str, Any], error: str | None = None) -> str:
    """The 401's WWW-Authenticate: where the protected-resource metadata is (RFC 9728 §5.1)
    and the scope to ask for, so a client that has never seen HAL can find its way."""
    metadata = _base_of(scope) + PRM_PATH + MCP_PATH
    value = f'Bearer resource_metadata="{metadata}", scope="{OAUTH_SCOPE}"'
    return value + (f', error="{error}"' if error else "")


async def _refuse(send: Any, status: int, code: str, message: str, authenticate: str = "") -> None:
    body = json.dumps({"ok": False, "error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if authenticate:
        headers.append((b"www-authenticate", authenticate.encode()))
    if status == 405:
        headers.append((b"allow", b"POST"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def bearer(headers: dict[str, list[str]]) -> str | None:
    """The token of a single `Authorization: Bearer …` header, else None."""
    value = _one(headers, "authorization")
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def origin_refusal(scope: dict[str, Any]) -> tuple[int, str, str] | None:
    """Why the request's Host/Origin is refused, or None when it may go on."""
    headers = _headers(scope)
    own = own_origin(scope)  # Django's rule: the Host (or X-Forwarded-Host) allowed
    if own is not None and not is_public_name(own):
        own = None  # allowed only through ALLOWED_HOSTS' "*"
    host = _one(headers, "host") or ""
    if own is None and is_loopback_host(host):
        # A local CLI turn reaches its own web process by a loopback literal, which a
        # deployment's ALLOWED_HOSTS need not list; a literal cannot be DNS-rebound.
        own = normalize(f"http://{host}")
    if own is None:
        return 400, "bad_host", "The Host must be a loopback address or HAL's configured name."
    if "origin" in headers:
        raw = _one(headers, "origin")
        origin = normalize(raw) if raw else None
        if origin is None or not (origin == own or _trusted(origin)):
            return 403, "origin_refused", "Requests from this Origin are refused."
    return None


def _actor_of_token(raw: str, scope: dict[str, Any]) -> Actor | None:
    if raw.startswith(ACCESS_PREFIX):
        # An OAuth access token: good only for this server's /mcp (RFC 8707 audience).
        grant = authenticate_mcp_access(raw, resource_of_scope(scope))
        if grant is None:
            return None
        return Actor(
            user=grant.user,
            via="mcp",
            label=grant.user.username,
            ip=scope_client_ip(scope),
            extra={"mcp_grant": grant.pk},
        )
    row = authenticate_mcp_token(raw)
    if row is None:
        return None
    extra: dict[str, Any] = {"mcp_token": row.pk}
    turn = scope_of(row)
    if turn is not None:
        extra[TURN_SCOPE] = turn  # a CLI turn's token: its writes become its proposals
    return Actor(
        user=row.user,
        via="mcp",
        label=row.user.username,
        ip=scope_client_ip(scope),
        extra=extra,
    )


class McpHttpMount:
    """ASGI: `/mcp` to HAL's MCP server, every other HTTP request to `app`."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.max_body = int(getattr(settings, "HAL_MCP_MAX_BODY_BYTES", DEFAULT_MAX_BODY))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._manager: StreamableHTTPSessionManager | None = None
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Lock | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            remember(scope)  # this process's own address, for its CLI turns
        if scope["type"] == "http" and scope["path"].rstrip("/") == MCP_PATH:
            await self.serve(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def serve(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Check the door, then hand the request to the SDK's session manager."""
        refusal = origin_refusal(scope)
        if refusal is not None:
            await _refuse(send, *refusal)
            return
        if scope.get("method") != "POST":
            # No server-initiated messages, so no GET event stream (and no session to
            # DELETE): the Streamable HTTP transport's answer for that is 405. A stream
            # would also outlive its token's revocation (the token is read once).
            await _refuse(send, 405, "method_not_allowed", "Only POST is served at /mcp.")
            return
        token = bearer(_headers(scope))
        if token is None:
            await _refuse(
                send,
                401,
                "not_authenticated",
                "Send an MCP token as a Bearer.",
                challenge(scope),
            )
            return
        # Every token, a CLI turn's too, is checked in the database on every request: its
        # owner may have been disabled, its turn may have ended in another process.
        actor = await database_sync_to_async(_actor_of_token)(token, scope)
        if actor is None:
            await _refuse(
                send,
                401,
                "invalid_token",
                "The MCP token is unknown, expired or revoked.",
                challenge(scope, "invalid_token"),
            )
            return
        # The SDK never sees the cookie header (nothing downstream may use a session).
        inner = dict(scope)
        inner["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() != b"cookie"]
        inner[SCOPE_ACTOR] = actor
        manager = await self._running_manager()
        await manager.handle_request(inner, receive, send)

    async def _running_manager(self) -> StreamableHTTPSessionManager:
        """The session manager of this event loop, started on first use (daphne sends no
        ASGI lifespan events, so it cannot be started at boot)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._starting is None:
            self._loop, self._manager, self._task = loop, None, None
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._manager is None:
                hal = HalMCPServer(None)
                manager = StreamableHTTPSessionManager(
                    app=hal.lowlevel,
                    json_response=True,
                    stateless=True,
                    max_request_body_size=self.max_body,
                )
                ready = asyncio.Event()

                async def run() -> None:
                    async with manager.run():
                        ready.set()
                        # Until the process stops: tells listen streams of resource changes.
                        await hal.changes.watch()

                self._task = loop.create_task(run(), name="hal-mcp-http")
                waiter = loop.create_task(ready.wait())
                await asyncio.wait({self._task, waiter}, return_when=asyncio.FIRST_COMPLETED)
                if not ready.is_set():  # the manager failed to start: say why, retry next time
                    waiter.cancel()
                    self._task.result()
                    raise RuntimeError("the MCP session manager stopped while starting")
                self._manager = manager
        assert self._manager is not None
        return self._manager
