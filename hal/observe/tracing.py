"""OpenTelemetry traces of HAL (opt-in, ADR 0025): a send → its turns → each model call
(GenAI semantic-convention attributes) → tool calls and proposals; W3C trace context read
from MCP calls (`params._meta.traceparent`) and written into outgoing webhooks.

Configured only by the standard `OTEL_*` variables (the SDK's exporter reads them): with
none of them set, or `OTEL_SDK_DISABLED=true`, nothing is configured and every helper here
returns at its first line (no span objects, no context changes). Prompt and reply text go
into spans only when an administrator turns on `tracing.record_content`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger("hal.observe")

# Variables that turn tracing on (the exporter's endpoint, or the choice of exporter).
ENABLING = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)
CONTENT_SETTING = "tracing.record_content"
CONTENT_LIMIT = 16_000  # characters of prompt or reply text in one attribute
CONTENT_REFRESH_SECONDS = 10.0
# OTel GenAI `gen_ai.provider.name` values of HAL's provider kinds (others as they are).
PROVIDER_NAMES = {"anthropic": "anthropic", "openai": "openai", "claude_cli": "anthropic"}

_propagator = TraceContextTextMapPropagator()
_tracer: trace.Tracer | None = None  # None: tracing is off
_provider: Any = None
_content = False
_content_read = 0.0
# Reads the setting (set by hal/apps.py: this room sits below the settings' actions).
content_reader: Callable[[], Any] | None = None
# A send's span context, handed to the turns it queued (their tasks start from an empty
# context: chatrooms/run/scheduling.py); and each running turn's, for its MCP tool calls.
_parents: OrderedDict[int, trace.SpanContext] = OrderedDict()
_turns: dict[int, trace.SpanContext] = {}
PARENTS_KEPT = 10_000


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces (an OTEL_* exporter setting, not disabled)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENABLING)


def configure(environ: Mapping[str, str] = os.environ) -> bool:
    """Set up the SDK from the environment when it asks for traces (once per process);
    True when tracing is on. The OTLP/HTTP exporter reads its endpoint, headers, timeout
    and compression from the OTEL_EXPORTER_OTLP_* variables; the resource from
    OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES (service.name "hal" by default)."""
    if _tracer is not None or not wanted(environ):
        return _tracer is not None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    exporter: Any
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    attrs = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": "hal"}
    provider = TracerProvider(resource=Resource.create(attrs))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider)
    log.info("OpenTelemetry traces on (exporter %s)", type(exporter).__name__)
    return True


def install(provider: Any) -> None:
    """Use `provider` (an SDK TracerProvider) for HAL's spans; None turns tracing off
    (tests install one with an in-memory exporter)."""
    global _tracer, _provider, _content_read
    _provider = provider
    _tracer = provider.get_tracer("hal") if provider is not None else None
    _content_read = 0.0
    _parents.clear()
    _turns.clear()


def on() -> bool:
    """Whether spans are being made in this process."""
    return _tracer is not None


def shutdown() -> None:
    """Flush and stop the exporter (a process's end)."""
    if _provider is not None:
        _provider.shutdown()


# --- content (prompt and reply text), an administrator's choice --------------------------


def refresh_content_setting() -> None:
    """(Sync, may query) Re-read `tracing.record_content` when tracing is on, at most every
    CONTENT_REFRESH_SECONDS (called where a turn is prepared, in a DB thread)."""
    global _content, _content_read
    if _tracer is None or time.monotonic() - _content_read < CONTENT_REFRESH_SECONDS:
        return
    try:
        _content = bool(content_reader()) if content_reader is not None else False
    except Exception:  # a setting that cannot be read keeps text out
        log.exception("reading %s failed", CONTENT_SETTING)
        _content = False
    _content_read = time.monotonic()


def records_content() -> bool:
    """Whether prompt and reply text may go into spans (tracing on and the setting on)."""
    return _tracer is not None and _content


def _clip(text: str) -> str:
    return text if len(text) <= CONTENT_LIMIT else text[:CONTENT_LIMIT] + "…"


# --- spans ---------------------------------------------------------------------------------


@contextlib.contextmanager
def span(name: str, attributes: dict[str, Any] | None = None) -> Iterator[Any]:
    """A span around a block, current inside it (None, and nothing made, when off)."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as made:
        yield made


def hand_to_turns(turn_ids: Sequence[int]) -> None:
    """The current span (a send's) becomes the parent of these turns' spans."""
    if _tracer is None:
        return
    current = trace.get_current_span().get_span_context()
    if not current.is_valid:
        return
    for turn_id in turn_ids:
        _parents[turn_id] = current
        _parents.move_to_end(turn_id)
    while len(_parents) > PARENTS_KEPT:  # turns queued but never run here
        _parents.popitem(last=False)


def start_turn(prepared: Any) -> tuple[Any, Any]:
    """A turn's span, current for the rest of its task: (span, token) or (None, None)."""
    if _tracer is None:
        return None, None
    conn = prepared.connection
    parent = _parents.pop(prepared.turn_id, None)
    ctx = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None
    made = _tracer.start_span(
        "chat.turn",
        context=ctx,
        attributes={
            "hal.turn.id": prepared.turn_id,
            "hal.room.id": prepared.room_id,
            "hal.room.kind": str(prepared.room_kind),
            "hal.connection.name": str(getattr(conn, "name", "")),
            "gen_ai.provider.name": provider_name(conn),
            "gen_ai.request.model": str(getattr(conn, "model", "") or ""),
        },
    )
    _turns[prepared.turn_id] = made.get_span_context()
    return made, otel_context.attach(trace.set_span_in_context(made))


def end_turn(prepared: Any, made: Any, token: Any) -> None:
    """End a turn's span (its outcome was set by `turn_outcome`)."""
    if made is None:
        return
    _turns.pop(prepared.turn_id, None)
    if records_content() and prepared.framer is not None:
        made.set_attribute("hal.reply.text", _clip(prepared.framer.full_text()))
    made.end()
    with contextlib.suppress(ValueError):  # attached in this same task
        otel_context.detach(token)


def turn_outcome(outcome: str, error_type: str = "") -> None:
    """The current turn span's outcome (completed, failed, stopped, …) and error type."""
    if _tracer is None:
        return
    current = trace.get_current_span()
    if not current.is_recording():
        return
    current.set_attribute("hal.turn.outcome", outcome)
    if error_type:
        mark_error(current, error_type)


def mark_error(made: Any, error_type: str) -> None:
    """A span failed: `error.type` (a stable code or kind) and an error status."""
    made.set_attribute("error.type", error_type)
    made.set_status(Status(StatusCode.ERROR, error_type))


def turn_context(turn_id: int) -> Any:
    """An OTel context whose parent is the running turn `turn_id` (its CLI's MCP calls)."""
    if _tracer is None:
        return None
    found = _turns.get(turn_id)
    return trace.set_span_in_context(trace.NonRecordingSpan(found)) if found else None


def provider_name(conn: Any) -> str:
    kind = str(getattr(conn, "provider", "") or "unknown")
    return PROVIDER_NAMES.get(kind, kind)


def start_call(prepared: Any, round_number: int, messages: Sequence[Any]) -> Any:
    """A model call's span (CLIENT, GenAI conventions), child of the current turn."""
    if _tracer is None:
        return None
    conn = prepared.connection
    model = str(getattr(conn, "model", "") or "")
    provider = provider_name(conn)
    made = _tracer.start_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,  # the attribute's earlier name, for older backends
            "gen_ai.request.model": model,
            "hal.connection.name": str(getattr(conn, "name", "")),
            "hal.turn.round": round_number,
        },
    )
    if records_content():
        made.set_attribute("gen_ai.system_instructions", _clip(prepared.system or ""))
        made.set_attribute("gen_ai.input.messages", _clip(_messages_json(messages)))
    return made


