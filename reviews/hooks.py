"""The reviews app's doors into hal: the reviewer setting and the proposal hooks.

Registered from ReviewsConfig.ready(); hal keeps no import of this app.
"""

from __future__ import annotations

from typing import Any

from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.errors import InvalidInput
from hal.hooks.proposals import register_on_proposal_created, register_proposal_extra
from reviews import actions


def _valid_reviewer(value: str) -> None:
    """off, any, or the id of a connection that exists (else reviews would stop silently)."""
    if value in (actions.OFF, actions.ANY):
        return
    if not value.isdigit():
        raise ValueError('expected "off", "any" or a connection id.')
    from providers.models import AIConnection

    if not AIConnection.objects.filter(pk=int(value)).exists():
        raise InvalidInput(
            format_lazy(_("ai.proposal_reviewer: no connection has the id {value}."), value=value),
            code="unknown_reviewer",
        )


def _reviewer_options() -> list[tuple[str, Any]]:
    """off, any other active model, then each connection by name (its id is the value)."""
    from providers.models import AIConnection

    named = AIConnection.objects.order_by("position", "id").values_list("pk", "name")
    # Labels as storable texts: a change's impact names the choice in each reader's language.
    return [
        (actions.OFF, i18n.text(gettext_noop("off"))),
        (actions.ANY, i18n.text(gettext_noop("any other active model"))),
        *[(str(pk), f"@{name}") for pk, name in named],
    ]


def on_proposal_created(proposal: Any) -> None:
    """After commit: ask for the second opinion in the background (never awaited)."""
    if proposal.tier not in ("write", "high_risk") or actions.reviewer_setting() == actions.OFF:
        return
    from chatrooms.orchestrator import get_orchestrator
    from reviews.service import run_review

    # Not tied to the room: a reset cancels the proposal, the record of the advice stays.
    get_orchestrator().spawn(run_review(proposal.pk))


def register() -> None:
    from hal.actions.settings import register_setting

    register_setting(
        actions.SETTING,
        type="str",
        default=actions.OFF,
        max_length=20,
        validator=_valid_reviewer,
        options=_reviewer_options,
        description=gettext_noop(
            "Which model gives a second opinion on AI proposals: off, any other active model, "
            "or one connection."
        ),
        controls=gettext_noop(
            "The second opinion on write and high-risk AI proposals (advice only)."
        ),
    )
    register_on_proposal_created("reviews", on_proposal_created)
    register_proposal_extra("reviews", actions.reviews_for)
