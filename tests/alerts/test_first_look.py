"""An alert's incident gets the investigator once per firing episode; its summary names the
alerts with their generatorURL and reaches the on-call webhook; an annotation's secret
reaches the model only as a placeholder."""

from __future__ import annotations

import json
import secrets

import pytest

from hal.models import Incident, IncidentEvent, Proposal
from investigations.models import Investigation
from investigations.runner import run_pending_once
from notifications import worker
from tests.alerts.conftest import alert, notification, post
from tests.investigations.conftest import script_investigation
from tests.notifications import conftest as notify
from tests.providers.test_redaction_wire import wire_leaks
from tests.redaction.canaries import embed, shaped

pytestmark = pytest.mark.django_db(transaction=True)

receiver = notify.receiver
op_actor = notify.op_actor


def test_an_alert_gets_one_first_look_per_episode_and_reaches_on_call(
    investigator, operator, op_actor, receiver, am_source, client, settings
):
    settings.HAL_PUBLIC_URL = "https://hal.example.test"
    notify.verified_webhook(op_actor, receiver)
    posts_before = len(receiver.posts())
    _source, token = am_source
    values = shaped()
    # A pasted receiver config: an alert source's own token shape (hal-alerts-…) too.
    values["alerts"] = "hal-alerts-" + secrets.token_urlsafe(32)
    canary = embed(values)
    a = alert(
        "PortalDown",
        fingerprint="dddd000000000001",
        annotations={
            "description": canary["url"],
            "runbook": canary["aws"],
            "config": f"credentials: {values['alerts']}",
        },
        labels={"severity": "critical"},
    )
    script_investigation(investigator.fake)
    assert post(client, token, notification("g-look", [a])).status_code == 200
    for _ in range(3):  # repeat notifications: no new incident, no new investigation
        post(client, token, notification("g-look", [a]))
    incident = Incident.objects.get()
    assert Investigation.objects.filter(incident=incident).count() == 1
    [(_inv, status)] = run_pending_once()
    assert status == Investigation.DONE

    entry = IncidentEvent.objects.get(incident=incident, kind="investigation")
    assert f"- PortalDown [firing] {a['generatorURL']}" in entry.text
    assert Proposal.objects.filter(status=Proposal.PENDING).count() == 1
    # the canary: the model saw placeholders, never the values
    assert investigator.fake.message_requests
    assert wire_leaks(investigator.fake, values) == []
    assert "[secret:url-password#1]" in investigator.fake.message_requests[0].raw_body.decode()

    # on call: the opening, the summary (with the alert's link) and the proposal
    worker.deliver_due("w1")
    events = {}
    for sent in receiver.posts()[posts_before:]:
        for event in json.loads(sent.raw_body)["events"]:
            events[event["kind"]] = event
    assert {"incident_opened", "incident_summary", "proposal_pending"} <= set(events)
    assert a["generatorURL"] in json.dumps(events["incident_summary"])

    # resolved, then firing again: a second episode, a second first look
    post(client, token, notification("g-look", [{**a, "status": "resolved"}]))
    assert Investigation.objects.filter(incident=incident).count() == 1
    post(client, token, notification("g-look", [a]))
    assert Investigation.objects.filter(incident=incident).count() == 2
    assert Incident.objects.count() == 1


def test_a_storm_starts_a_bounded_number_of_investigations(
    investigator, operator, am_source, client
):
    from alerts.models import AlertStorm
    from tests.investigations.conftest import change_setting

    _source, token = am_source
    change_setting(operator, "alerts.storm_groups", 5)
    for n in range(60):
        assert post(client, token, notification(f"storm-{n}", [alert(f"S{n}")])).status_code == 200
    # 5 incidents of their own and one storm incident: six first looks, not sixty
    assert Incident.objects.count() == 6
    assert Investigation.objects.count() == 6
    assert AlertStorm.objects.get().groups == 55
