"""The first look at an incident (issue 27, item 2): a failing health check opens an incident,
the investigator model reads in the room "Incident #N", and its summary lands on the
timeline with links to the tool results, its next steps waiting as proposals."""

from __future__ import annotations

import pytest

from hal.models import AuditEntry, Incident, IncidentEvent, Job, Proposal
from investigations.models import Investigation
from investigations.runner import run_pending_once
from tests.investigations.conftest import fail_health_check, script_investigation

pytestmark = pytest.mark.django_db(transaction=True)

WRITE_TOOLS = {"restart_module", "open_incident", "check_module_health", "isolate_server"}


def incident_room(incident):
    from chatrooms.models import Room

    return Room.objects.filter(kind=Room.INCIDENT, incident=incident).first()


def test_off_by_default_a_failing_check_opens_an_incident_and_nothing_else(
    models, operator, failing_health, client_op
):
    job = fail_health_check(operator, "portal", failing_health.url)
    assert job.status == Job.FAILED
    incident = Incident.objects.get()
    assert incident.affected_modules == ["portal"] and incident.status == Incident.OPEN
    assert incident.opened_by == "hal-health" and incident.severity == "sev2"
    assert not Investigation.objects.exists() and incident_room(incident) is None
    assert run_pending_once() == []
    assert all(not m.requests for m in models)
    page = client_op.get(f"/incidents/{incident.pk}/").content.decode()
    assert "Health-check job" in page and 'id="investigation-panel"' not in page


def test_a_second_failure_of_the_same_module_opens_no_second_incident(
    models, operator, failing_health
):
    fail_health_check(operator, "portal", failing_health.url)
    fail_health_check(operator, "portal", failing_health.url)
    assert Incident.objects.count() == 1
    Incident.objects.update(status=Incident.CLOSED)
    fail_health_check(operator, "portal", failing_health.url)
    assert Incident.objects.filter(status=Incident.OPEN).count() == 1


def test_failing_check_leads_to_a_room_reads_a_summary_and_a_waiting_proposal(
    investigator, operator, failing_health
):
    script_investigation(investigator.fake)
    job = fail_health_check(operator, "portal", failing_health.url)
    incident = Incident.objects.get()
    # No operator action: the room and the queued investigation exist with the incident.
    room = incident_room(incident)
    assert room is not None and room.display_title() == f"Incident #{incident.pk}"
    assert room.operator_id is None
    assert Investigation.objects.get().status == Investigation.QUEUED

    [(inv_id, status)] = run_pending_once()
    assert status == Investigation.DONE
    inv = Investigation.objects.get(pk=inv_id)
    assert [c["tool"] for c in inv.calls] == ["get_health", "list_jobs", "search_audit"]
    assert all(c["ok"] for c in inv.calls)

    # The model was offered read tools and the findings tool only, never a write tool.
    first = investigator.fake.message_requests[0].json
    offered = {t["name"] for t in first["tools"]}
    assert "submit_findings" in offered and "get_metrics" in offered
    assert not offered & WRITE_TOOLS and "web_search" not in offered
    assert "portal" in str(first["messages"][0]["content"])  # seeded with the incident

    # The read calls' results are in the room, each under its anchor.
    from chatrooms.models import Message

    anchors = [m.meta.get("anchor") for m in Message.objects.filter(room=room)]
    assert "call-toolu_inv_jobs" in anchors and "call-toolu_inv_health" in anchors

    # The timeline entry cites the tool results; the made-up evidence is unsupported.
    entry = IncidentEvent.objects.get(incident=incident, kind="investigation")
    assert entry.actor_label == "hal-investigator"
    urls = [link["url"] for link in entry.data["links"]]
    assert f"/incidents/{incident.pk}/room/#call-toolu_inv_jobs" in urls
    assert "Likely cause: portal is down on its host." in entry.text
    assert "Nobody changed it today. (unsupported)" in entry.text

    # The next step is an ordinary pending proposal; nothing ran without approval.
    proposal = Proposal.objects.get()
    assert proposal.status == Proposal.PENDING and proposal.tool == "check_module_health"
    assert proposal.room_id == room.pk and proposal.requested_label == "hal-investigator"
    assert f"proposal #{proposal.pk}" in entry.text
    assert list(Job.objects.values_list("pk", flat=True)) == [job.pk]
    assert AuditEntry.objects.filter(action="incidents.investigation").count() == 1
    assert AuditEntry.objects.filter(action="investigations.finish", result="ok").count() == 1


