"""Issue 13 item 9: the console counters go out over /ws/ops/ after every change that
moves them (overview cards, Approvals menu count, AI button badge)."""

from __future__ import annotations

import pytest

from hal.actions.base import Actor
from hal.queries import counters

pytestmark = pytest.mark.django_db


def _counts(out):
    return [p for g, e, p in out if g == "ops" and e == "counters.updated"]


def test_a_new_proposal_and_an_incident_update_the_counters(
    operator, monkeypatch, django_capture_on_commit_callbacks
):
    from hal.actions.incidents import check_open_incident
    from hal.actions.proposals import check_create_proposal

    out: list = []
    monkeypatch.setattr(counters, "send_now", lambda g, e, p: out.append((g, e, p)))
    actor = Actor(user=operator, via="api", label=operator.get_username())
    with django_capture_on_commit_callbacks(execute=True):
        check_create_proposal(
            actor=actor, tool="open_incident", arguments={"severity": "sev3", "title": "disk"}
        )
    assert _counts(out)[-1]["pending_approvals"] == 1
    with django_capture_on_commit_callbacks(execute=True):
        check_open_incident(actor=actor, severity="sev3", title="disk full")
    latest = _counts(out)[-1]
    assert latest["open_incidents"] == 1 and latest["pending_approvals"] == 1
    assert set(latest) == {"pending_approvals", "fleet", "running_jobs", "open_incidents"}


def test_a_rolled_back_change_sends_nothing(operator, monkeypatch):
    from django.db import transaction

    from hal.live.events import publish

    out: list = []
    monkeypatch.setattr(counters, "send_now", lambda g, e, p: out.append((g, e, p)))
    with pytest.raises(RuntimeError), transaction.atomic():
        publish("ops", "incident.opened", {})
        raise RuntimeError("rolled back")
    assert _counts(out) == []


def test_the_pages_render_the_pending_count(client_op, operator):
    from hal.actions.proposals import check_create_proposal

    actor = Actor(user=operator, via="api", label=operator.get_username())
    check_create_proposal(
        actor=actor, tool="open_incident", arguments={"severity": "sev3", "title": "disk"}
    )
    html = client_op.get("/").content.decode()
    import re

    badges = re.findall(r'<span class="count" data-count="pending_approvals"[^>]*>(\d+)<', html)
    assert badges == ["1", "1"]  # the Approvals menu entry and the AI button
    assert 'data-count="pending_approvals">1<' in html  # the overview card
