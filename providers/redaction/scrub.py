"""Find the secrets in a text and put each one's placeholder in its place.

Detection is pure and cached per text (a conversation's history is sent again on every
call: only new text is scanned). Numbering is per scope (a room, a review, an
investigation) and kept in the database as a keyed hash (`RedactionMark`), so a restart
or another process keeps `[secret:aws-access-token#1]` the same secret.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils.crypto import salted_hmac

from hal.tools.placeholders import placeholder

from .known import KNOWN, find_known
from .rules import find_shapes

# A text over this many characters is scanned in slices of it (with an overlap so a secret
# across a cut is still seen whole): bounds the regex work per call (docs/adr/0019).
SLICE = 64_000
OVERLAP = 2_000
CACHE_SIZE = 4096
# HAL's prompts are markdown sections: a long text is detected section by section, each
# cached, so a prompt whose context section changed (the operator's screen) rescans only
# that section, not the 23 KB skill document before it: ~25 ms per model call on the event
# loop (issue 43). A cut is safe there: no secret holds a blank line then "## " (PEM armour
# has no "#"); a header cut from its `curl` is still an Authorization header (docs/adr/0019,
# tests/redaction/test_sections.py).
SECTION = "\n\n## "
SECTIONS_ABOVE = 8_000
# Rules that belong to the known-values part: HAL's own tokens never go out, switch or not.
ALWAYS = frozenset({"hal-token"})


@dataclass(frozen=True)
class Hit:
    """One secret in a text: where, what kind, and the keyed hash of its value."""

    start: int
    end: int
    kind: str
    digest: str


def digest_of(value: str) -> str:
    """The stored form of a secret value (keyed: a leaked table reveals nothing)."""
    return salted_hmac("hal.redaction", value, algorithm="sha256").hexdigest()


GENERIC = frozenset({"generic-api-key", "secret-assignment"})
KNOWN_KINDS = ("hal-", "django-", "database-", "redis-")


def _rank(kind: str) -> int:
    if kind.startswith(KNOWN_KINDS) and kind != "hal-token":
        return 0
    return 2 if kind in GENERIC else 1


def _detect(text: str, patterns: bool) -> tuple[Hit, ...]:
    raw: list[tuple[int, int, str, str]] = list(find_known(text))
    if "hal-" in text or patterns:
        for base in range(0, max(len(text) - OVERLAP, 1), SLICE - OVERLAP):
            piece = text[base : base + SLICE]
            for start, end, kind in find_shapes(piece, only=None if patterns else ALWAYS):
                raw.append((base + start, base + end, kind, piece[start:end]))
    # Where two start together: a known value (named by what HAL knows), then a specific
    # shape before a generic one, then the longest.
    raw.sort(key=lambda h: (h[0], _rank(h[2]), -(h[1] - h[0])))
    hits: list[Hit] = []
    last_end = -1
    for start, end, kind, value in raw:
        if start < last_end:
            if end > last_end and hits:  # overlapping: widen the earlier one
                prev = hits[-1]
                hits[-1] = Hit(prev.start, end, prev.kind, prev.digest)
                last_end = end
            continue
        hits.append(Hit(start, end, kind, digest_of(value)))
        last_end = end
    return tuple(hits)


class _Cache:
    """Detected hits per (text, switch, known-values generation); least recently used out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[bytes, bool, int], tuple[Hit, ...]] = OrderedDict()

    @staticmethod
    def _key(text: str, patterns: bool) -> tuple[bytes, bool, int]:
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        return (digest, patterns, KNOWN.generation)

    def cached(self, text: str, patterns: bool) -> tuple[Hit, ...] | None:
        """The hits of a text scanned before (None: not scanned yet)."""
        if not text:
            return ()
        key = self._key(text, patterns)
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def hits(self, text: str, patterns: bool) -> tuple[Hit, ...]:
        found = self.cached(text, patterns)
        if found is not None:
            return found
        key = self._key(text, patterns)
        if len(text) > SECTIONS_ABOVE and SECTION in text:
            found = self._by_section(text, patterns)
        else:
            found = _detect(text, patterns)
        with self._lock:
            self._items[key] = found
            while len(self._items) > CACHE_SIZE:
                self._items.popitem(last=False)
        return found

    def _by_section(self, text: str, patterns: bool) -> tuple[Hit, ...]:
        """The hits of each section (cached on its own), placed in the whole text."""
        out: list[Hit] = []
        start = 0
        while True:
            cut = text.find(SECTION, start)
            end = len(text) if cut < 0 else cut
            for hit in self.hits(text[start:end], patterns):
                out.append(Hit(hit.start + start, hit.end + start, hit.kind, hit.digest))
            if cut < 0:
                return tuple(out)
            start = cut + 2  # the next section begins at its "## "

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


