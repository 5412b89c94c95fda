"""Anthropic and OpenAI-compatible providers against their wire-true fakes, through the SDKs."""

from __future__ import annotations

import secrets
import socket

import pytest

from providers.anthropic_provider import AnthropicProvider
from providers.base import ChatMessage, Stop, TextDelta, ToolCall, ToolResult, ToolSpec, Usage
from providers.openai_compat import OpenAICompatProvider
from tests.fakes.script import Reply, ScriptedToolCall

from .helpers import (
    CountingCredential,
    collect,
    raises_provider_error,
    text_of,
    tool_calls_of,
    usage_of,
)

SPEC = ToolSpec(
    name="list_servers",
    description="List servers in the fleet.",
    input_schema={
        "type": "object",
        "properties": {"status": {"type": "string"}, "limit": {"type": "integer"}},
    },
)


def last_body(kind, fake):
    reqs = fake.message_requests if kind == "anthropic" else fake.completion_requests
    return reqs[-1]


async def test_streams_text_usage_and_stop(wire, provider_api_key):
    kind, fake, factory = wire
    # Paced as a model streams: pieces read together reach the caller as one (issue 29).
    fake.replies.push(
        Reply(text="All forty servers are healthy.", input_tokens=33, token_delay=0.01)
    )
    provider, credential = factory()
    events = await collect(
        provider.stream(
            system="You are HAL.",
            messages=[ChatMessage.user("status?", speaker="alice")],
            tools=[SPEC],
            model="m-1",
        )
    )
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1, "text must arrive as several deltas, not one block"
    assert text_of(events) == "All forty servers are healthy."
    assert usage_of(events).input_tokens == 33
    assert usage_of(events).output_tokens > 0
    assert events[-1] == Stop("end")
    assert credential.calls == 1
    request = last_body(kind, fake)
    assert request.bearer() == provider_api_key
    assert request.json["model"] == "m-1"
    assert request.json["stream"] is True
    if kind == "anthropic":
        assert request.json["system"] == "You are HAL."
        assert request.json["tools"] == [SPEC.to_anthropic()]
    else:
        assert request.json["messages"][0] == {"role": "system", "content": "You are HAL."}
        assert request.json["tools"] == [SPEC.to_openai()]


async def test_streams_tool_calls_with_reassembled_arguments(wire):
    _, fake, factory = wire
    arguments = {"status": "degraded", "limit": 25, "note": "ünïcode ✓"}
    fake.replies.push(
        Reply(
            text="Let me look.",
            tool_calls=[
                ScriptedToolCall("list_servers", arguments, id="call_a"),
                ScriptedToolCall("list_servers", {"status": "up"}, id="call_b"),
            ],
        )
    )
    provider, _ = factory()
    events = await collect(
        provider.stream(system="s", messages=[ChatMessage.user("check")], tools=[SPEC], model="m-1")
    )
    calls = tool_calls_of(events)
    assert calls == [
        ToolCall(id="call_a", name="list_servers", arguments=arguments),
        ToolCall(id="call_b", name="list_servers", arguments={"status": "up"}),
    ]
    assert text_of(events) == "Let me look."
    assert events[-1] == Stop("tool_use")


async def test_list_models_returns_the_fakes_models(wire):
    _, fake, factory = wire
    provider, _ = factory()
    assert await provider.list_models() == fake.models


@pytest.mark.parametrize(
    ("failure", "kind", "status"),
    [
        ("401", "auth", 401),
        ("403", "auth", 403),
        ("429", "rate_limited", 429),
        ("500", "unavailable", 500),
        ("malformed", "bad_response", None),
    ],
)
async def test_failures_map_to_provider_errors(wire, failure, kind, status):
    _, fake, factory = wire
    provider, _ = factory()
    fake.fail_next(failure)
    err = await raises_provider_error(
        lambda: collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
        )
    )
    assert (err.kind, err.status) == (kind, status)
    fake.fail_next(failure)
    err = await raises_provider_error(provider.list_models)
    assert err.kind == kind


@pytest.mark.parametrize("failure", ["slow", "stall"])
async def test_slow_or_stalled_provider_times_out(wire, failure):
    _, fake, factory = wire
    provider, _ = factory(timeout=0.5)
    fake.fail_next(failure, delay=10)
    err = await raises_provider_error(
        lambda: collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
        )
    )
    assert err.kind == "timeout"


async def test_wrong_key_is_auth_error_and_never_echoed(wire):
    _, _, factory = wire
    wrong = "sk-wrong-" + secrets.token_urlsafe(24)
    provider, _ = factory(secret=wrong)
    err = await raises_provider_error(provider.list_models)
    assert err.kind == "auth"
    assert wrong not in str(err) and wrong not in repr(err)


async def test_unreachable_server_is_unavailable(wire):
    _, _, factory = wire
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    provider, _ = factory(base_url=f"http://127.0.0.1:{port}")
    err = await raises_provider_error(provider.list_models)
    assert err.kind == "unavailable"


