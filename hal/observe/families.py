"""The metric families of one HAL process (prometheus_client, its default registry).

Names follow Prometheus conventions (`_total`, `_seconds`, base units) and the
OpenTelemetry GenAI semantic conventions where one exists (`gen_ai.client.*`, attribute
names with `.` as `_`). Label values are bounded: route names, provider kinds, model and
connection names an administrator configured, outcomes and codes from fixed sets — never
message text, ids, user input or secrets (tests/observe/test_labels.py fails on any other).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# HAL_METRICS (hal/settings.py; hal/apps.py sets this from it): off, the hot paths (sockets,
# turns, HTTP) count nothing and GET /metrics answers 404.
ON = True

# Seconds: from a fast API answer to a slow page.
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Seconds: a model's first token and whole reply (OTel's advisory buckets for
# gen_ai.client.operation.duration, up to minutes for a tool-using reply).
GENAI_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
# Tokens per operation (OTel's advisory buckets for gen_ai.client.token.usage).
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)

http_requests = Counter(
    "hal_http_requests",
    "HTTP requests answered, by route name, method and status code.",
    ["route", "method", "status"],
)
http_duration = Histogram(
    "hal_http_request_duration_seconds",
    "Time from the request reaching HAL's middleware to its response, by route name.",
    ["route"],
    buckets=HTTP_BUCKETS,
)
websocket_connections = Gauge(
    "hal_websocket_connections",
    "WebSocket connections open in this process, by path (/ws/ai/, /ws/ops/).",
    ["path"],
)
websocket_frames = Counter(
    "hal_websocket_frames",
    "WebSocket frames, by path and direction (in: from the browser, out: to it).",
    ["path", "direction"],
)
turns_started = Counter(
    "hal_chat_turns_started",
    "Chat turns this process started (a model asked), by provider kind and model.",
    ["gen_ai_provider_name", "gen_ai_request_model"],
)
turns_ended = Counter(
    "hal_chat_turns_ended",
    "Chat turns ended, by provider kind, model, outcome (completed, waiting_approval, "
    "failed, stopped, cancelled) and error type (a failure's stable code, empty otherwise).",
    ["gen_ai_provider_name", "gen_ai_request_model", "outcome", "error_type"],
)
operation_duration = Histogram(
    "gen_ai_client_operation_duration_seconds",
    "A model's whole reply (all its rounds), from the turn's start to its end.",
    ["gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model"],
    buckets=GENAI_BUCKETS,
)
time_to_first_token = Histogram(
    "hal_gen_ai_time_to_first_token_seconds",
    "From the turn's start to the first streamed token of its reply.",
    ["gen_ai_provider_name", "gen_ai_request_model"],
    buckets=GENAI_BUCKETS,
)
token_usage = Histogram(
    "gen_ai_client_token_usage",
    "Tokens per reply, by token type (input, output), provider kind and model.",
    ["gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_token_type"],
    buckets=TOKEN_BUCKETS,
)
connection_tokens = Counter(
    "hal_ai_connection_tokens",
    "Tokens billed to each AI connection, by direction (input, output).",
    ["connection", "direction"],
)
connection_cost = Counter(
    "hal_ai_connection_cost",
    "Cost billed to each AI connection, in the currency of its model prices (per million "
    "tokens, /ops/ai); a call of an unpriced model adds nothing.",
    ["connection"],
)
websocket_behind_closes = Counter(
    "hal_websocket_behind_closes",
    "Sockets closed because they fell too far behind their events (hal/live/channel_queue.py).",
    ["path"],
)
channel_layer_merges = Counter(
    "hal_channel_layer_merges",
    "Streamed reply deltas merged into an earlier queued one (a socket reading slower than "
    "the reply streams).",
)


def ws_path(scope: dict) -> str:
    """A WebSocket's path as a bounded label: HAL's two socket paths, or "other"."""
    path = str(scope.get("path", ""))
    return path if path in ("/ws/ai/", "/ws/ops/") else "other"
