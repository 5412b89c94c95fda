"""The console's live-update WebSocket (/ws/ops/): jobs, servers, incidents, proposals."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from hal.i18n import localize, session_language
from hal.live.events import OPS_GROUP
from hal.live.fastjson import JsonSocketMixin
from hal.live.guard import SessionGuardMixin


class OpsConsumer(SessionGuardMixin, JsonSocketMixin, AsyncJsonWebsocketConsumer):
    """Pushes console events to logged-in operators; refuses anonymous sockets."""

    async def connect(self) -> None:
        if not await self.guard_connect():
            return
        # The operator's language, read once (the session may need the database).
        self.language = await database_sync_to_async(session_language)(self.scope.get("session"))
        await self.channel_layer.group_add(OPS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(OPS_GROUP, self.channel_name)
        await self.guard_disconnect()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def hal_event(self, message: dict) -> None:
        data = localize(message["data"], getattr(self, "language", "en"))
        await self.send_json({"type": message["event"], "data": data})
