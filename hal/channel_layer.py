"""The Redis channel layer HAL runs on: channels_redis's pub/sub layer, with a group's
members in this process served at once, and forgetting a channel that will not be read
again (channels_redis unsubscribes only a cancelled read).

Local first: a `group_send` puts the message straight into the queues of the group's
members in this process, then publishes it once for the other processes; its echo from
Redis is recognised (the same bytes, expected back) and dropped, so nobody gets it twice.
A streamed reply's frames reach the sockets of the process that runs the turn without a
Redis round trip and a decode in the layer's one reader task (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from channels_redis.pubsub import (
    RedisPubSubChannelLayer,
    RedisPubSubLoopLayer,
    RedisSingleShardConnection,
)
from channels_redis.utils import _wrap_close, decode_hosts

# Echoes not seen after this long are forgotten (the group's last local member left
# before its echo arrived, so Redis never sent it back).
ECHO_SECONDS = 60.0
ECHO_MAX = 10_000


class _EchoFilteringShard(RedisSingleShardConnection):
    """One Redis connection of the layer; drops the echoes of this process's own sends."""

    channel_layer: LocalFirstLoopLayer

    def _receive_message(self, message: Any) -> None:
        if message is not None and self.channel_layer.take_echo(message["data"]):
            return
        super()._receive_message(message)


class LocalFirstLoopLayer(RedisPubSubLoopLayer):
    """The per-event-loop part of PubSubLayer: local members first, then one PUBLISH."""

    def __init__(self, hosts: Any = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(hosts, *args, **kwargs)
        self._shards = [_EchoFilteringShard(host, self) for host in decode_hosts(hosts)]
        self._echoes: dict[bytes, int] = {}
        self._echo_order: deque[tuple[float, bytes]] = deque()

    def _expect_echo(self, data: bytes) -> None:
        now = time.monotonic()
        self._echoes[data] = self._echoes.get(data, 0) + 1
        self._echo_order.append((now, data))
        while self._echo_order and (
            len(self._echo_order) > ECHO_MAX or now - self._echo_order[0][0] > ECHO_SECONDS
        ):
            _at, old = self._echo_order.popleft()
            self._drop_echo(old)

    def _drop_echo(self, data: bytes) -> None:
        count = self._echoes.get(data, 0)
        if count <= 1:
            self._echoes.pop(data, None)
        else:
            self._echoes[data] = count - 1

    def take_echo(self, data: bytes) -> bool:
        """Whether `data` is the echo of a message this process delivered itself."""
        if data in self._echoes:
            self._drop_echo(data)
            return True
        return False

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        group_channel = self._get_group_channel_name(group)
        data = self.channel_layer.serialize(message)
        members = [
            self.channels[name]
            for name in self.groups.get(group_channel, ())
            if name in self.channels
        ]
        for queue in members:
            queue.put_nowait(data)
        if members:
            # Subscribed to the group while it has local members: Redis sends it back.
            self._expect_echo(data)
        try:
            await self._get_shard(group_channel).publish(group_channel, data)
        except BaseException:
            if members:
                self._drop_echo(data)
            raise


class PubSubLayer(RedisPubSubChannelLayer):
    """One PUBLISH per event; groups are kept per process, so they never expire."""

    def _get_layer(self) -> LocalFirstLoopLayer:
        loop = asyncio.get_running_loop()
        try:
            layer: LocalFirstLoopLayer = self._layers[loop]
        except KeyError:
            layer = LocalFirstLoopLayer(*self._args, **self._kwargs, channel_layer=self)
            self._layers[loop] = layer
            _wrap_close(self, loop)
        return layer

    async def discard_channel(self, channel: str) -> None:
        """Stop listening on a channel of this process (a one-off read, e.g. the health
        check's): the layer would otherwise stay subscribed to it for the process's life."""
        layer = self._get_layer()
        if layer.channels.pop(channel, None) is not None:
            await layer._get_shard(channel).unsubscribe(channel)
