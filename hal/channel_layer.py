"""The Redis channel layer HAL runs on: channels_redis's pub/sub layer, plus forgetting a
channel that will not be read again (channels_redis unsubscribes only a cancelled read)."""

from __future__ import annotations

from channels_redis.pubsub import RedisPubSubChannelLayer


class PubSubLayer(RedisPubSubChannelLayer):
    """One PUBLISH per event; groups are kept per process, so they never expire."""

    async def discard_channel(self, channel: str) -> None:
        """Stop listening on a channel of this process (a one-off read, e.g. the health
        check's): the layer would otherwise stay subscribed to it for the process's life."""
        layer = self._get_layer()
        if layer.channels.pop(channel, None) is not None:
            await layer._get_shard(channel).unsubscribe(channel)