async def test_one_retry_survives_a_single_rate_limit(wire):
    _, fake, factory = wire
    provider, _ = factory(max_retries=1)
    fake.fail_next("429")
    events = await collect(
        provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
    )
    assert text_of(events) == "Hello from the fake model."


async def test_credential_is_fetched_per_call_and_repr_shows_only_a_hint(wire, provider_api_key):
    _, _, factory = wire
    provider, credential = factory(credential_hint=f"sk-…{provider_api_key[-4:]}")
    await provider.list_models()
    await provider.list_models()
    assert credential.calls == 2
    assert provider_api_key not in repr(provider)
    assert f"sk-…{provider_api_key[-4:]}" in repr(provider)
    assert provider_api_key not in repr(vars(provider))


def conversation() -> list[ChatMessage]:
    call = ToolCall(id="call_1", name="list_servers", arguments={"status": "down"})
    return [
        ChatMessage.user("Any server down?", speaker="alice"),
        ChatMessage.user("I think web-3 is.", speaker="codex"),
        ChatMessage.assistant("Checking.", tool_calls=[call]),
        ChatMessage.results(ToolResult(tool_call_id="call_1", content='["web-3"]')),
        ChatMessage.assistant("web-3 is down."),
        ChatMessage.user("Isolate it?", speaker="bob"),
    ]


async def test_anthropic_wire_mapping_of_a_multi_speaker_tool_round_trip(
    fake_anthropic, provider_api_key
):
    fake = fake_anthropic
    provider = AnthropicProvider(
        base_url=fake.base_url, credential=CountingCredential(provider_api_key), max_retries=0
    )
    await collect(provider.stream(system="s", messages=conversation(), tools=[SPEC], model="m"))
    messages = fake.message_requests[-1].json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    first = messages[0]["content"]
    assert [b["text"] for b in first] == ["[alice]: Any server down?", "[codex]: I think web-3 is."]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "call_1", "name": "list_servers", "input": {"status": "down"}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": '["web-3"]', "is_error": False}
    ]
    assert messages[4]["content"] == [{"type": "text", "text": "[bob]: Isolate it?"}]


async def test_openai_wire_mapping_of_a_multi_speaker_tool_round_trip(
    fake_openai, provider_api_key
):
    fake = fake_openai
    provider = OpenAICompatProvider(
        base_url=fake.base_url, credential=CountingCredential(provider_api_key), max_retries=0
    )
    await collect(provider.stream(system="sys", messages=conversation(), tools=[SPEC], model="m"))
    messages = fake.completion_requests[-1].json["messages"]
    assert messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "[alice]: Any server down?"},
        {"role": "user", "content": "[codex]: I think web-3 is."},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "list_servers", "arguments": '{"status": "down"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '["web-3"]'},
        {"role": "assistant", "content": "web-3 is down."},
        {"role": "user", "content": "[bob]: Isolate it?"},
    ]


async def test_streams_one_after_another_reuse_one_kept_alive_connection(wire):
    # The model APIs stream chunked and keep the connection open: a reply read to its end
    # must hand the connection back to the pool, or every turn pays a new TCP (and, on the
    # real APIs, TLS) handshake before its request.
    kind, fake, factory = wire
    fake.chunked_streams = True
    provider, _ = factory()
    for n in range(3):
        fake.replies.push(Reply(text=f"reply {n} in a few words"))
        events = await collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
        )
        assert text_of(events) == f"reply {n} in a few words"
    requests = fake.message_requests if kind == "anthropic" else fake.completion_requests
    assert len(requests) == 3
    assert len({r.client_port for r in requests}) == 1, "each stream opened a new connection"


async def test_a_stream_held_open_after_done_still_completes_at_once(fake_openai, provider_api_key):
    # `[DONE]` ends the reply: a gateway that keeps the body open after it costs at most a
    # short bound (its connection is then dropped), never an idle-timeout failure.
    fake_openai.chunked_streams = True
    fake_openai.hold_after_done = 5.0
    provider = OpenAICompatProvider(
        base_url=fake_openai.base_url,
        credential=CountingCredential(provider_api_key),
        timeout=5.0,
        idle_timeout=0.5,
        total_timeout=3.0,
        max_retries=0,
    )
    fake_openai.replies.push(Reply(text="done already"))
    events = await collect(
        provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
    )
    assert text_of(events) == "done already"
    assert events[-1] == Stop("end")


async def test_usage_event_precedes_stop(wire):
    _, _, factory = wire
    provider, _ = factory()
    events = await collect(
        provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
    )
    kinds = [type(e) for e in events]
    assert kinds.index(Usage) < kinds.index(Stop) == len(kinds) - 1


