"""Helpers shared by the provider tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from providers.base import ProviderError, StreamEvent, TextDelta, ToolCall, Usage


class CountingCredential:
    """An async credential getter that counts how often the provider asked for it."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        return self.secret


async def collect(aiter) -> list[StreamEvent]:
    return [event async for event in aiter]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def tool_calls_of(events: list[StreamEvent]) -> list[ToolCall]:
    return [e for e in events if isinstance(e, ToolCall)]


def usage_of(events: list[StreamEvent]) -> Usage:
    (usage,) = [e for e in events if isinstance(e, Usage)]
    return usage


async def raises_provider_error(call: Callable[[], Awaitable[object]]) -> ProviderError:
    try:
        await call()
    except ProviderError as err:
        return err
    raise AssertionError("no ProviderError raised")
