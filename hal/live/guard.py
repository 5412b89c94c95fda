"""WebSockets live only as long as their session: logout, deactivation, password change.

A socket joins two channel-layer groups at connect: its session's and its user's.
- Logout (Django's `user_logged_out`, whatever view sent it) closes the session's sockets.
- A user saved with `is_active=False` or a new password (or deleted) asks every socket of
  that user to re-check its session; the ones whose session no longer authenticates close.
- Every inbound frame re-checks the session first (so a session ended where no event
  reaches this process — expiry, another web process on the in-memory layer — is caught
  before the frame does anything); outbound events do so at most every
  `HAL_WS_RECHECK_SECONDS` (60), so a socket that only listens stops too.

The events go through the channel layer, so with Redis they reach every web process.
The re-check is Django's own `auth.get_user`: session present and not expired, user
active, session auth hash (the password) still valid.
"""

from __future__ import annotations

import hashlib
import logging
import time
from types import SimpleNamespace
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.http.cookie import parse_cookie
from django.utils import translation
from django.utils.module_loading import import_string

from hal.errors import HalError, InvalidInput
from hal.live.channel_queue import BEHIND_CODE
from hal.live.dispatch import DrainingConsumerMixin
from hal.live.events import send_message_now
from hal.observe import families as metrics
from hal.web.jsonin import loads_json, text_is_clean

log = logging.getLogger("hal.ws")

CLOSE_CODE = 4401  # the console's "log in again" close code (also used at connect)
CLOSE_EVENT = "hal.close"  # → SessionGuardMixin.hal_close
RECHECK_EVENT = "hal.recheck"  # → SessionGuardMixin.hal_recheck


def session_group(session_key: str) -> str:
    """The group of one session's sockets (the key is hashed: group names are visible
    to anyone who can read the channel layer, a session key is a credential)."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def user_group(user_id: Any) -> str:
    """The group of every socket of one user, whatever the session."""
    return f"user.{int(user_id)}"


def close_session_sockets(session_key: str | None) -> None:
    """Close every socket opened with this session (now, in every web process)."""
    if session_key:
        send_message_now(session_group(session_key), {"type": CLOSE_EVENT, "code": CLOSE_CODE})


def recheck_user_sockets(user_id: Any) -> None:
    """Ask every socket of this user to re-check its session, once the change commits."""
    group = user_group(user_id)
    transaction.on_commit(lambda: send_message_now(group, {"type": RECHECK_EVENT}))


def session_user(session_key: str | None, user_id: Any) -> Any | None:
    """The session's user, freshly loaded, if the session still authenticates `user_id`."""
    if not session_key:
        return None
    store = import_string(settings.SESSION_ENGINE + ".SessionStore")(session_key=session_key)
    # get_user reads only `.session`: a stand-in request is enough.
    user = auth.get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
    if not user.is_authenticated or not user.is_active or user.pk != user_id:
        return None
    return user


