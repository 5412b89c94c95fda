"""A send's budget check while a usage batch moves a finished call from reserved to used
(PostgreSQL, two web processes): the check reads the usage and the reservations in two
statements, so a batch committed between them counted the call in neither — CI saw a fourth
call admitted over a three-call budget (tests/budgets/test_budget_processes.py)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction

from hal.errors import Conflict
from providers import reservations
from tests.bounds import WAIT

from .test_reservations import admin, budget, conn, hold  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def test_a_check_while_the_batch_charges_a_call_counts_it_once(conn, admin, monkeypatch):  # noqa: F811
    if connection.vendor != "postgresql":
        pytest.skip("SQLite runs one writer at a time: no statement runs between another's")
    from chatrooms.integration import _record_usage_batch

    budget(admin, conn, tokens_per_day=1000)
    with transaction.atomic():  # a call in flight holds 600
        reservations.attach(reservations.reserve([hold(conn, 600, turn_id=7)]))

    read_usage, go_on = threading.Event(), threading.Event()
    real = reservations.period_totals

    def usage_then_pause(*args, **kwargs):
        found = real(*args, **kwargs)
        read_usage.set()  # the check has read the usage, not yet the reservations
        go_on.wait(WAIT)
        return found

    monkeypatch.setattr(reservations, "period_totals", usage_then_pause)
    outcome: dict[str, str] = {}

    def check() -> None:  # a send: 600 counted (reserved or used) + 500 > 1000
        try:
            with transaction.atomic():
                reservations.reserve([hold(conn, 500)])
            outcome["check"] = "admitted"
        except Conflict:
            outcome["check"] = "refused"
        finally:
            connections.close_all()

    def batch() -> None:  # the call ends having used 600: reserved → used
        try:
            _record_usage_batch([(conn.pk, 500, 100, "m1", None, 7)])
        finally:
            connections.close_all()

    checking = threading.Thread(target=check)
    checking.start()
    assert read_usage.wait(WAIT)
    charging = threading.Thread(target=batch)
    charging.start()
    # Until the batch has committed, or waits for the check's lock.
    deadline = time.monotonic() + WAIT
    while charging.is_alive() and not _waiting_on_a_lock() and time.monotonic() < deadline:
        time.sleep(0.05)
    go_on.set()
    checking.join(WAIT)
    charging.join(WAIT)
    assert not checking.is_alive() and not charging.is_alive()
    assert outcome == {"check": "refused"}
    assert reservations.reserved(conn.pk)["tokens"] == 0  # charged, then released
