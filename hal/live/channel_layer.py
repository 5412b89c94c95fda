"""The channel layers HAL runs on: channels' in-memory layer (the embedded default) and
channels_redis's pub/sub layer, with a group's members in this process served at once, and
forgetting a channel that will not be read again (channels_redis unsubscribes only a
cancelled read).

Both keep each channel's messages in a `hal.live.channel_queue.ChannelQueue`: a socket that
falls behind gets a reply's deltas merged rather than dropped, never loses any other
event, and is closed to resume from the database past a bound (the stock layers drop
past 100 messages, or queue without limit).

Local first: a `group_send` puts the message straight into the queues of the group's
members in this process, then publishes it once for the other processes; its echo from
Redis is recognised (the same bytes, expected back) and dropped, so nobody gets it twice.
A streamed reply's frames reach the sockets of the process that runs the turn without a
Redis round trip and a decode in the layer's one reader task (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from copy import deepcopy
from typing import Any

from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import (
    RedisPubSubChannelLayer,
    RedisPubSubLoopLayer,
    RedisSingleShardConnection,
)
from channels_redis.utils import _wrap_close, decode_hosts

from hal.live.channel_queue import ChannelQueue

log = logging.getLogger("hal.channel_layer")

# Echoes not seen after this long are forgotten (the group's last local member left
# before its echo arrived, so Redis never sent it back).
ECHO_SECONDS = 60.0
ECHO_MAX = 10_000


class _EchoFilteringShard(RedisSingleShardConnection):
    """One Redis connection of the layer; drops the echoes of this process's own sends."""

    channel_layer: LocalFirstLoopLayer

    async def _do_receiving(self) -> None:
        """channels_redis's receive loop, except that a cancel is never lost: redis-py may
        turn a cancel that lands in a socket read into a ConnectionError, which the stock
        loop logs and retries after a second — forever, holding the loop's shutdown (daphne
        lingered until SIGKILL after SIGTERM; a test's teardown hung)."""
        current = asyncio.current_task()
        while True:
            try:
                if self._pubsub and self._pubsub.subscribed:
                    message = await self._pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=0.1
                    )
                    self._receive_message(message)
                else:
                    await asyncio.sleep(0.1)
            except (TimeoutError, asyncio.CancelledError, GeneratorExit):
                raise
            except Exception:
                if current is not None and current.cancelling():
                    raise asyncio.CancelledError from None
                log.exception("Unexpected exception in the Redis receive task")
                await asyncio.sleep(1)

    def _receive_message(self, message: Any) -> None:
        """channels_redis's delivery, with each message decoded once for all its members
        (their queues hold messages, not bytes: a queue merges a reply's deltas)."""
        if message is None:
            return
        layer = self.channel_layer
        if layer.take_echo(message["data"]):
            return
        name = message["channel"]
        if isinstance(name, bytes):
            name = name.decode()
        if name in layer.channels:
            targets = [layer.channels[name]]
        else:
            targets = [layer.channels[c] for c in layer.groups.get(name, ()) if c in layer.channels]
        if targets:
            decoded = layer.channel_layer.deserialize(message["data"])
            for queue in targets:
                queue.put_nowait(decoded)


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

    async def _subscribe_to_channel(self, channel: str) -> None:
        self.channels[channel] = ChannelQueue()
        await self._get_shard(channel).subscribe(channel)

    async def receive(self, channel: str) -> dict[str, Any]:
        """channels_redis's receive; the queue already holds the decoded message."""
        if channel not in self.channels:
            await self._subscribe_to_channel(channel)
        try:
            message: dict[str, Any] = await self.channels[channel].get()
        except (asyncio.CancelledError, TimeoutError, GeneratorExit):
            # As channels_redis: a cancelled read is the consumer leaving.
            if self.channels.pop(channel, None) is not None:
                try:
                    await self._get_shard(channel).unsubscribe(channel)
                except BaseException:
                    log.exception("could not unsubscribe %s", channel)
            raise
        return message

    def receive_nowait(self, channel: str) -> dict[str, Any] | None:
        """A message already queued on `channel`, or None (hal/live/dispatch.py)."""
        queue = self.channels.get(channel)
        if queue is None or queue.empty():
            return None
        message: dict[str, Any] = queue.get_nowait()
        return message

    def take_echo(self, data: bytes) -> bool:
        """Whether `data` is the echo of a message this process delivered itself."""
        if data in self._echoes:
            self._drop_echo(data)
            return True
        return False

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await self._group_send(group, message, owned=False)

    async def group_send_owned(self, group: str, message: dict[str, Any]) -> None:
        """`group_send` of a message its sender hands over and never changes again: the
        members here share it rather than a decoded copy (a room's frames, issue 29)."""
        await self._group_send(group, message, owned=True)

    async def _group_send(self, group: str, message: dict[str, Any], *, owned: bool) -> None:
        group_channel = self._get_group_channel_name(group)
        data = self.channel_layer.serialize(message)
        members = [
            self.channels[name]
            for name in self.groups.get(group_channel, ())
            if name in self.channels
        ]
        if members:
            # Decoded from the bytes sent: the members get what a remote process would,
            # and nothing the caller changes afterwards. One copy, shared (read only) —
            # or, handed over (`owned`), the message itself.
            shared = message if owned else self.channel_layer.deserialize(data)
            for queue in members:
                queue.put_nowait(shared)
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

    def receive_nowait(self, channel: str) -> dict[str, Any] | None:
        """A message already queued on `channel`, or None (hal/live/dispatch.py)."""
        return self._get_layer().receive_nowait(channel)

    async def group_send_owned(self, group: str, message: dict[str, Any]) -> None:
        """`group_send` of a message the sender never changes again (LocalFirstLoopLayer)."""
        await self._get_layer().group_send_owned(group, message)

    async def discard_channel(self, channel: str) -> None:
        """Stop listening on a channel of this process (a one-off read, e.g. the health
        check's): the layer would otherwise stay subscribed to it for the process's life."""
        layer = self._get_layer()
        if layer.channels.pop(channel, None) is not None:
            await layer._get_shard(channel).unsubscribe(channel)


