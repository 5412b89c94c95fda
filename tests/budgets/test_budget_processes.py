"""The reservation bound across processes (issue 25 item 2): twenty sends at once from four
sessions, spread over two daphne web processes on one PostgreSQL database, to an
OpenAI-compatible fake that reports its usage. Usage never exceeds the budget (real usage
below the estimate), a refused send is a 409 `budget_exhausted` that called no model and
stored nothing, and no reservation is left behind."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connection as db_connection
from django.db.models import F, Sum

from tests.bounds import WAIT
from tests.chatrooms.conftest import add_connection
from tests.conftest import make_user
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.script import Reply
from tests.webprocs import Session, WebProcess

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        db_connection.vendor != "postgresql", reason="two web processes need PostgreSQL"
    ),
]


@pytest.fixture
def two_processes(settings, tmp_path):
    extra = {
        "HAL_DATA_DIR": str(settings.DATA_DIR),  # the same vault key file as this process
        "HAL_VAULT_KEY_FILE": str(settings.HAL_VAULT_KEY_FILE),
    }
    servers: list[WebProcess] = []
    try:
        for n in range(2):
            folder = Path(tmp_path / f"web{n}")
            folder.mkdir()
            servers.append(WebProcess(folder, extra))
        for server in servers:  # started side by side, then waited for
            server.wait_ready()
        yield servers
    finally:
        for server in servers:
            server.stop()


def test_twenty_sends_over_two_processes_stay_within_the_budget(
    operator, django_user_model, two_processes, settings
):
    from chatrooms import holds
    from chatrooms.actions import ensure_rooms
    from chatrooms.models import Message, Room
    from hal.actions.base import Actor
    from providers.budget_models import UsageDay, UsageReservation
    from providers.budgets import check_set_budget

    with FakeOpenAI() as fake:
        conn = add_connection(operator, "beta", fake)
        users = [make_user(django_user_model, f"op{n}", superuser=True) for n in range(4)]
        estimates = []
        rooms = []
        for user in users:
            ensure_rooms(user)
            room = Room.objects.select_related("operator").get(operator=user, connection=conn)
            conn.budgeted = True  # (in memory: the estimate is the same without a budget)
            estimates.append(
                holds.estimate_turn(room, conn, None, text="go", context={}, author=user.username)
            )
            rooms.append(room.pk)
        low = min(e.tokens for e in estimates)
        high = max(e.tokens for e in estimates)
        budget = 3 * high + high // 2  # three calls in flight at most
        admin = Actor(user=operator, via="api", reauth_at=time.time())
        check_set_budget(actor=admin, connection=conn.pk, data={"tokens_per_day": budget})
        fake.replies.default = Reply(text="ok " * 10, input_tokens=low - 1 - 10, latency=0.05)

        # Four sessions, two on each process; twenty sends at once, five per session.
        sessions = [Session(two_processes[n % 2].url, user) for n, user in enumerate(users)]
        with ThreadPoolExecutor(20) as pool:
            answers = list(
                pool.map(
                    lambda n: sessions[n % 4].call(
                        "POST", f"/api/ai/rooms/{rooms[n % 4]}/messages", {"text": "go"}
                    ),
                    range(20),
                )
            )
        accepted = [a for a in answers if a[0] == 202]
        refused = [a for a in answers if a[0] != 202]
        assert 1 <= len(accepted) < 20, answers
        assert {status for status, _ in refused} == {409}
        assert {body["error"]["code"] for _, body in refused} == {"budget_exhausted"}
        # Wait for the replies (each process runs its own turns) and their charges.
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            streaming = Message.objects.filter(status=Message.STREAMING).exists()
            if not streaming and not UsageReservation.objects.exists():
                break
            time.sleep(0.2)
        assert not UsageReservation.objects.exists()
        assert len(fake.completion_requests) == len(accepted)  # a refused send called nothing
        assert Message.objects.filter(author_kind=Message.OPERATOR).count() == len(accepted)
        total = UsageDay.objects.filter(connection=conn).aggregate(
            t=Sum(F("input_tokens") + F("output_tokens"))
        )["t"]
        assert total == len(accepted) * (low - 1) and total <= budget
