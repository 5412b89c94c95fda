"""The provider-neutral protocol: messages, tool specs, errors and hints."""

from __future__ import annotations

import secrets

import pytest

from providers.base import (
    ChatMessage,
    ProviderError,
    ToolCall,
    ToolResult,
    ToolSpec,
    secret_hint,
)

SPEC = ToolSpec(
    name="list_servers",
    description="List servers in the fleet.",
    input_schema={"type": "object", "properties": {"status": {"type": "string"}}},
)


def test_tool_spec_exports_anthropic_format():
    assert SPEC.to_anthropic() == {
        "name": "list_servers",
        "description": "List servers in the fleet.",
        "input_schema": {"type": "object", "properties": {"status": {"type": "string"}}},
    }


def test_tool_spec_exports_openai_format():
    assert SPEC.to_openai() == {
        "type": "function",
        "function": {
            "name": "list_servers",
            "description": "List servers in the fleet.",
            "parameters": {"type": "object", "properties": {"status": {"type": "string"}}},
        },
    }


def test_provider_error_kinds_are_closed():
    err = ProviderError("rate_limited", "slow down", status=429)
    assert (err.kind, err.message, err.status) == ("rate_limited", "slow down", 429)
    assert "rate_limited" in str(err)
    with pytest.raises(ValueError):
        ProviderError("teapot", "no")


def test_chat_message_roles_are_checked():
    with pytest.raises(ValueError):
        ChatMessage(role="system", text="no")
    with pytest.raises(ValueError):
        ChatMessage(role="tool_result", text="results need tool_results")
    call = ToolCall(id="c1", name="list_servers", arguments={})
    msg = ChatMessage.assistant("checking", tool_calls=[call])
    assert msg.role == "assistant" and msg.tool_calls == (call,)
    res = ChatMessage.results(ToolResult(tool_call_id="c1", content="[]"))
    assert res.role == "tool_result" and res.tool_results[0].tool_call_id == "c1"


def test_secret_hint_shows_only_the_ends():
    secret = "sk-" + secrets.token_urlsafe(32)
    hint = secret_hint(secret)
    assert hint == f"sk-…{secret[-4:]}"
    assert secret not in hint
    assert secret_hint("short") == "…"
    assert secret_hint("") == ""


async def test_bounded_stream_bounds_silence_and_the_whole_stream():
    import asyncio

    from providers.base import ProviderError, bounded_stream

    closed = []

    async def ticking(n, pause):
        try:
            for i in range(n):
                await asyncio.sleep(pause)
                yield i
        finally:
            closed.append(n)

    # Steady: ten events 0.05 s apart pass an idle bound of 0.5 s.
    got = [i async for i in bounded_stream(ticking(10, 0.05), idle=0.5, total=30)]
    assert got == list(range(10))
    # Silent: one pause longer than the idle bound.
    with pytest.raises(ProviderError) as err:
        [i async for i in bounded_stream(ticking(2, 1.0), idle=0.2, total=30)]
    assert err.value.kind == "timeout"
    # Endless but steady: the overall cap ends it.
    with pytest.raises(ProviderError) as err:
        [i async for i in bounded_stream(ticking(10_000, 0.02), idle=5, total=0.3)]
    assert err.value.kind == "timeout"
    assert closed == [10, 2, 10_000]  # the source is closed on every path


async def test_the_idle_bound_covers_only_the_wait_for_an_event():
    import asyncio

    from providers.base import bounded_stream

    async def ticking(n):
        for i in range(n):
            await asyncio.sleep(0.01)
            yield i

    # A consumer slower than the idle bound between events is not cut off: the bound is
    # the provider's silence, not the consumer's work.
    got = []
    async for i in bounded_stream(ticking(4), idle=0.1, total=30):
        got.append(i)
        await asyncio.sleep(0.25)
    assert got == [0, 1, 2, 3]


async def test_a_cancellation_from_outside_stays_a_cancellation():
    import asyncio

    from providers.base import bounded_stream

    waiting = asyncio.Event()

    async def silent():
        waiting.set()
        await asyncio.sleep(30)
        yield 0

    async def consume():
        return [i async for i in bounded_stream(silent(), idle=0.2, total=30)]

    task = asyncio.create_task(consume())
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # and after an idle timeout, the consuming task is not left marked as cancelled
    from providers.base import ProviderError

    async def timed_out():
        try:
            [i async for i in bounded_stream(silent(), idle=0.1, total=30)]
        except ProviderError as err:
            assert err.kind == "timeout"
        return asyncio.current_task().cancelling()

    assert await asyncio.create_task(timed_out()) == 0


async def test_a_source_that_swallows_the_timeouts_cancel_leaves_no_cancel_behind():
    import asyncio

    from providers.base import bounded_stream

    async def stubborn():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass  # swallowed: the item still comes
        yield "late"

    async def consume():
        got = [i async for i in bounded_stream(stubborn(), idle=0.1, total=30)]
        await asyncio.sleep(0)  # a pending cancel would land here
        return got, asyncio.current_task().cancelling()

    assert await asyncio.create_task(consume()) == (["late"], 0)
