"""The chat WebSocket (/ws/ai/): room events for the logged-in operator, sending, and
watching an incident's room (the investigator's, read by whoever may view the incident)."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.utils import translation

from chatrooms import actions, resume
from chatrooms.orchestrator import get_orchestrator
from hal.actions.base import Actor
from hal.errors import HalError
from hal.i18n import localize, session_language
from hal.live.fastjson import JsonSocketMixin
from hal.live.guard import SessionGuardMixin

# The WebSocket subprotocol a client asks for to get a channel message's events in one
# WebSocket message, {"type": "events", "events": [{"type", "data"}, …]} (the panel does):
# at 64 streaming replies, one WebSocket message per event — each through channels' send,
# daphne and autobahn — was a quarter of the web process's CPU (issue 29).
EVENTS_PROTOCOL = "hal.events"


class ChatConsumer(SessionGuardMixin, JsonSocketMixin, AsyncJsonWebsocketConsumer):
    """Joins every room group of its operator; events arrive as {"type", "data"} (several
    in one {"type": "events"} message on the `hal.events` subprotocol)."""

    groups_joined: set[str]
    bundled = False

    async def connect(self) -> None:
        self.groups_joined = set()
        if not await self.guard_connect():  # also: closed with the session (hal/live/guard.py)
            return
        user = self.user = self.scope["user"]
        # The operator's language, read once (the session may need the database).
        self.language = await database_sync_to_async(session_language)(self.scope.get("session"))
        await self.channel_layer.group_add(actions.operator_group(user.pk), self.channel_name)
        self.groups_joined.add(actions.operator_group(user.pk))
        await self._join_rooms()
        # Remember this loop: decisions taken in sync threads resume turns here; the
        # lease keeper answers other processes' resume and reset requests.
        get_orchestrator().remember_loop(asyncio.get_running_loop())
        get_orchestrator().keeper.ensure_running(asyncio.get_running_loop())
        self.bundled = EVENTS_PROTOCOL in self.scope.get("subprotocols", ())
        await self.accept(EVENTS_PROTOCOL if self.bundled else None)

    async def _join_rooms(self) -> None:
        rooms = await database_sync_to_async(actions.ensure_rooms)(self.user)
        for room in rooms:
            group = actions.room_group(room.pk)
            if group not in self.groups_joined:
                await self.channel_layer.group_add(group, self.channel_name)
                self.groups_joined.add(group)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)
        await self.guard_disconnect()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "ping":
            await self.send_json({"type": "pong"})
        elif kind == "message.send":
            await self._send_message(content)
        elif kind == "turn.stop":
            await self._stop_turn(content)
        elif kind == "resume":
            await resume.handle_resume(self, content)
        elif kind == "room.watch":
            await self._watch_room(content)

    async def _watch_room(self, content: dict[str, Any]) -> None:
        """{"type": "room.watch", "room_id", "ref"} → room.watching: this socket hears the
        incident room's events (message.created, investigation.updated) from now on."""
        actor = Actor.from_scope(self.scope, via="ws")
        try:
            room = await database_sync_to_async(actions.watchable_room)(
                actor, content.get("room_id")
            )
        except HalError as exc:
            with translation.override(self.language):
                error = exc.as_dict()["error"]
            await self.send_json({"type": "error", "ref": content.get("ref"), "data": error})
            return
        group = actions.room_group(room.pk)
        if group not in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups_joined.add(group)
        data = {"room_id": room.pk, "incident_id": room.incident_id}
        await self.send_json({"type": "room.watching", "ref": content.get("ref"), "data": data})

    async def _stop_turn(self, content: dict[str, Any]) -> None:
        """{"type": "turn.stop", "room_id", "turn_id", "ref"} → turn.stopped (or error)."""
        from chatrooms import stopping

        actor = Actor.from_scope(self.scope, via="ws")
        try:
            ids = await database_sync_to_async(stopping.check_stop_turn)(
                actor=actor, room_id=content.get("room_id"), turn_id=content.get("turn_id")
            )
        except HalError as exc:
            with translation.override(self.language):
                error = exc.as_dict()["error"]
            await self.send_json({"type": "error", "ref": content.get("ref"), "data": error})
            return
        await self.send_json({"type": "turn.stopped", "ref": content.get("ref"), "data": ids})

    async def _send_message(self, content: dict[str, Any]) -> None:
        """{"type": "message.send", "room_id", "text", "context", "attachments", "ref"}
        → message.accepted."""
        actor = Actor.from_scope(self.scope, via="ws")
        try:
            sent = await database_sync_to_async(actions.check_send_message)(
                actor=actor,
                room_id=content.get("room_id"),
                text=content.get("text"),
                context=content.get("context"),
                attachments=content.get("attachments"),
            )
        except HalError as exc:
            with translation.override(self.language):
                error = exc.as_dict()["error"]
            await self.send_json({"type": "error", "ref": content.get("ref"), "data": error})
            return
        data = localize(sent.message.as_dict(), self.language)
        await self.send_json({"type": "message.accepted", "ref": content.get("ref"), "data": data})
        get_orchestrator().start_sent(sent)

    async def hal_events(self, message: dict[str, Any]) -> None:
        """A room's events of several replies sent together (chatrooms/run/framing.py): in
        order, each as its own WebSocket message or, bundled, all in one."""
        if not self.bundled:
            for event, data in message["events"]:
                await self.send_json(await self._event(event, data))
            return
        frames = [await self._event(event, data) for event, data in message["events"]]
        await self.send_json({"type": "events", "events": frames})

    async def hal_event(self, message: dict[str, Any]) -> None:
        await self.send_json(await self._event(message["event"], message["data"]))

    async def _event(self, event: str, data: dict[str, Any]) -> dict[str, Any]:
        """The browser's {"type", "data"} of one room event."""
        if event == "message.delta":
            # Most frames: ids, offsets and model text, nothing to translate (no `_i18n`).
            return {"type": event, "data": data}
        if event in ("connection.updated", "room.updated"):
            await self._join_rooms()  # a new connection brings a new room to listen to
        return {"type": event, "data": localize(data, getattr(self, "language", "en"))}
