"""Traces (issue 47 item 3, ADR 0025): a real send through the wire-true fake models makes
the span tree send → turn → model call (GenAI attributes) → tool call → proposal, with no
prompt or reply text unless `tracing.record_content` is on; W3C trace context is read from
an MCP call's `params._meta.traceparent` and written into a webhook's headers; with no
OTEL_* variable set nothing is configured."""

from __future__ import annotations

import asyncio
import contextvars
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async
from mcp_types import CallToolRequestParams
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from hal.actions.base import Actor
from hal.models.ops import Setting
from hal.observe import tracing
from tests.fakes.script import Reply, ScriptedToolCall
from tests.notifications.conftest import Receiver

from .conftest import room_for, send

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.fixture
def spans():
    """An in-memory exporter behind HAL's tracer for the test; tracing off afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None)
    provider.shutdown()


def by_name(finished, prefix: str) -> list:
    return [s for s in finished if s.name.startswith(prefix)]


def all_attribute_text(finished) -> str:
    return " ".join(str(v) for s in finished for v in (s.attributes or {}).values())


async def test_a_send_makes_the_span_tree_with_genai_attributes(
    spans, models, aclient, orchestrator
):
    alpha = models[0]
    conn = alpha.connection
    alpha.fake.replies.push(
        Reply(
            text="Looking.",
            tool_calls=[
                ScriptedToolCall("list_servers", {}),
                ScriptedToolCall("open_incident", {"severity": "sev4", "title": "x"}),
            ],
            input_tokens=30,
            output_tokens=9,
        )
    )
    room_id = await room_for(aclient, alpha.id)
    await send(aclient, room_id, "a secret-free question about the fleet")
    await orchestrator.wait_idle()

    finished = spans.get_finished_spans()
    (sent,) = by_name(finished, "chat.send")
    (turn,) = by_name(finished, "chat.turn")
    calls = by_name(finished, f"chat {conn.model}")
    tools = by_name(finished, "execute_tool ")
    (proposal,) = by_name(finished, "hal.proposal.create")

    assert sent.parent is None
    assert turn.parent.span_id == sent.context.span_id
    assert turn.context.trace_id == sent.context.trace_id
    assert turn.attributes["hal.turn.outcome"] == "waiting_approval"
    assert turn.attributes["gen_ai.request.model"] == conn.model

    (call,) = calls  # one round: the model's tool calls end it with a proposal waiting
    assert call.kind == SpanKind.CLIENT
    assert call.parent.span_id == turn.context.span_id
    attrs = call.attributes
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert attrs["gen_ai.system"] == "anthropic"
    assert attrs["gen_ai.request.model"] == conn.model
    assert attrs["gen_ai.response.model"] == conn.model  # as the fake API answered
    assert attrs["gen_ai.usage.input_tokens"] == 30
    assert attrs["gen_ai.usage.output_tokens"] == 9

    assert [t.attributes["gen_ai.tool.name"] for t in tools] == ["list_servers", "open_incident"]
    assert all(t.parent.span_id == turn.context.span_id for t in tools)
    assert all(t.attributes["gen_ai.operation.name"] == "execute_tool" for t in tools)
    assert all(t.attributes.get("gen_ai.tool.call.id") for t in tools)
    incident = tools[1]
    assert proposal.parent.span_id == incident.context.span_id
    assert proposal.attributes["hal.proposal.id"] == incident.attributes["hal.proposal.id"]

    # No prompt or reply text unless an administrator turned it on.
    text = all_attribute_text(finished)
    assert "secret-free question" not in text
    assert "Looking." not in text
    assert not any(
        k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.system_instructions"))
        for s in finished
        for k in (s.attributes or {})
    )


async def test_a_failing_model_call_is_an_error_span(spans, models, aclient, orchestrator):
    alpha = models[0]
    alpha.fake.fail_next(401)
    room_id = await room_for(aclient, alpha.id)
    await send(aclient, room_id, "hello")
    await orchestrator.wait_idle()
    finished = spans.get_finished_spans()
    (turn,) = by_name(finished, "chat.turn")
    (call,) = by_name(finished, "chat ")
    assert call.attributes["error.type"] == "auth"
    assert call.status.is_ok is False
    assert turn.attributes["hal.turn.outcome"] == "failed"
    assert turn.attributes["error.type"] == "auth"


async def test_the_text_goes_in_only_when_an_administrator_turns_it_on(
    spans, models, aclient, orchestrator
):
    await sync_to_async(Setting.objects.create)(
        name=tracing.CONTENT_SETTING, value=True, updated_by="admin"
    )
    tracing.install(tracing._provider)  # re-read the setting at the next turn's prepare
    alpha = models[0]
    alpha.fake.replies.push(Reply(text="All green today."))
    room_id = await room_for(aclient, alpha.id)
    await send(aclient, room_id, "how is the fleet")
    await orchestrator.wait_idle()
    finished = spans.get_finished_spans()
    (call,) = by_name(finished, "chat ")
    assert "how is the fleet" in call.attributes["gen_ai.input.messages"]
    assert "All green today." in call.attributes["gen_ai.output.messages"]
    (turn,) = by_name(finished, "chat.turn")
    assert turn.attributes["hal.reply.text"] == "All green today."


@pytest.mark.django_db(transaction=True)
async def test_an_mcp_calls_traceparent_is_the_tool_spans_parent(spans, operator):
    from hal.mcp.server import HalMCPServer

    server = HalMCPServer(Actor(user=operator, via="mcp", label=operator.username))
    ctx = SimpleNamespace(meta={"traceparent": f"00-{TRACE}-{PARENT}-01"}, request=None)
    await server._on_call_tool(ctx, CallToolRequestParams(name="list_servers", arguments={}))
    (tool,) = by_name(spans.get_finished_spans(), "execute_tool list_servers")
    assert format(tool.context.trace_id, "032x") == TRACE
    assert format(tool.parent.span_id, "016x") == PARENT
    assert tool.parent.is_remote


@pytest.mark.django_db(transaction=True)
async def test_a_cli_turns_own_mcp_call_joins_the_running_turns_span(spans, operator):
    """The local CLI runs HAL's tools through /mcp with its turn's token (no traceparent of
    its own): the tool span is a child of that turn's span, found by the token's turn."""
    from hal.actions.mcp_turn_tokens import TurnScope
    from hal.mcp.server import TURN_SCOPE, HalMCPServer

    turn = SimpleNamespace(
        turn_id=4242,
        room_id=1,
        room_kind="individual",
        connection=SimpleNamespace(name="cli", provider="claude_cli", model="m"),
        framer=None,
    )
    made, token = tracing.start_turn(turn)
    scope = TurnScope(room_id=1, turn_id=4242, connection_id=1)
    actor = Actor(user=operator, via="mcp", label=operator.username, extra={TURN_SCOPE: scope})
    server = HalMCPServer(actor)
    ctx = SimpleNamespace(meta={}, request=None)
    call = server._on_call_tool(ctx, CallToolRequestParams(name="list_servers", arguments={}))
    # The MCP request is served by another task, with none of the turn's context.
    await asyncio.create_task(call, context=contextvars.Context())
    tracing.end_turn(turn, made, token)
    (tool,) = by_name(spans.get_finished_spans(), "execute_tool list_servers")
    assert tool.parent.span_id == made.get_span_context().span_id
    assert tool.context.trace_id == made.get_span_context().trace_id


def test_a_webhook_carries_the_delivery_spans_traceparent(spans, settings):
    from notifications import senders

    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = True
    with Receiver() as receiver:
        result = senders.send_webhook(
            receiver.origin + "/hook", b"{}", "per-test-signing-key", "key-1"
        )
    assert result.ok
    (delivery,) = by_name(spans.get_finished_spans(), "notification.webhook")
    (post,) = receiver.posts()
    trace_id = format(delivery.context.trace_id, "032x")
    span_id = format(delivery.context.span_id, "016x")
    version, sent_trace, sent_parent, flags = post.headers["traceparent"].split("-")
    assert (version, sent_trace, sent_parent) == ("00", trace_id, span_id)
    assert int(flags, 16) & 1  # sampled


def test_off_without_otel_variables():
    assert not tracing.wanted({})
    assert not tracing.wanted({"OTEL_SERVICE_NAME": "hal"})  # names only, no exporter
    assert not tracing.wanted(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}
    )
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert not tracing.on()  # the test settings set none: no tracer in this process
    assert tracing.inject() == {}
    with tracing.span("anything") as made:
        assert made is None
