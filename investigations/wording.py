"""What HAL itself says about an investigation — its room lines, its reasons, its timeline
entry — as storable texts (hal.i18n): English in the rows, the API and what a model reads;
the operator's language on the pages. A model's words are never translated."""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import gettext_noop

from hal import i18n

# The fixed reasons an investigation ends with (investigations.actions / service).
FIXED_REASONS = {
    "stopped": gettext_noop("stopped"),
    "stopped by an operator": gettext_noop("stopped by an operator"),
    "the incident was closed": gettext_noop("the incident was closed"),
    "interrupted twice": gettext_noop("interrupted twice"),
    "the investigator model is not active": gettext_noop("the investigator model is not active"),
    "internal error": gettext_noop("internal error"),
}
# The budgets' reasons, with their numbers.
PATTERNS = [
    (re.compile(r"^tool rounds: (?P<rounds>\d+)$"), gettext_noop("tool rounds: {rounds}")),
    (
        re.compile(r"^tokens: (?P<used>\d+) of (?P<limit>\d+)$"),
        gettext_noop("tokens: {used} of {limit}"),
    ),
    (re.compile(r"^wall time: (?P<seconds>\d+) s$"), gettext_noop("wall time: {seconds} s")),
]


def reason_text(reason: str) -> Any:
    """A stored English reason as a text (a provider's own error stays as it came)."""
    if reason in FIXED_REASONS:
        return i18n.text(FIXED_REASONS[reason])
    for pattern, msgid in PATTERNS:
        if found := pattern.match(reason):
            return i18n.text(msgid, **{k: int(v) for k, v in found.groupdict().items()})
    return reason


def reason_shown(reason: str) -> str:
    """The reason in the active language (pages)."""
    return i18n.render(reason_text(reason))


def queued(pk: int, incident: str, model: str | None, actor: str) -> dict[str, Any]:
    who = model if model else i18n.text(gettext_noop("(no connection)"))
    return i18n.text(
        gettext_noop("Investigation #{pk} of {incident} queued for {model} (started by {actor})."),
        pk=pk,
        incident=incident,
        model=who,
        actor=actor,
    )


def stopped(pk: int, reason: str, actor: str) -> dict[str, Any]:
    return i18n.text(
        gettext_noop("Investigation #{pk} stopped: {reason} ({actor})."),
        pk=pk,
        reason=reason_text(reason),
        actor=actor,
    )


def interrupted(pk: int) -> dict[str, Any]:
    return i18n.text(
        gettext_noop("Investigation #{pk} was interrupted (its worker stopped); it starts again."),
        pk=pk,
    )


def ended(pk: int, status: str, reason: str) -> dict[str, Any]:
    from hal.i18n.labels import status_text

    if reason:
        return i18n.text(
            gettext_noop("Investigation #{pk} ended: {status} ({reason})."),
            pk=pk,
            status=status_text(status),
            reason=reason_text(reason),
        )
    return i18n.text(
        gettext_noop("Investigation #{pk} ended: {status}."), pk=pk, status=status_text(status)
    )


def room_link(incident_id: int) -> dict[str, Any]:
    return i18n.text(gettext_noop("Incident #{pk} room"), pk=incident_id)


def budget_entry(reason: str, calls: int) -> dict[str, Any]:
    return i18n.text(
        gettext_noop(
            "Investigation stopped by its budget ({reason}) after {calls} tool call(s); no summary."
        ),
        reason=reason_text(reason),
        calls=calls,
    )
