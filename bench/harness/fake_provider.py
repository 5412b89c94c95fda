"""The fake OpenAI-compatible provider the benches talk to, in its own process."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import re
import secrets
import time
from typing import Any

from bench.harness.util import free_port


class FakeProvider:
    """OpenAI Chat Completions over HTTP/1.1 keep-alive: the first byte after `latency`,
    then `tokens` content chunks `token_delay` apart, usage, [DONE]. Accepts any key."""

    def __init__(self, latency: float, tokens: int, token_delay: float) -> None:
        self.latency = latency
        self.tokens = tokens
        self.token_delay = token_delay
        self.calls = 0
        # marker → [arrival, first chunk written] per request, CLOCK_MONOTONIC (the same
        # clock in every process of this host): where a path's added time sits.
        self.trace: dict[str, list[list[float]]] = {}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                if method == "POST" and path.endswith("/chat/completions"):
                    await self._completion(writer, json.loads(body or b"{}"))
                elif path.startswith("/trace/"):
                    self._json(writer, 200, self.trace.pop(path.rsplit("/", 1)[1], []))
                elif path.endswith("/models"):
                    payload = {
                        "object": "list",
                        "data": [{"id": "bench-model", "object": "model", "owned_by": "bench"}],
                    }
                    self._json(writer, 200, payload)
                else:
                    self._json(writer, 404, {"error": {"message": "no route", "type": "x"}})
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _json(writer: asyncio.StreamWriter, status: int, payload: Any) -> None:
        raw = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(raw)}\r\n\r\n".encode()
            + raw
        )

    @staticmethod
    def _marker(body: dict[str, Any]) -> str | None:
        """The round marker (`mk` + hex) in the last user message (history has older ones)."""
        for message in reversed(body.get("messages") or []):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            found = re.findall(r"\bmk[0-9a-f]{10}\b", str(content))
            return found[-1] if found else None
        return None

    async def _completion(self, writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        self.calls += 1
        stamps = [time.monotonic()]
        marker = self._marker(body)
        if marker:
            self.trace.setdefault(marker, []).append(stamps)
        model = body.get("model", "bench-model")
        await asyncio.sleep(self.latency)
        if not body.get("stream"):
            text = " ".join(f"tok{i}" for i in range(self.tokens))
            self._json(
                writer,
                200,
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": self.tokens},
                },
            )
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n"
        )
        cid = "chatcmpl-" + secrets.token_hex(8)
        created = int(time.time())

        def send(payload: Any) -> None:
            data = b"data: " + (
                payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            )
            data += b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        for i in range(self.tokens):
            delta = {"content": f"tok{i} "}
            if i == 0:
                delta["role"] = "assistant"
            send(chunk(delta))
            await writer.drain()
            if i == 0:
                stamps.append(time.monotonic())
            if i + 1 < self.tokens:
                await asyncio.sleep(self.token_delay)
        send(chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            send(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 10,
                        "completion_tokens": self.tokens,
                        "total_tokens": 10 + self.tokens,
                    },
                }
            )
        send(b"[DONE]")
        writer.write(b"0\r\n\r\n")


def _serve_fake(port: int, latency: float, tokens: int, token_delay: float, ready: Any) -> None:
    async def main() -> None:
        fake = FakeProvider(latency, tokens, token_delay)
        # A backlog large enough for a burst of simultaneous connects (fan-out, soak).
        server = await asyncio.start_server(fake.handle, "127.0.0.1", port, backlog=4096)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def start_fake_provider(
    latency: float = 0.3, tokens: int = 40, token_delay: float = 0.005
) -> tuple[multiprocessing.Process, str]:
    """The fake in a child process (its work must not compete with the measured process's
    event loop); returns the process and its base URL (ending in /v1)."""
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(
        target=_serve_fake, args=(port, latency, tokens, token_delay, ready), daemon=True
    )
    proc.start()
    if not ready.wait(30):
        raise RuntimeError("the fake provider did not start")
    return proc, f"http://127.0.0.1:{port}/v1"
