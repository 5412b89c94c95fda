"""An SSO operator removed from HAL's groups at the provider loses their open WebSockets at
the re-check (issue 45 item 2), through the whole ASGI stack with the real session cookie."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from hal.actions.oidc import recheck_loop, recheck_sessions
from hal.hooks.workers import loops
from tests.bounds import WAIT
from tests.core.test_ws_session import CLOSED, assert_alive, open_socket
from tests.sso.conftest import person, sso_login

pytestmark = pytest.mark.django_db(transaction=True)


async def test_removal_from_the_groups_closes_the_operators_sockets(sso):
    who = person(sso, ["hal-ops"])
    browser = Client()
    answer = await sync_to_async(sso_login)(browser, sso, who)
    assert answer.status_code == 302
    chat = await open_socket(browser, "/ws/ai/")
    ops = await open_socket(browser, "/ws/ops/")
    try:
        await assert_alive(chat)
        assert await sync_to_async(recheck_sessions)(force=True) == 0
        await assert_alive(chat)
        await sync_to_async(sso.control)(who["username"], groups=[])
        assert await sync_to_async(recheck_sessions)(force=True) == 1
        assert await chat.receive_output(timeout=WAIT) == CLOSED
        assert await ops.receive_output(timeout=WAIT) == CLOSED
    finally:
        for comm in (chat, ops):
            await comm.disconnect()


def test_the_worker_runs_the_recheck_in_a_thread_of_its_own():
    assert ("oidc.recheck", recheck_loop) in loops()
