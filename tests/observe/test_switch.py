"""HAL_METRICS=off (issue 47 item 6): a process counts nothing — no HTTP middleware, no
counter calls on the turn, socket and channel-queue paths — and GET /metrics answers 404;
on (the default) it counts. The bench's --shape metrics compares the two."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.test import Client

from hal.observe import families
from tests.fakes.script import Reply
from tests.procenv import ROOT, own_sqlite_env

from .conftest import room_for, sample, send

PROBE = (
    "import django; django.setup(); from django.conf import settings; "
    "from hal.observe import families; import json; print(json.dumps("
    "[settings.HAL_METRICS, families.ON, 'hal.web.middleware.HttpMetricsMiddleware' in "
    "settings.MIDDLEWARE]))"
)


def probe(tmp_path, **extra: str) -> list:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=own_sqlite_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_environment_switch_in_a_real_process(tmp_path):
    assert probe(tmp_path) == [True, True, True]
    assert probe(tmp_path, HAL_METRICS="off") == [False, False, False]


@pytest.fixture
def metrics_off(monkeypatch):
    monkeypatch.setattr(families, "ON", False)


@pytest.mark.django_db
def test_off_the_scrape_is_404(metrics_off):
    assert Client().get("/metrics").status_code == 404


async def test_off_a_turn_counts_nothing(metrics_off, models, aclient, orchestrator):
    alpha = models[0]
    labels = {"gen_ai_provider_name": "anthropic", "gen_ai_request_model": alpha.connection.model}
    started = sample("hal_chat_turns_started_total", **labels)
    tokens = dict(connection=alpha.connection.name, direction="input")
    tokens_before = sample("hal_ai_connection_tokens_total", **tokens)
    alpha.fake.replies.push(Reply(text="quiet", input_tokens=5, output_tokens=2))
    room_id = await room_for(aclient, alpha.id)
    await send(aclient, room_id, "hello")
    await orchestrator.wait_idle()
    assert sample("hal_chat_turns_started_total", **labels) == started
    assert sample("hal_ai_connection_tokens_total", **tokens) == tokens_before
