"""The reservation bound across processes (issue 25 item 2): twenty sends at once from four
sessions, spread over two daphne web processes on one PostgreSQL database, to an
OpenAI-compatible fake that reports its usage. Usage never exceeds the budget (real usage
below the estimate), a refused send is a 409 `budget_exhausted` that called no model and
stored nothing, and no reservation is left behind."""

from __future__ import annotations

import http.cookiejar
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.db import connection as db_connection
from django.db.models import F, Sum

from tests.chatrooms.conftest import add_connection
from tests.conftest import make_user
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.script import Reply

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        db_connection.vendor != "postgresql", reason="two web processes need PostgreSQL"
    ),
]


class Session:
    """One operator logged in through the real login form of one web process."""

    def __init__(self, base: str, user: Any) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        page = self.opener.open(base + "/login/", timeout=30).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, "no CSRF token on the login page"
        form = urllib.parse.urlencode(
            {
                "username": user.username,
                "password": user.raw_password,
                "csrfmiddlewaretoken": token.group(1),
            }
        ).encode()
        request = urllib.request.Request(base + "/login/", data=form, headers={"Referer": base})
        self.opener.open(request, timeout=30).read()

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        csrf = next((c.value for c in self.jar if c.name == "csrftoken"), "")
        request = urllib.request.Request(
            self.base + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json", "X-CSRFToken": csrf, "Referer": self.base},
        )
        try:
            with self.opener.open(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


APP = "hal.asgi:application"


class WebProcess:
    """A daphne web process on the test database (as tests/browser/conftest.LiveServer,
    with a longer start-up wait: the shared two-core machine may be busy)."""

    START_SECONDS = 180

    def __init__(self, folder: Path, extra_env: dict[str, str]) -> None:
        from tests.browser.conftest import ROOT, _free_port, _server_env

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**_server_env(folder), **extra_env}
        self.log = open(folder / "daphne.log", "wb")  # closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), APP],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("daphne exited: see its daphne.log")
            try:
                urllib.request.urlopen(self.url + "/api/health", timeout=2)
                return
            except Exception:
                time.sleep(0.3)
        raise RuntimeError("daphne did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


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
        deadline = time.monotonic() + 60
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
