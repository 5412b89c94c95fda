"""Issue 13 item 11: the source scan covers templates and JS too — no English text an
operator reads may bypass translation (a Korean UI must not show stray English)."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

BASE = Path(settings.BASE_DIR)
# Names, units and codes that read the same in every language.
SAME_IN_EVERY_LANGUAGE = {
    "HAL",
    "CPU",
    "OAuth",
    "JSON",
    "URL",
    "API",
    "AI",
    "DR",
    "SMTP",
    "ID",
    "PKCE",
    "UTC",
    "HTTP",
    "HTTPS",
    "CLI",
    "Claude",
    "Code",
    "Anthropic",
    "OpenAI",
    "Tavily",
    "DuckDuckGo",
    "Prometheus",
    "Alertmanager",
    "Grafana",
    "MCP",
    "TLS",
    "sha256",
    "ms",
    "bits",
    "true",
    "false",
}
# `{% block body_class %}…` holds a CSS class, not text.
CSS_BLOCKS = re.compile(r"\{%\s*block\s+body_class\s*%\}.*?\{%\s*endblock\s*%\}", re.S)


def english_words(text: str) -> list[str]:
    words = re.findall(r"[A-Za-z][A-Za-z0-9'-]+", text)
    return [w for w in words if w not in SAME_IN_EVERY_LANGUAGE]


def template_leftovers(source: str) -> list[str]:
    """Visible text and text attributes written outside {% translate %}."""
    s = CSS_BLOCKS.sub(" ", source)
    s = re.sub(r"\{%\s*blocktrans(late)?\b.*?\{%\s*endblocktrans(late)?\s*%\}", " ", s, flags=re.S)
    s = re.sub(r"\{#.*?#\}", " ", s, flags=re.S)
    attrs = re.findall(r'(?:placeholder|title|aria-label|alt)="([^"]*)"', s)
    found = [a for a in attrs if "{%" not in a and "{{" not in a and english_words(a)]
    s = re.sub(r"\{%.*?%\}|\{\{.*?\}\}", " ", s, flags=re.S)
    # Commands, code samples and keyboard keys (<kbd>Enter</kbd>) are shown as typed.
    s = re.sub(r"<(script|style|code|pre|kbd)\b.*?</\1>", " ", s, flags=re.S)
    for line in re.sub(r"<[^>]*>", "\n", s).splitlines():
        if english_words(line):
            found.append(line.strip())
    return found


# A literal an operator reads: textContent/title/placeholder = "...", confirm/alert/prompt("...").
JS_TEXT = re.compile(
    r"""(?:(?:textContent|innerText|title|placeholder|ariaLabel)\s*=\s*|"""
    r"""(?:confirm|alert|prompt)\(\s*)(["'])((?:(?!\1).)*)\1"""
)


def js_leftovers(source: str) -> list[str]:
    return [m.group(2) for m in JS_TEXT.finditer(source) if len(english_words(m.group(2))) >= 2]


def test_the_scans_find_english():
    assert template_leftovers('<p>Delete it</p><input placeholder="host name">') == [
        "host name",
        "Delete it",
    ]
    assert template_leftovers("<p>{% translate 'Delete it' %}</p><code>make test</code>") == []
    assert template_leftovers("<dt><kbd>Shift</kbd>+<kbd>Enter</kbd></dt>") == []
    assert js_leftovers('if (!window.confirm("Delete this connection?")) return;') == [
        "Delete this connection?"
    ]
    assert js_leftovers("el.textContent = T.failed;") == []


def test_no_template_shows_untranslated_english():
    problems = {
        str(p.relative_to(BASE)): template_leftovers(p.read_text())
        for p in sorted((BASE / "templates").rglob("*.html"))
    }
    assert not {k: v for k, v in problems.items() if v}


def test_no_es_module_shows_untranslated_english():
    problems = {
        str(p.relative_to(BASE)): js_leftovers(p.read_text())
        for p in sorted((BASE / "static").rglob("*.js"))
    }
    assert not {k: v for k, v in problems.items() if v}
