"""Look-alike connection names: UTS #39 confusable skeletons and mixed-script detection.

A connection's `@name` is how operators and models address it, so a second name that
looks the same (`inрutbot` with a Cyrillic р next to `inputbot`) would let a message meant
for one model reach another. Data: Unicode confusables.txt and the UCD script tables,
compacted into data/unicode_security.json by scripts/build_unicode_security.py (ADR 0008).
"""

from __future__ import annotations

import bisect
import json
import unicodedata
from collections.abc import Iterable
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.errors import InvalidInput

DATA = Path(__file__).resolve().parent / "data" / "unicode_security.json"
COMMON = frozenset({"Zyyy", "Zinh"})  # Common and Inherited go with any script
# UTS #39 5.1 augmented script sets: Han also writes Japanese, Korean, and with Bopomofo.
AUGMENT = {
    "Hani": {"Hanb", "Jpan", "Kore"},
    "Hira": {"Jpan"},
    "Kana": {"Jpan"},
    "Hang": {"Kore"},
    "Bopo": {"Hanb"},
}
# UTS #39 5.2 "Highly Restrictive": one script, or one of these CJK combinations (which
# is what keeps names such as "claude클로드" or "gpt4o_クロード" legal).
HIGHLY_RESTRICTIVE_SETS = (
    frozenset({"Latn", "Hani", "Hira", "Kana", "Jpan"}),
    frozenset({"Latn", "Hani", "Bopo", "Hanb"}),
    frozenset({"Latn", "Hani", "Hang", "Kore"}),
)


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    for key in ("scripts", "script_extensions"):
        rows = data[key]
        data[key + "_starts"] = [row[0] for row in rows]
    return data


def _lookup(key: str, cp: int) -> str | None:
    data = _data()
    i = bisect.bisect_right(data[key + "_starts"], cp) - 1
    if i >= 0 and data[key][i][0] <= cp <= data[key][i][1]:
        return str(data[key][i][2])  # a script code from the vendored JSON
    return None


@cache
def script_set(char: str) -> frozenset[str]:
    """The augmented Script_Extensions of one character (UTS #39 5.1)."""
    cp = ord(char)
    value = _lookup("script_extensions", cp) or _lookup("scripts", cp) or "Zzzz"
    scripts = set(value.split())
    for code in list(scripts):
        scripts |= AUGMENT.get(code, set())
    return frozenset(scripts)


def is_highly_restrictive(text: str) -> bool:
    """True if `text` is single-script or one of UTS #39's CJK combinations."""
    sets = [s for s in map(script_set, unicodedata.normalize("NFD", text)) if not s <= COMMON]
    if not sets or frozenset.intersection(*sets):
        return True
    return any(all(s & allowed for s in sets) for allowed in HIGHLY_RESTRICTIVE_SETS)


def mixes_digit_systems(text: str) -> bool:
    """True if decimal digits of two numbering systems are mixed (e.g. 1 and ١)."""
    zeros = {
        ord(c) - unicodedata.decimal(c) for c in text if unicodedata.decimal(c, None) is not None
    }
    return len(zeros) > 1


def skeleton(text: str) -> str:
    """The UTS #39 skeleton: NFD, drop default ignorables, map to prototypes, NFD again."""
    prototypes = _data()["confusables"]
    chars = (c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Cf")
    return unicodedata.normalize("NFD", "".join(prototypes.get(c, c) for c in chars))


@lru_cache(maxsize=4096)
def name_keys(name: str) -> frozenset[str]:
    """Skeletons a name is compared by; names are case-insensitive, so the folded one too."""
    return frozenset({skeleton(name), skeleton(name.casefold())})


def check_name(name: str, others: Iterable[str]) -> None:
    """Refuse `name` if it looks like one of `others`, or mixes scripts (HalError codes
    name_confusable, name_mixed_script)."""
    keys = name_keys(name)
    for other in others:
        if keys & name_keys(other):
            raise InvalidInput(
                format_lazy(
                    _("@{name} looks like the existing connection @{other}; choose another name."),
                    name=name,
                    other=other,
                ),
                code="name_confusable",
            )
    if not is_highly_restrictive(name) or mixes_digit_systems(name):
        raise InvalidInput(
            format_lazy(
                _("@{name} mixes letters or digits of different scripts; use one script."),
                name=name,
            ),
            code="name_mixed_script",
        )


def check_connection_name(name: str, *, exclude: int | None = None) -> None:
    """Check a new or renamed connection's name against every other connection."""
    from providers.models import AIConnection

    others = AIConnection.objects.all()
    if exclude is not None:
        if others.filter(pk=exclude, name=name).exists():
            return  # keeping its own name is not a rename
        others = others.exclude(pk=exclude)
    check_name(name, others.values_list("name", flat=True))
