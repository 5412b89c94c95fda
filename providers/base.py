"""The provider-neutral protocol: chat messages, tool specs, stream events and errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from hal.tools.spec import ToolSpec as ToolSpec  # re-exported: it lives with the tools

from . import pacing

# An async callable returning the secret at call time (from the vault), so that plaintext
# exists only for the duration of one provider call and never sits on a long-lived object.
CredentialGetter = Callable[[], Awaitable[str]]

ErrorKind = Literal[
    "auth", "no_credential", "rate_limited", "timeout", "bad_response", "bad_request", "unavailable"
]
# `auth`: the provider rejected the credential HAL presented (HTTP 401/403); `no_credential`:
# there was none to present (no key or token stored, or not readable; the CLI not logged in).
ERROR_KINDS: frozenset[str] = frozenset(
    {
        "auth",
        "no_credential",
        "rate_limited",
        "timeout",
        "bad_response",
        "bad_request",
        "unavailable",
    }
)

# Normalised stop reasons; anything else is passed through as the provider named it.
STOP_END = "end"
STOP_TOOL_USE = "tool_use"
STOP_MAX_TOKENS = "max_tokens"


class ProviderError(Exception):
    """A provider call failed; `kind` is one of ERROR_KINDS, never the model's answer.

    `message` is English (logs, audit, `last_error`); `reason`, when the provider knows
    more than its kind says (the CLI's deny rule, which login it rejected), is the
    operator's sentence as a `hal.i18n.text()` — the room shows it in their language."""

    kinds: frozenset[str] = ERROR_KINDS

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        reason: dict[str, Any] | None = None,
    ) -> None:
        if kind not in self.kinds:
            raise ValueError(f"unknown provider error kind {kind!r}")
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.status = status
        self.reason = reason

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(kind={self.kind!r}, message={self.message!r}, status={self.status!r})"


def secret_hint(secret: str) -> str:
    """A display hint such as `sk-…abcd`; short values show nothing at all."""
    if not secret:
        return ""
    if len(secret) < 12:
        return "…"
    return f"{secret[:3]}…{secret[-4:]}"


def redact(text: str, *secrets: str | None) -> str:
    """Remove secrets from a message (SDK errors may echo request details)."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, secret_hint(secret) or "…")
    return text


# ----- stream events ---------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    """A piece of the model's text, in order."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call (arguments fully reassembled and parsed)."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Usage:
    """Token usage of the whole call; `model`: the one that answered, when the API says."""

    input_tokens: int
    output_tokens: int
    model: str = ""


@dataclass(frozen=True)
class Stop:
    """The end of a stream: reason is `end`, `tool_use`, `max_tokens` or the provider's own."""

    reason: str


@dataclass(frozen=True)
class ToolRan:
    """A tool call the provider ran itself (the local CLI, through HAL's MCP server) and
    its result; `proposal_id` when the call became a proposal waiting for an operator."""

    id: str
    name: str
    arguments: dict[str, Any]
    content: str
    is_error: bool = False
    proposal_id: int | None = None
    # The provider has no tool of that name (the CLI answered "No such tool available").
    unknown: bool = False


@dataclass(frozen=True)
class McpAccess:
    """How a provider that runs HAL's tools itself reaches `/mcp` for one turn: the web
    process's loopback URL and the turn's own token (hal/actions/mcp_turn_tokens.py)."""

    url: str
    token: str

    def __repr__(self) -> str:  # never the token in a log line
        return f"McpAccess(url={self.url!r})"


@dataclass(frozen=True)
class Redacted:
    """Secrets held back from this call's request, by kind (never the values): the first
    event of a call that had any (providers/redaction/)."""

    counts: dict[str, int]
    # The tool results (their call ids) in which something was held back: their chips say so.
    tool_call_ids: tuple[str, ...] = ()
    # The placeholders that stand in for them (a reply counts each secret once).
    placeholders: tuple[str, ...] = ()


StreamEvent = TextDelta | ToolCall | ToolRan | Usage | Stop | Redacted


