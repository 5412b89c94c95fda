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


def render(value: Any, lang: str | None = None) -> str:
    """The string of a text() dict, a lazy string or a plain string, in `lang`
    (None: the active language)."""
    if lang is not None:
        with translation.override(lang):
            return render(value, None)
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
            if sibling is not None and (is_text(sibling) or isinstance(sibling, str)):
                out[key] = render(sibling)
            else:
                out[key] = localize(value)
        return out
    if isinstance(payload, list | tuple):
        return [localize(v) for v in payload]
    if isinstance(payload, Promise):
        return str(payload)
    return payload


def session_language(session: Any) -> str:
    """The language an operator chose for this session (as the request middleware reads it)."""
    try:
        return (session.get("hal_language") if session is not None else None) or ENGLISH
    except Exception:  # a session that cannot be read is treated as an English one
        return ENGLISH
