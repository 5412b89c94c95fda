"""Translatable text that is stored (msgid + params) and rendered in each reader's language.

What HAL says to operators is translated; what it says to models, the audit log and
scripts that did not choose a language stays English. Text that is stored (an impact
summary on a proposal, a HAL notice in a chat room) is kept as a JSON `Text`
({"msgid", "params"}) next to its English rendering, under the key `<field>_i18n`;
`localize()` swaps in the reader's language when a payload leaves for a browser.

Placeholders are `{name}` (str.format); mark msgids with `gettext_noop("...")` so that
makemessages extracts them (an alias would not be seen by xgettext).
"""

from __future__ import annotations

from typing import Any

from django.utils import translation
from django.utils.functional import Promise
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString

SUFFIX = "_i18n"
ENGLISH = "en"


def text(msgid: str, **params: Any) -> dict[str, Any]:
    """A storable translatable text: {"msgid": ..., "params": {...}} (JSON-serialisable)."""
    return {"msgid": str(msgid), "params": {k: _plain(v) for k, v in params.items()}}


def is_text(value: Any) -> bool:
    """True for a `text()` dict."""
    return isinstance(value, dict) and isinstance(value.get("msgid"), str)


def _plain(value: Any) -> Any:
    # Params are stored: keep them JSON types (a nested text() stays a dict).
    if is_text(value) or value is None or isinstance(value, bool | int | float):
        return value
    return str(value)


def is_lines(value: Any) -> bool:
    """True for a list of lines, each a `text()` or a plain string (a text of several lines)."""
    return isinstance(value, list) and all(is_text(v) or isinstance(v, str) for v in value)


def render(value: Any, lang: str | None = None) -> str:
    """The string of a text() dict, a list of lines, a lazy string or a plain string, in
    `lang` (None: the active language)."""
    if lang is not None:
        with translation.override(lang):
            return render(value, None)
    if is_lines(value):
        return "\n".join(render(line) for line in value)
    if is_text(value):
        params = {
            k: render(v) if is_text(v) else ("" if v is None else v)
            for k, v in (value.get("params") or {}).items()
        }
        template = translation.gettext(value["msgid"]) if value["msgid"] else ""
        if not params:
            return template  # a fixed sentence: no str.format (it may hold braces)
        try:
            return template.format(**params)
        except (KeyError, IndexError, ValueError):
            # A broken translation must not hide the message: fall back to the msgid.
            return value["msgid"].format(**params)
    if isinstance(value, Promise):
        return str(value)
    return "" if value is None else str(value)


def english(value: Any) -> str:
    """The English rendering (audit rows, model-facing text, logs)."""
    return render(value, ENGLISH)


def localize(payload: Any, lang: str | None = None) -> Any:
    """A copy of a JSON payload where every `x` with a sibling `x_i18n` is rendered in
    `lang` (None: the active language) and the `_i18n` keys are dropped."""
    if lang is not None:
        with translation.override(lang):
            return localize(payload, None)
    if isinstance(payload, dict):
        out = {}
        for key, value in payload.items():
            if key.endswith(SUFFIX) and key[: -len(SUFFIX)] in payload:
                continue
            sibling = payload.get(key + SUFFIX) if isinstance(key, str) else None
            if sibling is not None and (
                is_text(sibling) or isinstance(sibling, str) or is_lines(sibling)
            ):
                out[key] = render(sibling)
            else:
                out[key] = localize(value)
        return out
    if isinstance(payload, list | tuple):
        return [localize(v) for v in payload]
    if isinstance(payload, Promise):
        return str(payload)
    return payload


def render_html(value: Any, lang: str | None = None) -> SafeString:
    """A text as HTML for a page: everything escaped; each plain-string param inside
    `<span translate="no">` — by construction a param that is a string is data (a name, an
    identifier, a model's words), while words to translate come as nested texts; a list of
    lines joined with <br> (a line that is a plain string is data too)."""
    if lang is not None:
        with translation.override(lang):
            return render_html(value, None)
    if is_lines(value):
        html = SafeString("")
        for n, line in enumerate(value):
            shown = render_html(line) if is_text(line) else _data(line)
            html = format_html("{}<br>{}", html, shown) if n else shown
        return html
    if not is_text(value):
        return conditional_escape(render(value))
    params: dict[str, Any] = {}
    for key, param in (value.get("params") or {}).items():
        if is_text(param):
            params[key] = render_html(param)
        elif isinstance(param, str):
            params[key] = _data(param)
        else:
            params[key] = "" if param is None else param
    template = translation.gettext(value["msgid"]) if value["msgid"] else ""
    if not params:
        return conditional_escape(template)
    try:
        return format_html(conditional_escape(template), **params)
    except (KeyError, IndexError, ValueError):
        return format_html(conditional_escape(value["msgid"]), **params)


def _data(value: str) -> SafeString:
    return format_html('<span translate="no">{}</span>', value)


def strip(payload: Any) -> Any:
    """A copy without any `_i18n` key, for readers that keep English (a model, scripts)."""
    if isinstance(payload, dict):
        return {k: strip(v) for k, v in payload.items() if not str(k).endswith(SUFFIX)}
    if isinstance(payload, list):
        return [strip(v) for v in payload]
    return payload


def session_language(session: Any) -> str:
    """The language an operator chose for this session (as the request middleware reads it)."""
    try:
        return (session.get("hal_language") if session is not None else None) or ENGLISH
    except Exception:  # a session that cannot be read is treated as an English one
        return ENGLISH