# ----- conversation ----------------------------------------------------------------------


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call, sent back to the model."""

    tool_call_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class FilePart:
    """A file an operator attached to a message (chatrooms/files): `text` for a text file
    (UTF-8, already decoded), `data` for an image's bytes (PNG, JPEG, WebP or GIF)."""

    name: str
    media_type: str
    sha256: str
    text: str = ""
    data: bytes = b""
    lines: int = 0

    @property
    def is_image(self) -> bool:
        return self.media_type.startswith("image/")

    def header(self) -> str:
        """The line that opens a text file inlined into a message (and that closes it)."""
        about = f"{self.lines} lines, sha256 {self.sha256[:12]}"
        return f"----- attached file: {self.name} ({about}) -----"

    def inlined(self) -> str:
        """A text file as text, between a header and an end marker (models without files)."""
        return f"{self.header()}\n{self.text.rstrip(chr(10))}\n----- end of {self.name} -----"

    def unseen(self) -> str:
        """What a model that cannot see images reads instead of one."""
        return (
            f"[image {self.name} attached (sha256 {self.sha256[:12]}); "
            "this model cannot see images]"
        )


Role = Literal["user", "assistant", "tool_result"]
ROLES = ("user", "assistant", "tool_result")


@dataclass(frozen=True)
class ChatMessage:
    """One provider-neutral message.

    `user`: someone other than this model speaking — an operator or another model in the
    room; `speaker` names them and providers prefix the text with `[speaker]: `.
    `assistant`: this model's own earlier turn (text and/or tool calls).
    `tool_result`: results of this model's tool calls.
    """

    role: Role
    text: str = ""
    speaker: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    # Attached files of a `user` message (an operator's), in the order attached.
    files: tuple[FilePart, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {self.role!r}")
        if self.role == "tool_result" and not self.tool_results:
            raise ValueError("a tool_result message needs tool_results")
        if self.role != "assistant" and self.tool_calls:
            raise ValueError("only assistant messages carry tool calls")
        if self.role != "tool_result" and self.tool_results:
            raise ValueError("only tool_result messages carry tool results")
        if self.role != "user" and self.files:
            raise ValueError("only user messages carry files")
        # Accept lists from callers but keep the message immutable.
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "tool_results", tuple(self.tool_results))
        object.__setattr__(self, "files", tuple(self.files))

    @classmethod
    def user(cls, text: str, *, speaker: str = "", files: Iterable[FilePart] = ()) -> ChatMessage:
        return cls(role="user", text=text, speaker=speaker, files=tuple(files))

    @classmethod
    def assistant(cls, text: str = "", *, tool_calls: Iterable[ToolCall] = ()) -> ChatMessage:
        return cls(role="assistant", text=text, tool_calls=tuple(tool_calls))

    @classmethod
    def results(cls, *results: ToolResult) -> ChatMessage:
        return cls(role="tool_result", tool_results=tuple(results))

    def spoken_text(self) -> str:
        """The text as another participant sees it: `[speaker]: text` when named."""
        if self.speaker and self.role == "user":
            return f"[{self.speaker}]: {self.text}"
        return self.text


def parse_tool_arguments(raw: str | dict[str, Any] | None, *, tool: str) -> dict[str, Any]:
    """Parse streamed tool-call arguments; anything but a JSON object is a bad response."""
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ProviderError("bad_response", f"tool call {tool!r} had invalid JSON") from exc
    if not isinstance(value, dict):
        raise ProviderError("bad_response", f"tool call {tool!r} arguments are not an object")
    return value


@runtime_checkable
class Provider(Protocol):
    """What every provider offers; errors are raised as ProviderError only."""

    kind: str

    async def list_models(self) -> list[str]: ...

    def stream(
        self,
        *,
        system: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        model: str,
        operator: str | None = None,
    ) -> AsyncIterator[StreamEvent]: ...


# The defaults of HAL_PROVIDER_IDLE_TIMEOUT_SECONDS and HAL_PROVIDER_TOTAL_TIMEOUT_SECONDS: a
# reply may stream for minutes, but never go quiet for a minute or run past ten.
DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_TOTAL_TIMEOUT = 600.0


