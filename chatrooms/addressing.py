"""Who a room message is for: `@name` mentions, a leading `name:` / `name,`, or everyone."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# A name token: letters of any script, digits, `_` and `-` (the connection-name alphabet).
_TOKEN = r"[\w-]+"
# `@` not preceded by a word character or a character that makes it part of an address
# (`ops@alpha.org`, `user.@x`, `a/@b`); emails and URLs are removed before matching anyway.
_MENTION = re.compile(r"(?<![\w.@/:+%=&?-])@(" + _TOKEN + r")")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+|\bwww\.\S+|\bmailto:\S+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_LEADING = re.compile(r"\s*(" + _TOKEN + r")\s*[:,]")


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


def _lookup(token: str, by_name: dict[str, Participant]) -> Participant | None:
    """Exact name, or a name followed by a Korean particle (`@클로드는`, `@클로드에게`)."""
    key = fold(token)
    if key in by_name:
        return by_name[key]
    # Longest name first so `@클로드2는` prefers `클로드2` over `클로드`.
    for name in sorted(by_name, key=len, reverse=True):
        if key.startswith(name) and _is_hangul(key[len(name) :]):
            return by_name[name]
    return None


def _mention_tokens(text: str) -> list[str]:
    """Every `@token` outside URLs and e-mail addresses, in order of appearance."""
    cleaned = _URL.sub(lambda m: " " * len(m.group()), unicodedata.normalize("NFC", text))
    cleaned = _EMAIL.sub(lambda m: " " * len(m.group()), cleaned)
    return [m.group(1).rstrip("-") for m in _MENTION.finditer(cleaned)]


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
    by_name = {fold(p.name): p for p in participants}
    named: list[Participant] = list(_leading_names(text, by_name))
    unknown: list[str] = []
    for token in _mention_tokens(text):
        participant = _lookup(token, by_name)
        if participant is None:
            if token not in unknown:
                unknown.append(token)
        else:
            named.append(participant)
    named = _unique(named)
    if not named:
        active = [p for p in participants if p.active]
        return Addressing(participants=active, broadcast=True, unknown=unknown)
    return Addressing(
        participants=named,
        broadcast=False,
        unknown=unknown,
        inactive=[p for p in named if not p.active],
    )


def relay_mentions(text: str, participants: Sequence[Participant], *, speaker_id: int) -> Mentions:
    """`@name` mentions in a model's reply; only active models other than the speaker relay."""
    by_name = {fold(p.name): p for p in participants}
    named = _unique(
        p
        for p in (_lookup(token, by_name) for token in _mention_tokens(text))
        if p is not None and p.connection_id != speaker_id
    )
    return Mentions(relay=[p for p in named if p.active], named=named)