async def test_a_steady_stream_longer_than_the_idle_timeout_completes(wire):
    # Each event arrives well within the idle bound, the whole reply takes several times it.
    _, fake, factory = wire
    words = " ".join(f"w{n}" for n in range(12))
    fake.replies.push(Reply(text=words, token_delay=0.1))
    provider, _ = factory(timeout=5.0, idle_timeout=0.4, total_timeout=60.0)
    events = await collect(
        provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
    )
    assert text_of(events) == words
    assert isinstance(events[-1], Stop)


async def test_a_stream_that_goes_quiet_fails_on_the_idle_timeout(wire):
    _, fake, factory = wire
    fake.fail_next("stall", delay=30)  # first token, then silence
    provider, _ = factory(timeout=30.0, idle_timeout=0.5, total_timeout=60.0)
    err = await raises_provider_error(
        lambda: collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
        )
    )
    assert err.kind == "timeout"


async def test_the_overall_cap_ends_a_stream_that_never_stops(wire):
    _, fake, factory = wire
    fake.replies.push(Reply(text=" ".join(["word"] * 400), token_delay=0.05))
    provider, _ = factory(timeout=0.5, idle_timeout=5.0, total_timeout=0.5)
    err = await raises_provider_error(
        lambda: collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
        )
    )
    assert err.kind == "timeout"


async def test_the_request_body_goes_to_the_sdk_as_json_built_once(
    fake_openai, provider_api_key, monkeypatch
):
    """The openai SDK's typed `create` walks every message and tool schema in a param
    transform and re-encodes the ~60 KB body on every call (a fifth of a web process's CPU
    in a fan-out): HAL hands its raw `post` JSON bytes, the tools' part encoded once per
    spec, and the request on the wire is the same Chat Completions request."""
    import openai._base_client as base_client
    import openai.resources.chat.completions.completions as completions

    transformed: list = []
    encoded: list = []
    original_transform = completions.async_maybe_transform
    original_dumps = base_client.openapi_dumps

    async def spy_transform(data, *args, **kwargs):
        transformed.append(data)
        return await original_transform(data, *args, **kwargs)

    def spy_dumps(data, *args, **kwargs):
        encoded.append(data)
        return original_dumps(data, *args, **kwargs)

    monkeypatch.setattr(completions, "async_maybe_transform", spy_transform)
    monkeypatch.setattr(base_client, "openapi_dumps", spy_dumps)
    fake_openai.replies.push(Reply(text="ok"))
    provider = OpenAICompatProvider(
        base_url=fake_openai.base_url,
        credential=CountingCredential(provider_api_key),
        max_retries=0,
        max_tokens=512,
    )
    history = [ChatMessage.user(f"line {i}", speaker="alice") for i in range(3)]
    history.append(ChatMessage.user("안녕", speaker="민수"))  # UTF-8 in the body, no escapes
    events = await collect(provider.stream(system="s", messages=history, tools=[SPEC], model="m-1"))
    assert text_of(events) == "ok"
    assert transformed == [] and encoded == []
    request = fake_openai.completion_requests[-1]
    assert request.headers["content-type"] == "application/json"
    assert request.headers["authorization"] == f"Bearer {provider_api_key}"
    assert request.json == {
        "model": "m-1",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 512,
        "messages": [
            {"role": "system", "content": "s"},
            *({"role": "user", "content": f"[alice]: line {i}"} for i in range(3)),
            {"role": "user", "content": "[민수]: 안녕"},
        ],
        "tools": [SPEC.to_openai()],
    }


async def test_calls_after_the_first_send_the_sdks_platform_headers_without_a_thread_hop(
    wire, monkeypatch
):
    # Each call runs on a per-call copy of the SDK client (the secret for that call only).
    # A fresh copy reads the OS and architecture for its X-Stainless headers in a worker
    # thread on its first request — on every call, a hop on the way to the first token
    # (issue 29). The provider keeps what the first call read; the headers stay the SDK's.
    import importlib

    kind, fake, factory = wire
    sdk = importlib.import_module(
        "anthropic._base_client" if kind == "anthropic" else "openai._base_client"
    )
    hops: list[str] = []
    original = sdk.asyncify

    def counting(function):
        hops.append(getattr(function, "__name__", repr(function)))
        return original(function)

    monkeypatch.setattr(sdk, "asyncify", counting)
    provider, _ = factory()
    for n in range(3):
        fake.replies.push(Reply(text=f"reply {n}"))
        events = await collect(
            provider.stream(system="s", messages=[ChatMessage.user("hi")], tools=[], model="m")
        )
        assert text_of(events) == f"reply {n}"
    assert hops == ["get_platform"]
    requests = fake.message_requests if kind == "anthropic" else fake.completion_requests
    # The later calls carry what the first (the SDK's own path) sent.
    first = requests[0].headers
    assert first["x-stainless-os"] and first["x-stainless-arch"]
    for request in requests[1:]:
        assert request.headers["x-stainless-os"] == first["x-stainless-os"]
        assert request.headers["x-stainless-arch"] == first["x-stainless-arch"]
