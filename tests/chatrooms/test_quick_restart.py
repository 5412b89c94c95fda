"""Issue 41 item 4: a reply whose web process died is marked interrupted by the restart
itself — `chat_recover` (systemd's start step) and the next process's start — also when
the restart comes within the lease timeout, not by the first console that connects.

Before: the dead process's lease was still fresh, so `chat_recover` reported 0 turns (3 of
5 runs in the field), and the reply stayed `streaming` until a console's first send. Now
a lease of this host's process table whose process is gone is dead at once (a SIGKILL),
and a process stopped with SIGTERM gives its lease up as it stops.

Real daphne processes over the test database; the lease timeout is ten minutes here, so
every restart is within it whatever the machine's load."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from chatrooms.models import Message, Turn
from hal.actions.base import Actor
from hal.actions.mcp_turn_tokens import TurnScope, do_mint_turn_token
from hal.models import McpToken
from tests.chatrooms.conftest import add_connection
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.script import Reply
from tests.webprocs import BOUND, Session, wait_for

# Several daphne processes start and stop in each test: bounds for a busy machine.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(1800)]

LEASE_SECONDS = 600.0  # the web processes' lease timeout (the `web` fixture)


def streaming_story(web, operator, api) -> tuple[object, Message]:
    """Process A streams a long reply; (A, the reply) once its text is being saved."""
    add_connection(operator, "alpha", api)
    api.replies.push(Reply(text="word " * 2000, token_delay=0.05))
    first = web("a")
    ops = Session(first.url, operator)
    room = ops.call("GET", "/api/ai/rooms")[1]["rooms"][0]["id"]
    status, body = ops.call("POST", f"/api/ai/rooms/{room}/messages", {"text": "@alpha a story"})
    assert status == 202, body
    story = wait_for(
        lambda: (
            Message.objects.filter(author_kind=Message.MODEL, status=Message.STREAMING)
            .exclude(text="")
            .first()
        ),
        "the story streaming",
    )
    return first, story


def chat_recover(folder, settings) -> str:
    """`manage.py chat_recover` as systemd's start step runs it (a process of its own)."""
    from tests.browser.conftest import ROOT, _server_env

    env = {
        **_server_env(folder),
        "HAL_DATA_DIR": str(settings.DATA_DIR),
        "HAL_VAULT_KEY_FILE": str(settings.HAL_VAULT_KEY_FILE),
        "HAL_CHAT_LEASE_TIMEOUT": str(LEASE_SECONDS),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "chat_recover"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_chat_recover_right_after_a_process_died_marks_its_reply(
    web, operator, tmp_path, settings, sig
):
    with FakeAnthropic() as api:
        first, story = streaming_story(web, operator, api)
        first.signal(sig)
        out = chat_recover(tmp_path, settings)
        assert "HAL chat: 1 interrupted turn(s) marked." in out, out
        reply = Message.objects.get(pk=story.pk)
        assert (reply.status, reply.error_code) == (Message.FAILED, "interrupted")
        assert Turn.objects.get(reply=reply).status == Turn.INTERRUPTED


def test_the_next_process_marks_the_reply_at_its_start_without_a_console(web, operator):
    with FakeAnthropic() as api:
        first, story = streaming_story(web, operator, api)
        # A token of the dying turn (as a CLI run's): the restart revokes it with the turn.
        turn = Turn.objects.get(reply_id=story.pk)
        scope = TurnScope(
            room_id=turn.room_id, turn_id=turn.pk, connection_id=0, message_id=story.pk
        )
        token_id, _raw = do_mint_turn_token(Actor(user=operator, via="ai"), scope, ttl_seconds=300)
        first.signal(signal.SIGKILL)
        web("b")  # started; nothing connects to it, nothing is sent
        wait_for(
            lambda: Message.objects.get(pk=story.pk).status == Message.FAILED,
            "the dead reply marked interrupted by the new process's start",
        )
        assert Message.objects.get(pk=story.pk).error_code == "interrupted"
        assert Turn.objects.get(reply_id=story.pk).status == Turn.INTERRUPTED
        assert McpToken.objects.get(pk=token_id).revoked_at is not None
