"""One real OTLP/HTTP export (issue 47 item 3): HAL configured only by OTEL_* variables
sends a send's spans to a collector-like receiver on a loopback socket, which decodes the
protobuf with opentelemetry-proto and finds the send, its turn and the model call."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from hal.observe import tracing
from tests.fakes.httpserver import FakeHTTPServer, RecordedRequest
from tests.fakes.script import Reply

from .conftest import room_for, send


class Collector(FakeHTTPServer):
    """Answers POST /v1/traces as an OpenTelemetry Collector does (protobuf in and out)."""

    def handle(self, handler: Any, request: RecordedRequest) -> None:
        if request.method != "POST" or request.path != "/v1/traces":
            handler.send_raw(404, b"", "text/plain")
            return
        body = ExportTraceServiceResponse().SerializeToString()
        handler.send_raw(200, body, "application/x-protobuf")

    def spans(self) -> list[tuple[str, Any, dict[str, Any]]]:
        """Every exported span: (service name, span, its attributes as a dict)."""
        out = []
        for request in self.requests:
            decoded = ExportTraceServiceRequest()
            decoded.ParseFromString(request.raw_body)
            for resource_spans in decoded.resource_spans:
                service = {
                    a.key: a.value.string_value for a in resource_spans.resource.attributes
                }.get("service.name")
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        attrs = {a.key: _value(a.value) for a in span.attributes}
                        out.append((service, span, attrs))
        return out


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


@pytest.fixture
def collector(monkeypatch):
    with Collector() as server:
        for name in list(tracing.ENABLING):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", server.origin + "/v1/traces")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "hal-under-test")
        assert tracing.configure()  # from the environment, as a HAL process at start-up
        try:
            yield server
        finally:
            tracing.shutdown()
            tracing.install(None)


async def test_a_send_is_exported_over_otlp_http(collector, models, aclient, orchestrator):
    alpha = models[0]
    alpha.fake.replies.push(Reply(text="Fine.", input_tokens=17, output_tokens=3))
    room_id = await room_for(aclient, alpha.id)
    await send(aclient, room_id, "status please")
    await orchestrator.wait_idle()
    tracing.shutdown()  # flushes the batch processor: one export, now

    assert collector.requests, "nothing was exported"
    assert all(
        r.headers.get("content-type") == "application/x-protobuf" for r in collector.requests
    )
    exported = collector.spans()
    assert {service for service, _s, _a in exported} == {"hal-under-test"}
    named = {span.name: (span, attrs) for _service, span, attrs in exported}
    sent, _ = named["chat.send"]
    turn, _ = named["chat.turn"]
    call, attrs = named[f"chat {alpha.connection.model}"]
    assert turn.parent_span_id == sent.span_id
    assert call.parent_span_id == turn.span_id
    assert call.trace_id == sent.trace_id
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.usage.input_tokens"] == 17
    assert attrs["gen_ai.usage.output_tokens"] == 3
