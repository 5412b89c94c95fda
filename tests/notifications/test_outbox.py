"""The outbox is written in the event's own transaction, and only for verified channels
of operators who want that kind of event."""

from __future__ import annotations

import pytest
from django.db import transaction

from hal.actions.incidents import check_open_incident
from notifications import actions
from notifications.models import Delivery, Event
from tests.notifications.conftest import verified_email

pytestmark = pytest.mark.django_db


def test_an_incident_and_its_outbox_commit_together(op_actor, smtp_sink):
    channel = verified_email(op_actor, smtp_sink)
    incident = check_open_incident(actor=op_actor, severity="sev2", title="disk full on db-1")
    event = Event.objects.get(key__startswith="incident_event:")
    assert event.kind == "incident_opened" and event.urgent
    assert event.link == f"/incidents/{incident.pk}/"
    assert list(Delivery.objects.values_list("channel_id", "status")) == [(channel.pk, "pending")]


def test_a_rolled_back_incident_leaves_no_outbox_row(op_actor, smtp_sink):
    verified_email(op_actor, smtp_sink)
    with pytest.raises(RuntimeError), transaction.atomic():
        check_open_incident(actor=op_actor, severity="sev1", title="rolled back")
        assert Delivery.objects.count() == 1  # written inside the same transaction…
        raise RuntimeError("the change fails after its hook ran")
    assert Event.objects.count() == 0 and Delivery.objects.count() == 0  # …and undone with it


def test_a_rolled_back_proposal_leaves_no_outbox_row(op_actor, smtp_sink):
    from hal.actions.proposals import check_create_proposal

    verified_email(op_actor, smtp_sink)
    with pytest.raises(RuntimeError), transaction.atomic():
        check_create_proposal(
            actor=op_actor, tool="open_incident", arguments={"severity": "sev3", "title": "x"}
        )
        assert Delivery.objects.count() == 1
        raise RuntimeError("rolled back")
    assert Delivery.objects.count() == 0
    proposal = check_create_proposal(
        actor=op_actor, tool="open_incident", arguments={"severity": "sev3", "title": "disk"}
    )
    event = Event.objects.get()
    assert event.kind == "proposal_pending" and not event.urgent
    assert event.link == f"/proposals/#proposal-{proposal.pk}"
    assert Delivery.objects.count() == 1


def test_an_unverified_channel_gets_nothing(op_actor, smtp_sink):
    actions.check_add_channel(actor=op_actor, kind="email", name="m", address="m@example.test")
    check_open_incident(actor=op_actor, severity="sev3", title="t")
    assert Event.objects.count() == 1 and Delivery.objects.count() == 0


def test_a_kind_switched_off_is_not_queued(op_actor, smtp_sink):
    verified_email(op_actor, smtp_sink)
    actions.check_set_preferences(actor=op_actor, disabled_kinds=["incident_opened"])
    check_open_incident(actor=op_actor, severity="sev3", title="t")
    assert Delivery.objects.count() == 0


def test_a_note_is_not_news_but_an_investigation_summary_is(op_actor, smtp_sink):
    from hal.actions.incidents import check_annotate_incident
    from hal.hooks.incidents import incident_changed
    from hal.models import IncidentEvent

    verified_email(op_actor, smtp_sink)
    incident = check_open_incident(actor=op_actor, severity="sev3", title="t")
    note = check_annotate_incident(actor=op_actor, incident_id=incident.pk, text="looked at it")
    assert Event.objects.count() == 1
    # As the investigator will report its summary: an incident change of kind
    # "investigation" (IncidentEvent.kind holds 10 characters today, so the row itself is
    # the investigator's to add; the hook is called as hal calls it).
    summary_row = IncidentEvent(pk=note.pk + 1000, incident=incident, kind="investigation")
    summary_row.text = "Likely cause: the log volume is full."
    with transaction.atomic():
        incident_changed("investigation", incident, summary_row)
    summary = Event.objects.get(kind="incident_summary")
    assert "Likely cause" in summary.text and Delivery.objects.count() == 2
    assert summary.title.startswith(f"Incident #{incident.pk} investigation summary posted")


def test_a_models_proposal_names_the_model_and_its_impact_line(op_actor, smtp_sink):
    from hal.actions.proposals import check_create_proposal
    from providers.models import AIConnection

    verified_email(op_actor, smtp_sink)
    conn = AIConnection.objects.create(
        name="alpha", provider="anthropic", auth_method="api_key", status="active"
    )
    proposal = check_create_proposal(
        actor=op_actor,
        tool="open_incident",
        arguments={"severity": "sev3", "title": "disk"},
        origin={"connection_id": conn.pk},
    )
    event = Event.objects.get()
    assert event.text.splitlines()[:2] == ["Model: @alpha", "Tier: write"]
    assert f"Impact: {proposal.impact['summary']}" in event.text
