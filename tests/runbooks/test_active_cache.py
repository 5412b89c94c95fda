"""The runbooks listed in system prompts come from a list kept a few seconds in process
memory (it was read on every model call): a change saved here shows at once, a change this
process did not see (another web process) within HAL_RUNBOOK_PROMPT_CACHE_SECONDS."""

from __future__ import annotations

import pytest

from runbooks import actions, active
from runbooks.models import Runbook
from runbooks.services import prompt_section

pytestmark = pytest.mark.django_db

PAGE = {"page": "servers", "path": "/servers/"}


def test_a_runbook_saved_in_this_process_shows_at_once(admin_actor, django_assert_num_queries):
    assert prompt_section(PAGE) == ""
    book = actions.check_create_runbook(
        actor=admin_actor, title="Disk full", body="steps", scopes={"pages": ["servers"]}
    )
    assert '"Disk full" (v1)' in prompt_section(PAGE)
    with django_assert_num_queries(0):  # read once, then from memory
        assert '"Disk full" (v1)' in prompt_section(PAGE)
    actions.check_edit_runbook(
        actor=admin_actor,
        runbook_id=book.pk,
        title="Disk full (web)",
        body="more steps",
        scopes={"pages": ["servers"]},
    )
    assert '"Disk full (web)" (v2)' in prompt_section(PAGE)
    actions.check_archive_runbook(actor=admin_actor, runbook_id=book.pk)
    assert prompt_section(PAGE) == ""


def test_a_change_made_elsewhere_shows_within_the_ttl(admin_actor, settings, monkeypatch):
    settings.HAL_RUNBOOK_PROMPT_CACHE_SECONDS = 5
    clock = [1000.0]
    monkeypatch.setattr(active.time, "monotonic", lambda: clock[0])
    actions.check_create_runbook(
        actor=admin_actor, title="Disk full", body="steps", scopes={"pages": ["servers"]}
    )
    assert "Disk full" in prompt_section(PAGE)
    # What another web process does: the row changes without a signal in this process.
    Runbook.objects.update(archived=True)
    clock[0] += 4.0
    assert "Disk full" in prompt_section(PAGE)  # still the list read 4 s ago
    clock[0] += 1.5
    assert prompt_section(PAGE) == ""
