"""The investigator model gets an incident's secrets as placeholders (issue 44)."""

from __future__ import annotations

import pytest

from investigations.models import Investigation
from investigations.runner import run_pending_once
from tests.fakes.script import Reply
from tests.providers.test_redaction_wire import wire_leaks
from tests.redaction.canaries import embed, shaped

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_incidents_secrets_reach_the_investigator_as_placeholders(investigator, operator):
    from hal.actions.incidents import check_open_incident
    from tests.fleet.conftest import make_actor

    values = shaped()
    lines = embed(values)
    investigator.fake.replies.push(Reply(text="Nothing to add."))
    check_open_incident(
        actor=make_actor(operator),
        severity="sev3",
        title="Portal slow",
        description=lines["url"] + "\n" + lines["aws"],
    )
    [(_, status)] = run_pending_once()
    assert status == Investigation.DONE
    assert investigator.fake.message_requests
    assert wire_leaks(investigator.fake, values) == []
    assert "[secret:url-password#1]" in investigator.fake.message_requests[0].raw_body.decode()
