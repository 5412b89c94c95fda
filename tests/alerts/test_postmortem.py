"""Catch me up on an open incident, and the postmortem drafted when it closes: model-written
Markdown plus HAL's record citing real audit ids; edited into versions, published, exported;
nothing in it runs; an annotation's secret never reaches the writer model."""

from __future__ import annotations

import json

import pytest

from alerts.models import IncidentLook, Postmortem, PostmortemVersion
from alerts.postmortem import draft_pending_once
from hal.models import AuditEntry, Incident, Job, Proposal
from investigations.runner import run_pending_once
from tests.alerts.conftest import alert, notification, post
from tests.fakes.script import Reply
from tests.investigations.conftest import script_investigation
from tests.providers.test_redaction_wire import wire_leaks
from tests.redaction.canaries import embed, shaped

pytestmark = pytest.mark.django_db(transaction=True)


def _alerted_incident(client, token, investigator, values):
    canary = embed(values)
    a = alert("PortalDown", fingerprint="eeee000000000001", annotations={"runbook": canary["url"]})
    script_investigation(investigator.fake)
    post(client, token, notification("g-pm", [a]))
    run_pending_once()
    return Incident.objects.get(), a


def test_catch_me_up_reads_only_what_changed_since_the_last_look(
    investigator, operator, am_source, client
):
    from alerts.catchup import check_catch_up
    from hal.actions.incidents import check_annotate_incident
    from tests.alerts.conftest import admin

    values = shaped()
    incident, _a = _alerted_incident(client, am_source[1], investigator, values)
    actor = admin(operator)
    investigator.fake.replies.push(Reply(text="Portal is down; one proposal waits for you."))
    first = check_catch_up(actor=actor, incident_id=incident.pk)
    assert first["text"] == "Portal is down; one proposal waits for you."
    assert first["since"] is None
    assert IncidentLook.objects.filter(incident=incident, user=operator).exists()
    asked = investigator.fake.message_requests[-1].raw_body.decode()
    assert "PortalDown" in asked and "investigation" in asked

    check_annotate_incident(actor=actor, incident_id=incident.pk, text="Restarted the pod by hand.")
    investigator.fake.replies.push(Reply(text="You restarted the pod; alerts still firing."))
    second = check_catch_up(actor=actor, incident_id=incident.pk)
    assert second["since"] is not None and second["entries"] == 1
    asked = investigator.fake.message_requests[-1].raw_body.decode()
    assert "Restarted the pod by hand." in asked and "The operator last looked at" in asked
    assert wire_leaks(investigator.fake, values) == []
    assert AuditEntry.objects.filter(action="incidents.catch_up", result="ok").count() == 2


def test_catch_me_up_needs_a_writer_model(operator, am_source, client):
    from alerts.catchup import check_catch_up
    from hal.errors import Conflict
    from tests.alerts.conftest import admin

    post(client, am_source[1], notification("g-off", [alert("X")]))
    with pytest.raises(Conflict) as exc:
        check_catch_up(actor=admin(operator), incident_id=Incident.objects.get().pk)
    assert exc.value.code == "writer_off"


def test_a_closed_incident_gets_an_editable_postmortem_citing_real_audit_ids(
    investigator, operator, am_source, client, reauthed
):
    from hal.actions.incidents import check_close_incident
    from hal.actions.proposals import check_approve_proposal
    from tests.alerts.conftest import admin

    values = shaped()
    incident, a = _alerted_incident(client, am_source[1], investigator, values)
    proposal = Proposal.objects.get()
    check_approve_proposal(actor=admin(operator), proposal_id=proposal.pk)
    check_close_incident(actor=admin(operator), incident_id=incident.pk, resolution="Restarted.")
    assert Postmortem.objects.get(incident=incident).status == Postmortem.QUEUED

    jobs, proposals = Job.objects.count(), Proposal.objects.count()
    draft_md = (
        "# Postmortem: PortalDown\n\n## Summary\nThe portal was down.\n\n"
        "## Follow-ups\n- [ ] alert earlier"
    )
    investigator.fake.replies.push(Reply(text=draft_md))
    assert [status for _pk, status in draft_pending_once()] == [Postmortem.DRAFT]
    pm = Postmortem.objects.get(incident=incident)
    v1 = PostmortemVersion.objects.get(postmortem=pm, number=1)
    assert v1.markdown.startswith(draft_md) and v1.author == "@alpha"
    assert "## Record (from HAL)" in v1.markdown
    # the record cites the real audit rows of the proposal's life, and the alert's link
    for entry in AuditEntry.objects.filter(target_type="proposal", target_id=str(proposal.pk)):
        assert f"#{entry.pk} {entry.action}" in v1.markdown
    assert AuditEntry.objects.filter(
        target_type="proposal", target_id=str(proposal.pk), action="proposals.approve"
    ).exists()
    assert a["generatorURL"] in v1.markdown
    # the writer had no tools, saw no secret, and nothing ran
    request = json.loads(investigator.fake.message_requests[-1].raw_body)
    assert not request.get("tools")
    assert wire_leaks(investigator.fake, values) == []
    assert (Job.objects.count(), Proposal.objects.count()) == (jobs, proposals)

    # edit → v2, publish, export (both versions kept)
    edited = v1.markdown.replace("The portal was down.", "The portal was down for 9 minutes.")
    response = reauthed.post(
        f"/api/incidents/{incident.pk}/postmortem",
        {"markdown": edited},
        content_type="application/json",
    )
    assert response.status_code == 201 and response.json()["version"] == 2
    published = reauthed.post(f"/api/incidents/{incident.pk}/postmortem/publish")
    assert published.json()["postmortem"]["published_version"] == 2
    assert published.json()["postmortem"]["published_by"] == "ops"
    again = reauthed.post(f"/api/incidents/{incident.pk}/postmortem/publish")
    assert again.json()["error"]["code"] == "postmortem_already_published"
    exported = reauthed.get(f"/incidents/{incident.pk}/postmortem.md")
    assert exported["Content-Type"].startswith("text/markdown")
    assert exported.content.decode() == edited
    first = reauthed.get(f"/incidents/{incident.pk}/postmortem.md?version=1")
    assert first.content.decode() == v1.markdown
    page = reauthed.get(f"/incidents/{incident.pk}/")
    assert b'id="postmortem-form"' in page.content and b"9 minutes" in page.content
    assert AuditEntry.objects.filter(action="postmortems.publish", result="ok").count() == 1


def test_an_empty_edit_is_refused_and_changes_nothing(investigator, operator, am_source, client):
    from alerts.postmortem import check_edit_postmortem
    from hal.actions.incidents import check_close_incident
    from hal.errors import InvalidInput
    from tests.alerts.conftest import admin

    post(client, am_source[1], notification("g-empty", [alert("Y")]))
    incident = Incident.objects.get()
    check_close_incident(actor=admin(operator), incident_id=incident.pk, resolution="ok")
    investigator.fake.replies.push(Reply(text="# Postmortem"))
    draft_pending_once()
    with pytest.raises(InvalidInput):
        check_edit_postmortem(actor=admin(operator), incident_id=incident.pk, markdown="  ")
    assert PostmortemVersion.objects.count() == 1
