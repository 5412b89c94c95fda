"""Who a room message is for: `@name` mentions, a leading `name:` / `name,`, or everyone."""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# A name token: letters of any script, digits, `_` and `-` (the connection-name alphabet).
_TOKEN = r"[\w-]+"
_NAME_RUN = re.compile(_TOKEN)
# Replies longer than this are read in a worker thread, off the event loop that streams
# every other reply (short ones cost less than the thread hop).
LARGE_TEXT = 4096
_LEADING = re.compile(r"\s*(" + _TOKEN + r")\s*[:,]")
# An `@` right after one of these (or a word character) is part of an address or a
# key=value, not a mention: `ops@alpha.org`, `user.@x`, `a/@b`, `x:@y`, `q?u=@z`.
_GLUE = frozenset(".@/:+%=&?-")
# Scheme characters before `://` (RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )).
_SCHEME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


@dataclass(frozen=True)
class Participant:
    """A model that can be addressed in a room: its connection id, name and whether active."""

    connection_id: int
    name: str
    active: bool = True


@dataclass
class Addressing:
    """The outcome of reading an operator message."""

    participants: list[Participant] = field(default_factory=list)
    broadcast: bool = False
    unknown: list[str] = field(default_factory=list)
    inactive: list[Participant] = field(default_factory=list)


@dataclass
class Mentions:
    """Models named by a model's reply: who gets a relay, and everyone named at all."""

    relay: list[Participant] = field(default_factory=list)
    named: list[Participant] = field(default_factory=list)


def fold(name: str) -> str:
    """Case- and normalisation-insensitive form of a name (Korean typed as jamo or syllables)."""
    return unicodedata.normalize("NFC", name).casefold()


def _is_hangul(text: str) -> bool:
    return bool(text) and all(
        "\uac00" <= ch <= "\ud7a3" or "\u1100" <= ch <= "\u11ff" for ch in text
    )


def _directory(participants: Sequence[Participant]) -> dict[str, Participant]:
    """Folded name → participant, longest name first (see `_lookup`)."""
    by_name = {fold(p.name): p for p in participants}
    return {name: by_name[name] for name in sorted(by_name, key=len, reverse=True)}


def _lookup(token: str, by_name: dict[str, Participant]) -> Participant | None:
    """Exact name, or a name followed by a Korean particle (`@클로드는`, `@클로드에게`)."""
    key = fold(token)
    if key in by_name:
        return by_name[key]
    # `by_name` is longest first, so `@클로드2는` prefers `클로드2` over `클로드`.
    for name, participant in by_name.items():
        if key.startswith(name) and _is_hangul(key[len(name) :]):
            return participant
    return None


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"  # exactly `re`'s \w for str patterns


def _url_start(word: str) -> int:
    """Where a URL begins inside a whitespace-free `word` (len(word) if none).

    A URL runs to the next whitespace, so every `@` after its start belongs to it.
    Each search is one `str.find` pass: linear, whatever the word holds."""
    starts = [len(word)]
    at = word.find("://")
    while at != -1:
        if at > 0 and word[at - 1] in _SCHEME:
            starts.append(at)
            break
        at = word.find("://", at + 3)
    for marker in ("www.", "mailto:"):
        at = word.find(marker)
        while at != -1:
            if at == 0 or not _is_word(word[at - 1]):
                starts.append(at)
                break
            at = word.find(marker, at + 1)
    return min(starts)


def _mention_tokens(text: str) -> list[str]:
    """Every `@token` outside URLs and e-mail addresses, in order of appearance.

    A hand-written scan, linear in the text (a 40,000-character reply must not stall the
    event loop): whitespace-separated words, and inside a word only the `@` signs, each
    looked at once. An e-mail's `@` follows a local-part character, which `_GLUE` and
    `_is_word` already refuse, so e-mails need no pattern of their own."""
    tokens: list[str] = []
    # str.split() splits on exactly the whitespace `\s` means; most words have no `@`.
    for word in unicodedata.normalize("NFC", text).split():
        if "@" not in word:
            continue
        at = word.find("@")
        url_start = _url_start(word)
        while at != -1 and at < url_start:
            before = word[at - 1] if at else " "
            if not (_is_word(before) or before in _GLUE):
                name = _NAME_RUN.match(word, at + 1)
                if name is not None:
                    token = name.group().rstrip("-")
                    if token:
                        tokens.append(token)
            at = word.find("@", at + 1)
    return tokens


def _leading_names(text: str, by_name: dict[str, Participant]) -> list[Participant]:
    """A leading `name:` / `name,` chain (`alpha, beta: ...`); stops at the first non-name."""
    found: list[Participant] = []
    pos = 0
    normalized = unicodedata.normalize("NFC", text)
    while True:
        match = _LEADING.match(normalized, pos)
        if not match:
            break
        participant = by_name.get(fold(match.group(1)))
        if participant is None:
            break
        found.append(participant)
        pos = match.end()
    return found


def _unique(items: Iterable[Participant]) -> list[Participant]:
    seen: set[int] = set()
    out: list[Participant] = []
    for item in items:
        if item.connection_id not in seen:
            seen.add(item.connection_id)
            out.append(item)
    return out


def parse_addressees(text: str, participants: Sequence[Participant]) -> Addressing:
    """Read an operator's unified-room message: named models, or every active one."""
    by_name = _directory(participants)
    named: list[Participant] = list(_leading_names(text, by_name))
    unknown: dict[str, None] = {}  # ordered and de-duplicated in O(1) per token
    for token in _mention_tokens(text):
        participant = _lookup(token, by_name)
        if participant is None:
            unknown.setdefault(token)
        else:
            named.append(participant)
    named = _unique(named)
    if not named:
        active = [p for p in participants if p.active]
        return Addressing(participants=active, broadcast=True, unknown=list(unknown))
    return Addressing(
        participants=named,
        broadcast=False,
        unknown=list(unknown),
        inactive=[p for p in named if not p.active],
    )


def relay_mentions(text: str, participants: Sequence[Participant], *, speaker_id: int) -> Mentions:
    """`@name` mentions in a model's reply; only active models other than the speaker relay."""
    by_name = _directory(participants)
    named = _unique(
        p
        for p in (_lookup(token, by_name) for token in _mention_tokens(text))
        if p is not None and p.connection_id != speaker_id
    )
    return Mentions(relay=[p for p in named if p.active], named=named)


async def arelay_mentions(
    text: str, participants: Sequence[Participant], *, speaker_id: int
) -> Mentions:
    """`relay_mentions` for async callers: a large reply is parsed in a worker thread."""
    if len(text) <= LARGE_TEXT:
        return relay_mentions(text, participants, speaker_id=speaker_id)
    return await asyncio.to_thread(relay_mentions, text, participants, speaker_id=speaker_id)
