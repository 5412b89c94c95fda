"""A fake OpenAI Chat Completions API (`POST /v1/chat/completions`, SSE or JSON; models)."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from .content_blocks import openai_problem
from .httpserver import FakeHTTPServer, RecordedRequest, _Handler
from .script import Reply, ReplyQueue

ERROR_CODES = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "forbidden"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
}

FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def error_body(status: int, message: str) -> dict[str, Any]:
    kind, code = ERROR_CODES.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class FakeOpenAI(FakeHTTPServer):
    """Speaks Chat Completions; base_url for the SDK is `origin + "/v1"`."""

    def __init__(self) -> None:
        super().__init__()
        self.replies = ReplyQueue()
        self.accepted_credentials: set[str] = set()
        self.models = ["gpt-fake-large", "gpt-fake-mini", "local-llama-fake"]
        # Models that refuse image parts, as a text-only model's real endpoint does.
        self.blind_models: set[str] = {"gpt-fake-mini", "local-llama-fake"}
        # Seconds a chunked stream stays open after `[DONE]` before its last chunk.
        self.hold_after_done = 0.0

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        return self.requests_to("/v1/chat/completions")

    def handle(self, handler: _Handler, request: RecordedRequest) -> None:
        if self.accepted_credentials and request.bearer() not in self.accepted_credentials:
            handler.send_json(401, error_body(401, "Incorrect API key provided."))
            return
        if request.method == "GET" and request.path == "/v1/models":
            if self.apply_failure(handler, stream=False) == "done":
                return
            handler.send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"}
                        for m in self.models
                    ],
                },
            )
        elif request.method == "POST" and request.path == "/v1/chat/completions":
            self._completions(handler, request)
        else:
            handler.send_json(404, error_body(404, f"no route {request.path}"))

    MALFORMED_SSE = '{"id": "chatcmpl-x", "choices": [{"delta": '
    MALFORMED_JSON = b'{"object": "list", "data": ['

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message)

    def _completions(self, handler: _Handler, request: RecordedRequest) -> None:
        body = request.json or {}
        problem = openai_problem(body, self.blind_models)
        if problem:
            handler.send_json(400, self.error_body(400, problem))
            return
        stream = bool(body.get("stream"))
        outcome = self.apply_failure(handler, stream=stream)
        if outcome == "done":
            return
        reply = self.replies.pop()
        self.sleep(reply.latency)
        model = body.get("model", "gpt-fake")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if stream:
            stall = outcome if isinstance(outcome, float) else 0.0
            self._stream(handler, reply, model, include_usage=include_usage, stall=stall)
        else:
            handler.send_json(200, self._completion(reply, model))

    @staticmethod
    def _call_id(call_id: str) -> str:
        return call_id or "call_" + secrets.token_hex(12)

    def _finish(self, reply: Reply) -> str:
        if reply.stop_reason:
            return FINISH.get(reply.stop_reason, reply.stop_reason)
        return "tool_calls" if reply.tool_calls else "stop"

    def _usage(self, reply: Reply) -> dict[str, int]:
        out = reply.output_token_count()
        return {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": out,
            "total_tokens": reply.input_tokens + out,
        }

    def _completion(self, reply: Reply, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": self._call_id(c.id),
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in reply.tool_calls
            ]
        return {
            "id": "chatcmpl-" + secrets.token_hex(10),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply)}],
            "usage": self._usage(reply),
        }

    def _stream(
        self, handler: _Handler, reply: Reply, model: str, *, include_usage: bool, stall: float
    ) -> None:
        completion_id = "chatcmpl-" + secrets.token_hex(10)
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            payload: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if include_usage:
                payload["usage"] = None
            payload.update(extra)
            handler.write_sse(json.dumps(payload))

        handler.start_sse()
        chunk({"role": "assistant", "content": ""})
        for n, piece in enumerate(reply.chunks()):
            chunk({"content": piece})
            if stall and n == 0:
                self.sleep(stall)  # first token arrives, then the stream goes quiet
            self.sleep(reply.token_delay)
        for index, call in enumerate(reply.tool_calls):
            arguments = json.dumps(call.arguments)
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": self._call_id(call.id),
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
            # Argument fragments carry only the index, as the real API streams them.
            for i in range(0, len(arguments), 5):
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "function": {"arguments": arguments[i : i + 5]}}
                        ]
                    }
                )
                self.sleep(reply.token_delay)
        chunk({}, self._finish(reply))
        if include_usage:
            handler.write_sse(
                json.dumps(
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": self._usage(reply),
                    }
                )
            )
        handler.write_sse("[DONE]")
        if self.hold_after_done:
            self.sleep(self.hold_after_done)
        handler.end_sse()