CACHE = _Cache()


@dataclass
class Numbering:
    """Placeholders of one scope: (digest → placeholder), read from and written to the DB
    (an empty scope: numbered for this call only, nothing stored)."""

    scope: str
    known: dict[str, str] = field(default_factory=dict)

    def missing(self, hits: list[Hit]) -> list[Hit]:
        return [h for h in hits if h.digest not in self.known]

    def resolve(self, hits: list[Hit]) -> None:
        """Give every hit of `hits` a placeholder (sync: may read and write the DB)."""
        todo = {h.digest: h.kind for h in self.missing(hits)}
        if not todo:
            return
        if not self.scope:
            counts = Counter(p.split("#")[0] for p in self.known.values())
            for digest, kind in todo.items():
                counts[f"[secret:{kind}"] += 1
                self.known[digest] = placeholder(kind, counts[f"[secret:{kind}"])
            return
        from providers.models import RedactionMark

        for mark in RedactionMark.objects.filter(scope=self.scope, digest__in=list(todo)):
            self.known[mark.digest] = placeholder(mark.kind, mark.number)
            todo.pop(mark.digest, None)
        for digest, kind in todo.items():
            self.known[digest] = _mark(self.scope, kind, digest)


def _mark(scope: str, kind: str, digest: str) -> str:
    """The placeholder of a new secret in `scope`: the next number of its kind, or the
    number another process gave it first."""
    from providers.models import RedactionMark

    for _attempt in range(5):
        existing = RedactionMark.objects.filter(scope=scope, digest=digest).first()
        if existing is not None:
            return placeholder(existing.kind, existing.number)
        top = RedactionMark.objects.filter(scope=scope, kind=kind).aggregate(n=Max("number"))["n"]
        try:
            with transaction.atomic():
                RedactionMark.objects.create(
                    scope=scope, kind=kind, number=(top or 0) + 1, digest=digest
                )
            return placeholder(kind, (top or 0) + 1)
        except IntegrityError:
            continue  # another process numbered one at the same moment: read again
    raise RuntimeError("could not number a redacted secret")


def apply(text: str, hits: tuple[Hit, ...], numbering: Numbering, used: set[str]) -> str:
    """`text` with each hit replaced by its placeholder (added to `used`)."""
    if not hits:
        return text
    out: list[str] = []
    at = 0
    for hit in hits:
        out.append(text[at : hit.start])
        mark = numbering.known[hit.digest]
        out.append(mark)
        used.add(mark)
        at = hit.end
    out.append(text[at:])
    return "".join(out)


def walk_strings(value: Any, fn: Any, depth: int = 0) -> Any:
    """A JSON value with `fn` applied to every string (keys too)."""
    if depth > 64:
        return "[secret:too-deep#0]"  # never sent whole unscanned
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {fn(str(k)): walk_strings(v, fn, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [walk_strings(v, fn, depth + 1) for v in value]
    return value


def by_kind(used: set[str]) -> dict[str, int]:
    """Distinct secrets by kind, from the placeholders used."""
    return dict(sorted(Counter(mark[8 : mark.rindex("#")] for mark in used).items()))
