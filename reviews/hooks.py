"""The reviews app's doors into hal: the reviewer setting and the proposal hooks.

Registered from ReviewsConfig.ready(); hal keeps no import of this app.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_noop

from hal.proposal_hooks import register_on_proposal_created, register_proposal_extra
from reviews import actions


def _valid_reviewer(value: str) -> None:
    if value not in (actions.OFF, actions.ANY) and not value.isdigit():
        raise ValueError('expected "off", "any" or a connection id.')


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
        description=gettext_noop(
            'Which model reviews AI proposals: "off", "any" (another active model) or a '
            "connection id."
        ),
        controls="The second opinion on write and high-risk AI proposals (advice only).",
    )
    register_on_proposal_created("reviews", on_proposal_created)
    register_proposal_extra("reviews", actions.reviews_for)
