"""On call end to end (issue 27, "Done when"): a failing health check opens an incident and,
with no operator action, the investigator reads in its room, posts a summary citing the tool
results, leaves a proposal waiting, and the worker's delivery e-mails and signs a webhook
for each of it to the operator's verified channels; nothing runs without approval.

(Quiet hours holding a sev4 while a high-risk proposal goes through:
tests/notifications/test_schedule.py.)"""

from __future__ import annotations

import hashlib
import hmac
import json
import re

import pytest

from hal.models import Incident, IncidentEvent, Job, Proposal
from investigations.models import Investigation
from investigations.runner import run_pending_once
from notifications import worker
from notifications.models import Delivery
from tests.investigations.conftest import fail_health_check, script_investigation
from tests.notifications import conftest as notify

pytestmark = pytest.mark.django_db(transaction=True)

# The notifications' loopback receivers (an SMTP sink, a webhook receiver), as fixtures here.
smtp_sink = notify.smtp_sink
receiver = notify.receiver
op_actor = notify.op_actor

PUBLIC = "https://hal.example.test"


def test_a_failing_health_check_reaches_the_operator_with_a_first_look(
    investigator, operator, op_actor, failing_health, smtp_sink, receiver, settings, client_op
):
    settings.HAL_PUBLIC_URL = PUBLIC
    notify.verified_email(op_actor, smtp_sink)
    _, secret = notify.verified_webhook(op_actor, receiver)
    mails_before, posts_before = len(smtp_sink.messages), len(receiver.posts())
    script_investigation(investigator.fake)

    job = fail_health_check(operator, "portal", failing_health.url)
    incident = Incident.objects.get()
    [(inv_id, status)] = run_pending_once()  # the worker's investigation loop, one round
    assert status == Investigation.DONE

    # The room, the summary citing the tool results, one proposal waiting.
    inv = Investigation.objects.select_related("room").get(pk=inv_id)
    assert inv.room.display_title() == f"Incident #{incident.pk}"
    entry = IncidentEvent.objects.get(incident=incident, kind="investigation")
    urls = [link["url"] for link in entry.data["links"]]
    assert f"/incidents/{incident.pk}/room/#call-toolu_inv_jobs" in urls
    proposal = Proposal.objects.get()
    assert proposal.status == Proposal.PENDING and proposal.room_id == inv.room_id

    # The worker's delivery: three events (opened, proposal, summary) on both channels.
    assert worker.deliver_due("w1") == 6
    assert set(Delivery.objects.values_list("status", flat=True)) == {"sent"}
    assert worker.deliver_due("w1") == 0  # nothing twice

    # A long subject is folded on the wire; unfolded it is the event's title.
    mails = {re.sub(r"\r?\n", "", m["Subject"]): m for m in smtp_sink.messages[mails_before:]}
    opened = f"[HAL] Incident #{incident.pk} opened (sev2): {incident.title}"
    summary = f"[HAL] Incident #{incident.pk} investigation summary posted (sev2): {incident.title}"
    pending = f"[HAL] Approval needed: check_module_health {proposal.target_identifier}".strip()
    assert set(mails) == {opened, summary, pending}
    incident_url = f"{PUBLIC}/incidents/{incident.pk}/"
    card_url = f"{PUBLIC}/proposals/#proposal-{proposal.pk}"
    body = {s: m.get_payload(decode=True).decode() for s, m in mails.items()}
    assert incident_url in body[opened] and incident_url in body[summary]
    assert "Likely cause: portal is down on its host." in body[summary]
    assert f"proposal #{proposal.pk}" in body[summary]
    assert card_url in body[pending] and "Model: @alpha" in body[pending]
    assert all(m["To"] == "mail@example.test" for m in mails.values())

    posts = receiver.posts()[posts_before:]
    assert len(posts) == 3
    events = {}
    for post in posts:
        expected = "sha256=" + hmac.new(secret.encode(), post.raw_body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(post.headers["x-hal-signature"], expected)
        (event,) = json.loads(post.raw_body)["events"]
        events[event["kind"]] = event
    assert set(events) == {"incident_opened", "incident_summary", "proposal_pending"}
    assert events["incident_summary"]["url"] == incident_url
    assert f"Incident #{incident.pk}" in events["incident_summary"]["title"]
    assert events["proposal_pending"]["url"] == card_url

    # The links open the console's pages (approving still needs the console's own flow).
    for url in (incident_url, card_url):
        assert client_op.get(url.removeprefix(PUBLIC).split("#")[0]).status_code == 200
    assert all("/approve" not in text for text in [*body.values(), *map(str, events.values())])

    # Nothing executed without approval: the health-check job is the only job.
    assert list(Job.objects.values_list("pk", flat=True)) == [job.pk]
    assert Proposal.objects.get().status == Proposal.PENDING
