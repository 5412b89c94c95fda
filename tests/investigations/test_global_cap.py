"""Issue 41 item 8, "also seen": an overall cap on investigations running at once.

`ai.investigation_concurrency` bounds what one worker runs; with several workers (or a
burst of incidents: fifty modules failing their health checks at once) nothing bounded the
total, and each investigation spends up to `ai.investigation_max_tokens` on a model.
`HAL_INVESTIGATION_MAX_RUNNING` (default 4) is enforced where a run is claimed: the count
of live running investigations and the claim happen under one lock, so parallel claims
from any number of workers never pass it.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections
from django.utils import timezone

from investigations import actions
from investigations.models import Investigation
from tests.investigations.test_controls import open_incident

pytestmark = pytest.mark.django_db(transaction=True)


def _queue(operator, n: int) -> None:
    for i in range(n):
        open_incident(operator, f"incident {i}")
    assert Investigation.objects.filter(status=Investigation.QUEUED).count() == n


def _claim_in_parallel(n: int) -> list[int | None]:
    start = threading.Barrier(n)
    out: list[int | None] = [None] * n

    def run(i: int) -> None:
        try:
            start.wait(timeout=60)
            out[i] = actions.claim_next(f"worker-{i}:run")
        finally:
            close_old_connections()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    return out


def test_the_default_cap_is_four():
    assert actions.max_running() == 4


def test_parallel_claims_from_many_workers_never_pass_the_cap(investigator, operator, settings):
    settings.HAL_INVESTIGATION_MAX_RUNNING = 2
    _queue(operator, 6)
    claimed = [c for c in _claim_in_parallel(12) if c is not None]
    assert len(claimed) == 2 and len(set(claimed)) == 2
    assert Investigation.objects.filter(status=Investigation.RUNNING).count() == 2
    assert Investigation.objects.filter(status=Investigation.QUEUED).count() == 4


def test_a_slot_frees_when_a_run_ends(investigator, operator, settings):
    settings.HAL_INVESTIGATION_MAX_RUNNING = 1
    _queue(operator, 2)
    first = actions.claim_next("w1:a")
    assert first is not None
    assert actions.claim_next("w2:a") is None  # the cap, not an empty queue
    actions.finish(first, Investigation.FAILED, "test", owner="w1:a")
    second = actions.claim_next("w2:a")
    assert second is not None and second != first


def test_a_dead_workers_run_does_not_hold_a_slot(investigator, operator, settings):
    """A running row whose heartbeat is stale belongs to a dead worker (the next round
    re-queues it): it does not count against the cap meanwhile."""
    settings.HAL_INVESTIGATION_MAX_RUNNING = 1
    settings.HAL_INVESTIGATION_STALE_SECONDS = 60
    _queue(operator, 2)
    dead = actions.claim_next("gone:a")
    Investigation.objects.filter(pk=dead).update(
        heartbeat_at=timezone.now() - timedelta(seconds=61)
    )
    assert actions.claim_next("alive:a") not in (None, dead)
