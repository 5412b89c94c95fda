"""The reviewer model gets a proposal's secrets as placeholders (issue 44)."""

from __future__ import annotations

import pytest

from tests.providers.test_redaction_wire import wire_leaks
from tests.redaction.canaries import shaped

from .test_reviews import propose, review_json

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_proposals_secret_reaches_the_reviewer_as_a_placeholder(
    models, reviewer_beta, aclient, orchestrator
):
    from tests.fakes.script import Reply

    values = shaped()
    reviewer_beta.fake.replies.push(Reply(text=review_json("concerns")))
    # A model that writes a key into its proposal (learnt elsewhere: HAL never sent it).
    await propose(
        models, aclient, orchestrator, {"severity": "sev3", "title": f"key {values['aws']} leaked"}
    )
    (request,) = reviewer_beta.requests
    assert wire_leaks(reviewer_beta.fake, {"aws": values["aws"]}) == []
    assert "[secret:aws-access-token#1]" in request.raw_body.decode()
