"""Investigations in parallel: one worker runs up to `ai.investigation_concurrency` at once,
still one per incident; two workers never run the same one; a run whose claim was taken
over (its worker looked dead) cannot end the new run's row."""

from __future__ import annotations

import threading
import time

import pytest

from hal.models import IncidentEvent
from investigations import actions
from investigations.models import Investigation
from investigations.runner import run_pending_once
from tests.fakes.script import Reply
from tests.investigations.conftest import change_setting
from tests.investigations.test_controls import open_incident

pytestmark = pytest.mark.django_db(transaction=True)


def _until(predicate, what: str, tries: int = 600) -> None:
    """Wait for a state (not a time): polls with a generous bound, fails saying what."""
    for _ in range(tries):
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def _held(fake) -> threading.Event:
    """Every text reply of the fake model holds after its first chunk until released."""
    gate = threading.Event()
    fake.hold_after_first_chunk = gate
    fake.replies.default = Reply(text="Nothing more to check here.")
    return gate


def _worker(owner: str, out: dict) -> threading.Thread:
    thread = threading.Thread(
        target=lambda: out.__setitem__(owner, run_pending_once(owner)), daemon=True
    )
    thread.start()
    return thread


def test_the_concurrency_setting_defaults_to_two():
    from hal.actions.settings import get_setting

    assert get_setting(actions.CONCURRENCY_SETTING) == 2


def test_one_worker_investigates_two_incidents_at_once(investigator, operator):
    gate = _held(investigator.fake)
    first = open_incident(operator, "portal slow")
    second = open_incident(operator, "queue stuck")
    out: dict = {}
    thread = _worker("w1", out)
    try:
        # Both conversations are in flight together: the fake holds the first reply, so a
        # worker running them one after another would never send the second request.
        _until(lambda: len(investigator.fake.message_requests) == 2, "two requests in flight")
        running = Investigation.objects.filter(status=Investigation.RUNNING)
        assert {i.incident_id for i in running} == {first.pk, second.pk}
        assert len({i.owner for i in running}) == 2  # each run holds its own claim
    finally:
        gate.set()
        thread.join(60)
    assert sorted(s for _i, s in out["w1"]) == [Investigation.DONE, Investigation.DONE]
    assert IncidentEvent.objects.filter(kind="investigation").count() == 2


def test_the_setting_caps_how_many_run_at_once(investigator, operator):
    change_setting(operator, actions.CONCURRENCY_SETTING, 1)
    gate = _held(investigator.fake)
    open_incident(operator, "one")
    open_incident(operator, "two")
    out: dict = {}
    thread = _worker("w1", out)
    try:
        _until(lambda: len(investigator.fake.message_requests) == 1, "the first request")
        assert Investigation.objects.filter(status=Investigation.RUNNING).count() == 1
        assert Investigation.objects.filter(status=Investigation.QUEUED).count() == 1
    finally:
        gate.set()
        thread.join(60)
    assert len(out["w1"]) == 2 and len(investigator.fake.message_requests) == 2


def test_two_workers_never_run_the_same_investigation(investigator, operator):
    gate = _held(investigator.fake)
    incident = open_incident(operator)
    out: dict = {}
    threads = [_worker("w1", out), _worker("w2", out)]
    try:
        _until(lambda: len(investigator.fake.message_requests) == 1, "the request")
        _until(lambda: len(out) == 1, "the idle worker to find nothing")
    finally:
        gate.set()
        for t in threads:
            t.join(60)
    results = sorted(out.values(), key=len)
    inv = Investigation.objects.get(incident=incident)
    assert results == [[], [(inv.pk, Investigation.DONE)]]
    assert inv.attempts == 1 and len(investigator.fake.message_requests) == 1
    assert IncidentEvent.objects.filter(kind="investigation").count() == 1


def test_a_run_whose_claim_was_taken_over_cannot_end_the_new_one(investigator, operator):
    incident = open_incident(operator)
    inv_id = actions.claim_next("old-run")
    assert inv_id is not None
    # The old run looked dead: re-queued and claimed by another worker's run.
    Investigation.objects.filter(pk=inv_id).update(status=Investigation.QUEUED, owner="")
    assert actions.claim_next("new-run") == inv_id
    assert not actions.heartbeat(inv_id, "old-run")
    assert actions.finish(inv_id, Investigation.FAILED, "late", owner="old-run") is None
    from investigations.summary import post_summary

    assert post_summary(inv_id, {"checked": [], "likely_cause": "x"}, "", owner="old-run") == (
        Investigation.RUNNING
    )
    inv = Investigation.objects.get(pk=inv_id)
    assert (inv.status, inv.owner) == (Investigation.RUNNING, "new-run")
    assert not IncidentEvent.objects.filter(incident=incident, kind="investigation").exists()


def test_stop_still_works_with_two_running(investigator, operator):
    from hal.actions.incidents import check_close_incident
    from tests.fleet.conftest import make_actor

    gate = _held(investigator.fake)
    first = open_incident(operator, "one")
    open_incident(operator, "two")
    out: dict = {}
    thread = _worker("w1", out)
    try:
        _until(lambda: len(investigator.fake.message_requests) == 2, "two requests in flight")
        check_close_incident(actor=make_actor(operator), incident_id=first.pk, resolution="ok")
        _until(
            lambda: Investigation.objects.get(incident=first).status == Investigation.STOPPED,
            "the closed incident's investigation to stop",
        )
    finally:
        gate.set()
        thread.join(60)
    statuses = {Investigation.objects.get(pk=i).incident_id: s for i, s in out["w1"]}
    assert statuses[first.pk] == Investigation.STOPPED
    assert sorted(statuses.values()) == [Investigation.DONE, Investigation.STOPPED]
