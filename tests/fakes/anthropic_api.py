"""A fake Anthropic Messages API (`POST /v1/messages`, SSE or JSON; `GET /v1/models`)."""

from __future__ import annotations

import json
import secrets
import threading
from typing import Any

from .content_blocks import anthropic_problem
from .httpserver import FakeHTTPServer, RecordedRequest, _Handler
from .script import Reply, ReplyQueue

ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
        "request_id": "req_" + secrets.token_hex(8),
    }


class FakeAnthropic(FakeHTTPServer):
    """Speaks the Messages API wire format; base_url for the SDK is `origin` (no /v1)."""

    def __init__(self) -> None:
        super().__init__()
        self.replies = ReplyQueue()
        self.accepted_credentials: set[str] = set()
        self.models = ["claude-fake-opus-1", "claude-fake-sonnet-1", "claude-fake-haiku-1"]
        # When set, a streamed text reply holds after its first chunk until the event is
        # set (a test proves the first delta arrived while the reply was still streaming).
        self.hold_after_first_chunk: threading.Event | None = None
        self.held_until_released: list[bool] = []

    @property
    def base_url(self) -> str:
        return self.origin

    @property
    def message_requests(self) -> list[RecordedRequest]:
        return self.requests_to("/v1/messages")

    def credential_of(self, request: RecordedRequest) -> str | None:
        return request.headers.get("x-api-key") or request.bearer()

    def handle(self, handler: _Handler, request: RecordedRequest) -> None:
        if self.accepted_credentials and self.credential_of(request) not in (
            self.accepted_credentials
        ):
            handler.send_json(401, error_body(401, "invalid x-api-key"))
            return
        if request.method == "GET" and request.path == "/v1/models":
            self._models(handler)
        elif request.method == "POST" and request.path == "/v1/messages":
            self._messages(handler, request)
        else:
            handler.send_json(404, error_body(404, f"no route {request.path}"))

    MALFORMED_SSE = '{"type": "message_start", "message": {'
    MALFORMED_SSE_EVENT = "message_start"
    MALFORMED_JSON = b'{"type": "message", "content": ['

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message)

    def _models(self, handler: _Handler) -> None:
        if self.apply_failure(handler, stream=False) == "done":
            return
        data = [
            {
                "type": "model",
                "id": model,
                "display_name": model.replace("-", " ").title(),
                "created_at": "2025-01-01T00:00:00Z",
                "lifecycle": "active",
            }
            for model in self.models
        ]
        handler.send_json(
            200,
            {
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            },
        )

    def _messages(self, handler: _Handler, request: RecordedRequest) -> None:
        body = request.json or {}
        for n, tool in enumerate(body.get("tools") or []):
            # As the real API: a top-level combinator in any tool's schema fails the request.
            if {"oneOf", "allOf", "anyOf"} & set(tool.get("input_schema") or {}):
                message = (
                    f"tools.{n}.custom.input_schema: input_schema does not support oneOf, "
                    "allOf, or anyOf at the top level"
                )
                handler.send_json(400, error_body(400, message))
                return
        problem = anthropic_problem(body)
        if problem:
            handler.send_json(400, error_body(400, problem))
            return
        stream = bool(body.get("stream"))
        outcome = self.apply_failure(handler, stream=stream)
        if outcome == "done":
            return
        reply = self.replies.pop()
        if reply.error is not None:
            handler.send_json(reply.error, error_body(reply.error, f"scripted {reply.error}"))
            return
        self.sleep(reply.latency)
        model = body.get("model", "claude-fake")
        if stream:
            stall = outcome if isinstance(outcome, float) else 0.0
            self._stream(handler, reply, model, stall=stall)
        else:
            handler.send_json(200, self._message(reply, model))

    @staticmethod
    def _tool_id(call_id: str) -> str:
        return call_id or "toolu_" + secrets.token_hex(10)

    def _message(self, reply: Reply, model: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": self._tool_id(call.id),
                    "name": call.name,
                    "input": call.arguments,
                }
            )
        return {
            "id": "msg_" + secrets.token_hex(10),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn"),
            "stop_sequence": None,
            "usage": {
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_token_count(),
            },
        }

    def _stream(self, handler: _Handler, reply: Reply, model: str, *, stall: float) -> None:
        def emit(event: str, payload: dict[str, Any]) -> None:
            handler.write_sse(json.dumps({"type": event, **payload}), event=event)

        handler.start_sse()
        emit(
            "message_start",
            {
                "message": {
                    "id": "msg_" + secrets.token_hex(10),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1},
                }
            },
        )
        handler.write_sse(json.dumps({"type": "ping"}), event="ping")
        index = 0
        if reply.text:
            emit(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            for n, chunk in enumerate(reply.chunks()):
                emit(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": chunk}},
                )
                if stall and n == 0:
                    self.sleep(stall)  # first token arrives, then the stream goes quiet
                if n == 0 and self.hold_after_first_chunk is not None:
                    self.held_until_released.append(self.hold_after_first_chunk.wait(60))
                self.sleep(reply.token_delay)
            emit("content_block_stop", {"index": index})
            index += 1
        for call in reply.tool_calls:
            emit(
                "content_block_start",
                {
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": self._tool_id(call.id),
                        "name": call.name,
                        "input": {},
                    },
                },
            )
            arguments = json.dumps(call.arguments)
            # Real streams split the JSON at arbitrary points, not at token boundaries.
            pieces = [arguments[i : i + 7] for i in range(0, len(arguments), 7)] or [""]
            for piece in pieces:
                emit(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
                )
                self.sleep(reply.token_delay)
            emit("content_block_stop", {"index": index})
            index += 1
        emit(
            "message_delta",
            {
                "delta": {
                    "stop_reason": reply.stop_reason
                    or ("tool_use" if reply.tool_calls else "end_turn"),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": reply.output_token_count()},
            },
        )
        emit("message_stop", {})
        handler.end_sse()
