"""A reviewer call reserves its estimate against the reviewer's budget like a chat call
(issue 25 item 2): it fails without a model call when the budget has too little left, and
its reservation is settled with its charge."""

from __future__ import annotations

import time

from asgiref.sync import sync_to_async

from hal.actions.base import Actor
from providers.budget_models import UsageReservation
from reviews.models import ProposalReview
from tests.fakes.script import Reply

from .test_reviews import propose, review_json


async def set_budget(operator, connection_id: int, **limits):
    from providers.budgets import check_set_budget

    actor = Actor(user=operator, via="api", reauth_at=time.time())
    return await sync_to_async(check_set_budget)(actor=actor, connection=connection_id, data=limits)


async def test_a_review_over_budget_fails_without_a_call(
    models, reviewer_beta, aclient, orchestrator, operator
):
    await set_budget(operator, reviewer_beta.id, tokens_per_day=100)  # below any estimate
    await propose(models, aclient, orchestrator)
    review = await ProposalReview.objects.aget()
    assert review.status == "failed"
    assert review.error.startswith("budget_exhausted: ")
    assert reviewer_beta.requests == []
    assert not await UsageReservation.objects.aexists()


async def test_a_review_within_budget_settles_its_reservation(
    models, reviewer_beta, aclient, orchestrator, operator
):
    await set_budget(operator, reviewer_beta.id, tokens_per_day=10**7)
    reviewer_beta.fake.replies.push(Reply(text=review_json("agree"), input_tokens=321))
    await propose(models, aclient, orchestrator)
    review = await ProposalReview.objects.aget()
    assert review.status == "done" and review.input_tokens == 321
    assert len(reviewer_beta.requests) == 1
    assert not await UsageReservation.objects.aexists()
