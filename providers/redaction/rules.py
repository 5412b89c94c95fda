"""The shape rules: gitleaks' default rule set, vendored as data, compiled for Python's `re`.

Gitleaks writes its rules for Go's RE2. Three differences matter and are translated here:
an inline `(?i)` after the start of a pattern (RE2 scopes it to the rest of its group;
Python refuses it), `\\z` (Python's `\\Z`), and nothing else that the vendored file uses. A
rule that still does not compile is left out and counted (`skipped`), never guessed at.
See docs/adr/0019-redaction-rules.md.
"""

from __future__ import annotations

import math
import re
import tomllib
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
RULES_FILE = DATA / "gitleaks.toml"
# HAL's own shapes in the same format, loaded after gitleaks' (docs/adr/0019).
HAL_RULES_FILE = DATA / "hal-rules.toml"
# The upstream commit the file was taken from (docs/adr/0019-redaction-rules.md).
RULES_VERSION = "gitleaks v8.30.0-27-gb58d3f10"


@dataclass(frozen=True)
class Rule:
    """One compiled shape: its id (the placeholder's kind), keywords, entropy floor."""

    id: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...]
    entropy: float
    group: int | None
    stopwords: tuple[str, ...] = ()
    allow: tuple[re.Pattern[str], ...] = ()


def _group_end(text: str, start: int) -> int:
    """Index of the `)` closing the group that contains `start` (len(text) at top level)."""
    depth, i, in_class = 0, start, False
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            if text[i + 1 : i + 2] == "]":
                i += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return len(text)


_LEAD = "[\\w.-]{0,50}?"


def translate(pattern: str) -> str:
    """An RE2 pattern as Python's `re` reads it (see the module docstring)."""
    pattern = pattern.replace("\\z", "\\Z")
    # A lazy `[\w.-]{0,50}?` before the keyword only widens the match, never the secret
    # group, and makes every position of the text try fifty extents (a third of the cost).
    for lead in ("(?i)", ""):
        if pattern.startswith(lead + _LEAD):
            pattern = lead + pattern[len(lead + _LEAD) :]
    while True:
        at = pattern.find("(?i)", 1)
        if at < 0:
            return pattern
        end = _group_end(pattern, at + 4)
        pattern = pattern[:at] + "(?i:" + pattern[at + 4 : end] + ")" + pattern[end:]


def shannon(value: str) -> float:
    """Shannon entropy in bits per character (gitleaks' `entropy` field)."""
    if not value:
        return 0.0
    counts = Counter(value)
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def _compile(raw: str) -> re.Pattern[str] | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RE2's `[[` is a literal `[` in Python too
        try:
            return re.compile(translate(raw))
        except re.error:
            return None


@dataclass(frozen=True)
class RuleSet:
    """The compiled rules and the ids of those that could not be compiled."""

    rules: tuple[Rule, ...]
    skipped: tuple[str, ...]
    version: str


@cache
def load_rules() -> RuleSet:
    """The vendored rule set, compiled once per process."""
    raws = [
        raw
        for path in (RULES_FILE, HAL_RULES_FILE)
        for raw in tomllib.loads(path.read_text(encoding="utf-8")).get("rules", [])
    ]
    rules: list[Rule] = []
    skipped: list[str] = []
    for raw in raws:
        if not raw.get("regex") or raw.get("path"):
            continue  # path-only rules judge file names, which HAL never sends
        pattern = _compile(raw["regex"])
        if pattern is None:
            skipped.append(raw["id"])
            continue
        stop: list[str] = []
        allow: list[re.Pattern[str]] = []
        for entry in raw.get("allowlists", []):
            if entry.get("condition", "OR") != "OR" or entry.get("paths"):
                continue
            stop += [word.lower() for word in entry.get("stopwords", [])]
            if entry.get("regexTarget", "secret") == "secret":
                allow += [p for p in map(_compile, entry.get("regexes", [])) if p is not None]
        rules.append(
            Rule(
                id=raw["id"],
                pattern=pattern,
                keywords=tuple(k.lower() for k in raw.get("keywords", [])),
                entropy=float(raw.get("entropy", 0) or 0),
                group=raw.get("secretGroup"),
                stopwords=tuple(stop),
                allow=tuple(allow),
            )
        )
    return RuleSet(rules=tuple(rules), skipped=tuple(skipped), version=RULES_VERSION)


def _secret_span(rule: Rule, match: re.Match[str]) -> tuple[int, int]:
    """The part of a match that is the secret: the rule's group, else the first
    non-empty group (gitleaks' default), else the whole match."""
    if rule.group is not None and match.group(rule.group) is not None:
        return match.span(rule.group)
    for index in range(1, (match.re.groups or 0) + 1):
        if match.group(index):
            return match.span(index)
    return match.span(0)


def find_shapes(text: str, *, only: frozenset[str] | None = None) -> list[tuple[int, int, str]]:
    """(start, end, rule id) of every secret shape in `text` (of the rules in `only`, when
    given). A rule runs only when one of its keywords is in the text (gitleaks' own
    prefilter: most rules never run)."""
    lowered = text.lower()
    found: list[tuple[int, int, str]] = []
    for rule in load_rules().rules:
        if only is not None and rule.id not in only:
            continue
        if rule.keywords and not any(keyword in lowered for keyword in rule.keywords):
            continue
        for match in rule.pattern.finditer(text):
            start, end = _secret_span(rule, match)
            secret = text[start:end]
            if not secret or (rule.entropy and shannon(secret) < rule.entropy):
                continue
            low = secret.lower()
            if any(word in low for word in rule.stopwords):
                continue
            if any(p.search(secret) for p in rule.allow):
                continue
            found.append((start, end, rule.id))
    return found