def test_write_tools_are_refused_during_an_investigation(investigator, operator):
    from hal.actions.incidents import check_open_incident
    from tests.fakes.script import Reply, ScriptedToolCall
    from tests.fleet.conftest import make_actor

    investigator.fake.replies.push(
        Reply(
            text="",
            tool_calls=[
                ScriptedToolCall("restart_module", {"module": "portal", "server": "x"}, id="w1"),
                ScriptedToolCall("fetch_url", {"url": "https://example.test/"}, id="w2"),
            ],
        ),
        Reply(text="I could not change anything; nothing to add."),
    )
    check_open_incident(actor=make_actor(operator), severity="sev3", title="slow")
    [(inv_id, status)] = run_pending_once()
    assert status == Investigation.DONE
    inv = Investigation.objects.get(pk=inv_id)
    assert [(c["tool"], c["ok"]) for c in inv.calls] == [
        ("restart_module", False),
        ("fetch_url", False),
    ]
    assert not Proposal.objects.exists() and not Job.objects.exists()
    refused = AuditEntry.objects.filter(action="tools.call", error_code="investigation_read_only")
    assert refused.count() == 2
    # The refusal went back to the model as its tool result.
    second = investigator.fake.message_requests[1].json
    assert "investigation_read_only" in str(second["messages"][-1]["content"])


def test_an_operator_opening_an_incident_starts_one_too_and_only_one_at_a_time(
    investigator, operator
):
    from hal.actions.incidents import check_open_incident
    from investigations.actions import check_start_investigation
    from tests.fleet.conftest import make_actor

    incident = check_open_incident(actor=make_actor(operator), severity="sev3", title="x")
    assert Investigation.objects.filter(incident=incident, status="queued").count() == 1
    with pytest.raises(Exception) as exc:
        check_start_investigation(actor=make_actor(operator), incident_id=incident.pk)
    assert getattr(exc.value, "code", "") == "investigation_running"
    # The database refuses a second active one whatever the path.
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Investigation.objects.create(incident=incident, room=incident_room(incident))


def test_every_opening_path_queues_one_an_agent_and_an_approved_proposal(investigator, operator):
    from hal.actions.base import Actor
    from hal.actions.incidents import check_open_incident
    from hal.actions.proposals import check_approve_proposal
    from hal.tools import run_tool_call
    from tests.fleet.conftest import make_actor

    agent = Actor.for_system("agent", "agent:web1")
    by_agent = check_open_incident(actor=agent, severity="sev3", title="disk 95 %")
    op = make_actor(operator)
    outcome = run_tool_call("open_incident", {"severity": "sev2", "title": "5xx"}, actor=op)
    check_approve_proposal(actor=op, proposal_id=outcome.proposal.pk)
    by_proposal = Incident.objects.exclude(pk=by_agent.pk).get()
    assert by_proposal.title == "5xx"
    for incident in (by_agent, by_proposal):
        assert Investigation.objects.get(incident=incident).status == Investigation.QUEUED
        assert incident_room(incident) is not None
    assert AuditEntry.objects.filter(action="investigations.start").count() == 2


def test_a_next_step_cites_the_runbook_it_follows(investigator, operator):
    from hal.actions.incidents import check_open_incident
    from runbooks.actions import check_create_runbook
    from tests.fakes.script import Reply, ScriptedToolCall
    from tests.fleet.conftest import make_actor

    op = make_actor(operator)
    book = check_create_runbook(actor=op, title="Portal down", body="1. Check its health.")
    investigator.fake.replies.push(
        Reply(text="", tool_calls=[ScriptedToolCall("read_runbook", {"id": book.pk}, id="rb")]),
        Reply(
            text="",
            tool_calls=[
                ScriptedToolCall(
                    "submit_findings",
                    {
                        "checked": [{"claim": "A runbook applies.", "evidence": ["rb"]}],
                        "likely_cause": "unknown",
                        "next_steps": [
                            {
                                "tool": "check_module_health",
                                "arguments": {"module": "portal"},
                                "runbook": {"id": book.pk, "version": 1},
                            }
                        ],
                    },
                )
            ],
        ),
    )
    incident = check_open_incident(actor=op, severity="sev3", title="portal", modules=["portal"])
    [(_, status)] = run_pending_once()
    assert status == Investigation.DONE
    proposal = Proposal.objects.get()
    assert proposal.runbook == {"id": book.pk, "version": 1, "title": "Portal down"}
    entry = IncidentEvent.objects.get(incident=incident, kind="investigation")
    assert "(runbook: Portal down)" in entry.text