class SessionGuardMixin(DrainingConsumerMixin):
    """For AsyncJsonWebsocketConsumer subclasses: call `guard_connect()` before accepting
    and `guard_disconnect()` on disconnect; inbound frames are re-checked and decoded
    strictly here (bad JSON or text → an `error` frame, nothing else happens)."""

    # The consumer's ASGI scope (a TypedDict union in types-channels), read here as a dict.
    scope: Any
    channel_layer: Any
    channel_name: str
    # Provided by the consumer class this is mixed into (AsyncJsonWebsocketConsumer).
    close: Any
    receive_json: Any
    _metrics_path: str | None = None  # the path this socket is counted under, once

    async def guard_connect(self) -> bool:
        """Join the session and user groups; False (socket closed) without a live user."""
        user = self.scope.get("user")
        session = self.scope.get("session")
        session_key = getattr(session, "session_key", None)
        if user is None or not user.is_authenticated or not user.is_active or not session_key:
            await self.close(code=CLOSE_CODE)
            return False
        self._guard_user_id = user.pk
        self._guard_checked_at = time.monotonic()  # AuthMiddleware just checked it
        self._guard_groups = (session_group(session_key), user_group(user.pk))
        for group in self._guard_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        if metrics.ON:
            self._metrics_path = metrics.ws_path(self.scope)
            metrics.websocket_connections.labels(self._metrics_path).inc()
        return True

    async def guard_disconnect(self) -> None:
        counted = getattr(self, "_metrics_path", None)
        if counted is not None:  # once: a second disconnect does not count again
            self._metrics_path = None
            metrics.websocket_connections.labels(counted).dec()
        for group in getattr(self, "_guard_groups", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def session_alive(self) -> bool:
        """Re-check the session; refresh the scope's user (permissions, is_active) on
        success, close the socket on failure."""
        session = self.scope.get("session")
        user = await database_sync_to_async(session_user)(
            getattr(session, "session_key", None), getattr(self, "_guard_user_id", None)
        )
        self._guard_checked_at = time.monotonic()
        if user is None:
            self._guard_closed = True
            await self.close(code=CLOSE_CODE)
            return False
        self.scope["user"] = user
        return True

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Outbound events re-check the session too, at most every HAL_WS_RECHECK_SECONDS:
        a socket that only listens (/ws/ops/) stops when its session expires."""
        kind = message.get("type", "")
        if kind.startswith("hal.") and getattr(self, "_guard_closed", False):
            return  # closed by the guard: no more events (websocket.* still run: cleanup)
        if kind in ("hal.event", "hal.events") and hasattr(self, "_guard_user_id"):
            every = float(getattr(settings, "HAL_WS_RECHECK_SECONDS", 60))
            if time.monotonic() - getattr(self, "_guard_checked_at", 0.0) >= every:
                if not await self.session_alive():
                    return
        # AsyncConsumer.dispatch minus its `aclose_old_connections()`: that is a trip into
        # a thread and back before every handler — every streamed frame on every socket,
        # each waiting for the GIL on the loop that also runs the model calls. HAL's
        # handlers reach the database only through database_sync_to_async (which closes
        # old connections around its own call) or HAL's DB threads (hal.db.threads).
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message.get('type')}")
        await handler(message)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kw: Any
    ) -> None:
        if metrics.ON:
            metrics.websocket_frames.labels(metrics.ws_path(self.scope), "in").inc()
        if not await self.session_alive():
            return
        try:
            content = loads_json(text_data if text_data is not None else bytes_data or b"")
        except InvalidInput as exc:
            with translation.override(getattr(self, "language", "en")):
                error = exc.as_dict()["error"]
            await self.send_json({"type": "error", "ref": None, "data": error})
            return
        try:
            await self.receive_json(content, **kw)
        except HalError as exc:
            # A refusal a handler did not answer itself is still an answer, never a 1011
            # close: the socket stays open.
            with translation.override(getattr(self, "language", "en")):
                error = exc.as_dict()["error"]
            ref = content.get("ref") if isinstance(content, dict) else None
            await self.send_json({"type": "error", "ref": ref, "data": error})

    async def hal_close(self, message: dict[str, Any]) -> None:
        self._guard_closed = True
        await self.close(code=message.get("code", CLOSE_CODE))

    async def hal_behind(self, message: dict[str, Any]) -> None:
        """The socket fell too far behind its events (hal/live/channel_queue.py): close it; the
        client reconnects and resumes from the database."""
        self._guard_closed = True
        if metrics.ON:
            metrics.websocket_behind_closes.labels(metrics.ws_path(self.scope)).inc()
        # A sign of a saturated web process (docs/performance.md, capacity).
        log.warning("a socket fell too far behind its events; closed it to resume")
        await self.close(code=message.get("code", BEHIND_CODE))

    async def send_json(self, content: Any, close: bool = False) -> None:
        """Every frame to the browser goes through here: counted (a counter inc)."""
        if metrics.ON:
            metrics.websocket_frames.labels(metrics.ws_path(self.scope), "out").inc()
        await super().send_json(content, close)  # type: ignore[misc]

    async def hal_recheck(self, message: dict[str, Any]) -> None:
        await self.session_alive()


def _on_logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    session = getattr(request, "session", None)
    close_session_sockets(getattr(session, "session_key", None))


def _remember_credentials(sender: Any, instance: Any, update_fields: Any = None, **kw: Any) -> None:
    """Before a user is saved, note whether the save may deactivate or re-password it."""
    instance._hal_ws_before = None
    if instance.pk is None:
        return
    if update_fields is not None and not {"is_active", "password"} & set(update_fields):
        return  # e.g. last_login on every login: no extra query
    instance._hal_ws_before = (
        sender._default_manager.filter(pk=instance.pk).values_list("is_active", "password").first()
    )


def _recheck_after_save(sender: Any, instance: Any, created: bool = False, **kw: Any) -> None:
    before = getattr(instance, "_hal_ws_before", None)
    if created or before is None:
        return
    was_active, old_password = before
    if (was_active and not instance.is_active) or old_password != instance.password:
        recheck_user_sockets(instance.pk)


def _recheck_after_delete(sender: Any, instance: Any, **kw: Any) -> None:
    recheck_user_sockets(instance.pk)


def connect_signals() -> None:
    """Hook logout and user saves (any path: admin, actions, `changepassword`, shell)."""
    user_model = auth.get_user_model()
    user_logged_out.connect(_on_logged_out, dispatch_uid="hal.live.guard.logout")
    post_delete.connect(_recheck_after_delete, sender=user_model, dispatch_uid="hal.live.guard.del")
    pre_save.connect(_remember_credentials, sender=user_model, dispatch_uid="hal.live.guard.pre")
    post_save.connect(_recheck_after_save, sender=user_model, dispatch_uid="hal.live.guard.post")


class CookieTextValidator:
    """ASGI middleware before the session lookup: a WebSocket whose cookies hold NUL or a
    lone surrogate is refused (PostgreSQL would fail on the session key, SQLite not)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        for name, value in scope.get("headers", []):
            if name.lower() == b"cookie":
                cookies = parse_cookie(value.decode("latin1"))
                if not all(text_is_clean(k + v) for k, v in cookies.items()):
                    return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