_SCALARS = (str, int, float, bool, type(None))
CLEAN_SECONDS = 1.0  # MemoryLayer: how often at most expired channels are looked for


def copy_message(value: Any) -> Any:
    """`deepcopy` for a message's JSON-like values (dicts, lists, scalars), at a third of
    its cost: a frame is copied once per `group_send` (issue 29); anything else is
    deep-copied as before."""
    kind = type(value)
    if kind is dict:
        return {key: copy_message(item) for key, item in value.items()}
    if kind is list:
        return [copy_message(item) for item in value]
    if kind in _SCALARS:
        return value
    return deepcopy(value)


class MemoryLayer(InMemoryChannelLayer):
    """channels' in-memory layer (one process) with HAL's channel queues: no message is
    dropped at the stock 100-message capacity; one copy of a group message is shared by
    its members; a channel left unread for `expiry` seconds is closed to resume instead
    of silently leaving its groups."""

    channels: dict[str, ChannelQueue]  # type: ignore[assignment]

    def _queue(self, channel: str) -> ChannelQueue:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = ChannelQueue()
        return queue

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._queue(channel).put_nowait(copy_message(message))

    async def receive(self, channel: str) -> dict[str, Any]:
        self.require_valid_channel_name(channel)
        self._clean_expired()
        queue = self._queue(channel)
        try:
            message: dict[str, Any] = await queue.get()
        finally:
            if queue.empty() and not queue.behind and self.channels.get(channel) is queue:
                del self.channels[channel]
        return message

    def receive_nowait(self, channel: str) -> dict[str, Any] | None:
        """A message already queued on `channel`, or None (hal/live/dispatch.py)."""
        queue = self.channels.get(channel)
        if queue is None or queue.empty():
            return None
        message: dict[str, Any] = queue.get_nowait()
        if queue.empty() and not queue.behind and self.channels.get(channel) is queue:
            del self.channels[channel]
        return message

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        members = self.groups.get(group)
        if members:
            shared = copy_message(message)  # isolated from the caller; read only downstream
            for channel in members:
                self._queue(channel).put_nowait(shared)

    async def group_send_owned(self, group: str, message: dict[str, Any]) -> None:
        """`group_send` of a message its sender hands over and never changes again: its
        members share it, uncopied (a room's frames, issue 29)."""
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in self.groups.get(group) or ():
            self._queue(channel).put_nowait(message)

    _cleaned_at = float("-inf")

    def _clean_expired(self) -> None:
        """Stock: a channel whose oldest message is older than `expiry` leaves its groups.
        Here it is told to close (and resume) instead: a live socket loses nothing.
        Stock runs it on every send and read; it walks every channel and group member, so
        here it runs at most once a second (a tenth of `expiry` when that is shorter)."""
        now = time.monotonic()
        if now - self._cleaned_at < min(CLEAN_SECONDS, self.expiry / 10):
            return
        self._cleaned_at = now
        limit = now - self.expiry
        for queue in list(self.channels.values()):
            if not queue.behind and queue.oldest is not None and queue.oldest < limit:
                queue.fall_behind()
        timeout = int(time.time()) - self.group_expiry
        for channels in self.groups.values():
            for name, joined in list(channels.items()):
                if joined and joined < timeout:
                    channels.pop(name, None)
