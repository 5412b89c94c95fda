"""Twenty concurrent approvals of one proposal: exactly one execution (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from hal.actions import proposals as actions
from hal.actions.base import Actor
from hal.errors import HalError
from hal.models import AuditEntry, Proposal, Server
from hal.tools import run_tool_call

pytestmark = pytest.mark.django_db(transaction=True)

N = 20


def _race(fn, n=N):
    barrier = threading.Barrier(n)
    results: list = []
    lock = threading.Lock()

    def worker():
        try:
            barrier.wait()
            out = ("ok", fn().status)
        except HalError as exc:
            out = ("error", exc.code)
        except Exception as exc:  # a crash must fail the test, not hide in a thread
            out = ("crash", repr(exc))
        finally:
            connection.close()
        with lock:
            results.append(out)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_twenty_concurrent_write_approvals_execute_once(operator):
    Server.objects.create(hostname="new-01")
    actor = Actor(user=operator, via="api", session_key="s", reauth_at=time.time())
    proposal = run_tool_call("approve_server", {"server": "new-01"}, actor=actor).proposal

    results = _race(lambda: actions.check_approve_proposal(actor=actor, proposal_id=proposal.pk))

    assert sorted(results).count(("ok", "executed")) == 1, results
    assert [r for r in results if r[0] != "ok"] == [("error", "proposal_not_pending")] * (N - 1)
    assert AuditEntry.objects.filter(action="servers.approve", result="ok").count() == 1
    assert AuditEntry.objects.filter(action="proposals.execute").count() == 1
    assert Proposal.objects.get(pk=proposal.pk).status == "executed"


def test_twenty_concurrent_high_risk_approvals_execute_once(operator):
    now_server = Server.objects.create(hostname="web-01", status=Server.ACTIVE)
    actor = Actor(user=operator, via="api", session_key="s", reauth_at=time.time())
    proposal = run_tool_call(
        "isolate_server", {"server": "web-01", "reason": "compromised"}, actor=actor
    ).proposal
    actions.check_confirm_proposal(actor=actor, proposal_id=proposal.pk, step="impact")
    actions.check_confirm_proposal(
        actor=actor, proposal_id=proposal.pk, step="target", target="web-01"
    )

    results = _race(lambda: actions.check_approve_proposal(actor=actor, proposal_id=proposal.pk))

    assert results.count(("ok", "executed")) == 1, results
    assert all(r == ("error", "proposal_not_pending") for r in results if r[0] != "ok"), results
    assert AuditEntry.objects.filter(action="servers.isolate", result="ok").count() == 1
    now_server.refresh_from_db()
    assert now_server.status == "isolated"


def test_approvals_racing_the_generic_execute_run_a_proposal_once(operator):
    """Issue 11.4: the proposal's confirmation token, tried through every door at once
    (its approve, the generic /api/confirmations execute, the action itself), runs once."""
    from hal.actions.confirm import check_execute_confirmation
    from hal.actions.servers import check_isolate_server

    server = Server.objects.create(hostname="web-01", status=Server.ACTIVE)
    actor = Actor(user=operator, via="api", session_key="s", reauth_at=time.time())
    proposal = run_tool_call(
        "isolate_server", {"server": "web-01", "reason": "compromised"}, actor=actor
    ).proposal
    actions.check_confirm_proposal(actor=actor, proposal_id=proposal.pk, step="impact")
    actions.check_confirm_proposal(
        actor=actor, proposal_id=proposal.pk, step="target", target="web-01"
    )
    token = Proposal.objects.get(pk=proposal.pk).confirmation_token
    doors = [
        lambda: actions.check_approve_proposal(actor=actor, proposal_id=proposal.pk),
        lambda: check_execute_confirmation(actor=actor, token=token),
        lambda: check_isolate_server(
            actor=actor, server="web-01", reason="compromised", confirmation=token
        ),
    ]
    counter = iter(range(10**6))
    lock = threading.Lock()

    def next_door():
        with lock:
            door = doors[next(counter) % len(doors)]
        return door()

    results = _race(next_door, n=21)

    assert results.count(("ok", "executed")) == 1, results
    assert not [r for r in results if r[0] == "crash"], results
    # Only the approve may run it: the other doors refuse, whatever the order.
    assert ("ok", "isolated") not in results, results
    assert AuditEntry.objects.filter(action="servers.isolate", result="ok").count() == 1
    assert AuditEntry.objects.filter(action="proposals.execute").count() == 1
    server.refresh_from_db()
    assert server.status == "isolated"