class _Watchdog:
    """The idle/deadline bound of one stream's waits, on one lazily re-armed timer.

    A stream waits once per token; an `asyncio.timeout` per wait schedules and cancels a
    timer each time (issue 29: 7 % of the web process's busy time at C = 64). Here each
    wait only records when it must end; the one timer, when it fires, cancels the waiting
    task if that wait overran, else sleeps again until the current wait's end. The timer
    never touches the task between waits (while the consumer works on an item)."""

    __slots__ = (
        "cancelling",
        "deadline",
        "fired",
        "handle",
        "idle",
        "loop",
        "pace",
        "task",
        "until",
        "waiting",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        idle: float,
        deadline: float,
        pace: pacing.Slot | None,
    ) -> None:
        self.loop = loop
        # A reply's text handed to its sink while the task waits is the stream answering
        # (providers/pacing.py): the wait's idle bound runs from the last such piece.
        self.idle = idle
        self.deadline = deadline
        self.pace = pace
        self.task: asyncio.Task[Any] | None = None
        self.until = 0.0
        self.waiting = False
        self.handle: asyncio.TimerHandle | None = None
        self.fired = False
        self.cancelling = 0

    def arm(self, until: float) -> None:
        self.task = asyncio.current_task()
        self.until = until
        self.waiting = True
        if self.handle is None or self.handle.when() > until:
            if self.handle is not None:
                self.handle.cancel()
            self.handle = self.loop.call_at(until, self._fire)

    def _fire(self) -> None:
        self.handle = None
        if not self.waiting or self.task is None:
            return  # re-armed by the next wait
        pace = self.pace
        if pace is not None and pace.active:
            self.until = max(self.until, min(pace.active + self.idle, self.deadline))
        if self.loop.time() < self.until:
            self.handle = self.loop.call_at(self.until, self._fire)
            return
        # As asyncio.timeout: cancel the task, and turn that cancellation (and only
        # that one: not a cancellation from outside) into a timeout.
        self.fired = True
        self.cancelling = self.task.cancelling()
        self.task.cancel()

    def expired(self) -> bool:
        """Whether the CancelledError being handled is this watchdog's timeout."""
        if not self.fired or self.task is None:
            return False
        self.fired = False
        return self.task.uncancel() <= self.cancelling

    def close(self) -> None:
        self.waiting = False
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


async def bounded_stream(
    source: AsyncIterator[Any], *, idle: float, total: float
) -> AsyncIterator[Any]:
    """The one timeout wrapper of every provider's stream: at most `idle` seconds between
    two events and `total` seconds for the whole call, so a reply that streams steadily
    is never cut off while a silent one fails with `timeout`. Closes `source` on exit.

    The bound covers each `__anext__` only: a timeout held across a `yield` would fire in
    the consumer's task while it does unrelated work. One generator, not two: each layer
    is a resume per token (issue 29).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(total, 0.0)
    iterator = aiter(source)
    watchdog = _Watchdog(loop, idle, deadline, pacing.current.get())
    try:
        while True:
            now = loop.time()
            budget = min(idle, deadline - now)
            if budget <= 0:
                raise ProviderError("timeout", "the provider took too long to answer")
            watchdog.arm(now + budget)
            try:
                item = await anext(iterator)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if not watchdog.expired():
                    raise
                if loop.time() >= deadline:
                    raise ProviderError("timeout", "the provider took too long to answer") from None
                raise ProviderError("timeout", "the provider stopped answering in time") from None
            finally:
                watchdog.waiting = False
                if watchdog.fired:  # the source swallowed the cancellation: undo it
                    watchdog.expired()
            yield item
    finally:
        watchdog.close()
        closer = getattr(source, "aclose", None)
        if closer is not None:
            await closer()


def kind_for_status(status: int) -> str:
    """The ProviderError kind of an HTTP status from a model API (SDKs and the CLI alike)."""
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    if status in (408, 504):
        return "timeout"
    if status >= 500:
        return "unavailable"
    return "bad_request"
