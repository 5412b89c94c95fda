"""Review fixtures: the chat rooms' three fake-backed models, and the reviewer setting."""

from __future__ import annotations

import time

import pytest

from tests.chatrooms.conftest import *  # noqa: F403


def set_reviewer(user, value: str) -> None:
    """Change the reviewer setting through the settings action (audited, with history)."""
    from hal.actions.base import Actor
    from hal.actions.settings import do_change_setting, get_definition

    actor = Actor(user=user, via="api", reauth_at=time.time())
    do_change_setting(actor, get_definition("ai.proposal_reviewer"), value, reason="test")


@pytest.fixture
def reviewer_beta(models, operator):
    """beta (the OpenAI-compatible fake) reviews every proposal."""
    set_reviewer(operator, str(models[1].id))
    return models[1]