def _messages_json(messages: Sequence[Any]) -> str:
    return json.dumps(
        [{"role": m.role, "content": m.text} for m in messages if getattr(m, "text", "")],
        ensure_ascii=False,
    )


def call_usage(made: Any, usage: Any) -> None:
    """A model call's token usage and the model that answered."""
    if made is None:
        return
    made.set_attribute("gen_ai.usage.input_tokens", int(usage.input_tokens))
    made.set_attribute("gen_ai.usage.output_tokens", int(usage.output_tokens))
    answered = getattr(usage, "model", "")
    if answered:
        made.set_attribute("gen_ai.response.model", answered)


def end_call(
    made: Any, error: BaseException | None = None, pieces: Sequence[str] = (), start: int = 0
) -> None:
    """End a model call's span; a failure's kind as `error.type`; `pieces[start:]`: the
    call's reply text (recorded only when content is on)."""
    if made is None:
        return
    if error is not None:
        mark_error(made, str(getattr(error, "kind", None) or type(error).__name__))
    elif records_content():
        made.set_attribute("gen_ai.output.messages", _clip("".join(pieces[start:])))
    made.end()


@contextlib.contextmanager
def tool_span(name: str, call_id: str = "") -> Iterator[Any]:
    """A tool call's span (`execute_tool {name}`), current inside the block."""
    if _tracer is None:
        yield None
        return
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if call_id:
        attrs["gen_ai.tool.call.id"] = call_id
    with _tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs) as made:
        yield made


# --- W3C trace context ---------------------------------------------------------------------


def extract(carrier: Mapping[str, Any] | None) -> Any:
    """An OTel context from a W3C `traceparent` (and `tracestate`) in `carrier`, or None."""
    if _tracer is None or not isinstance(carrier, Mapping):
        return None
    parent = carrier.get("traceparent")
    if not isinstance(parent, str):
        return None
    found = {"traceparent": parent}
    state = carrier.get("tracestate")
    if isinstance(state, str):
        found["tracestate"] = state
    ctx = _propagator.extract(found)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def inject() -> dict[str, str]:
    """The current span's W3C headers (`traceparent`, `tracestate`): empty when off."""
    if _tracer is None:
        return {}
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier


@contextlib.contextmanager
def attached(ctx: Any) -> Iterator[None]:
    """Make `ctx` current inside the block (nothing when None)."""
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)
