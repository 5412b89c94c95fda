"""Issue 41, done-when: a card of the REAL Claude Code CLI that waited through a restart
continues the model once it is approved.

Web process A (daphne, over the test database) runs the CLI turn: the CLI calls HAL's
`open_incident` over A's own `/mcp` with its turn token, the call becomes a proposal, the
run ends and the turn waits. A is restarted (SIGTERM, as a deploy does) and process B
starts; past A's lease timeout the operator approves the card through B. The incident is
opened once and B runs the CLI again — a new run, the outcome in its transcript — which
answers in a new reply. (The API models' restarts: test_restart_decisions.py.)
"""

from __future__ import annotations

import os
import signal

import pytest

from chatrooms.models import Message, Turn
from hal.models import Incident, McpToken, Proposal
from tests.fakes.script import Reply, ScriptedToolCall
from tests.providers.conftest import outbound  # noqa: F401  (the CLI's refusing proxy)
from tests.providers.test_claude_code_real import BINARY, assert_sandboxed, make_home
from tests.webprocs import Session, wait_for

from .test_restart_decisions import lease_expired, settled

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        not os.access(BINARY, os.X_OK),
        reason="the real Claude Code CLI is not installed (`make claude-code` needs npm)",
    ),
]

LEASE_SECONDS = 3.0  # the web processes' lease timeout (the `web` fixture)
OPEN_INCIDENT = {"severity": "sev3", "title": "Disk filling on db-07"}


def add_cli(operator) -> int:
    from providers.actions import check_create_connection
    from providers.models import AIConnection
    from tests.chatrooms.conftest import admin_actor

    conn = check_create_connection(
        actor=admin_actor(operator),
        data={"name": "cody", "provider": "local_cli", "auth_method": "login"},
    )
    AIConnection.objects.filter(pk=conn.pk).update(
        model="sonnet", models=["sonnet"], status=AIConnection.ACTIVE
    )
    return int(conn.pk)


def test_a_cli_card_approved_after_a_restart_continues_the_cli_model(
    web,
    operator,
    fake_anthropic,
    provider_api_key,
    outbound,  # noqa: F811  (the fixture imported above)
    tmp_path,
):
    home = make_home(tmp_path, fake_anthropic, outbound, key=provider_api_key)
    cli = {"HAL_LOCAL_CLI_BINARY": BINARY, "HAL_LOCAL_CLI_HOME": str(home)}
    add_cli(operator)
    fake_anthropic.replies.push(
        Reply(
            text="Proposing.",
            tool_calls=[ScriptedToolCall("mcp__hal__open_incident", OPEN_INCIDENT, id="toolu_inc")],
        ),
        Reply(text="Proposed; waiting for approval."),
    )
    first = web("a", extra=cli)
    ops = Session(first.url, operator)
    room = ops.call("GET", "/api/ai/rooms")[1]["rooms"][0]["id"]
    status, body = ops.call(
        "POST", f"/api/ai/rooms/{room}/messages", {"text": "@cody open an incident for db-07"}
    )
    assert status == 202, body
    turn = wait_for(
        lambda: (
            Turn.objects.filter(status=Turn.WAITING_APPROVAL).first()
            or settled(Turn.objects.get().pk)
        ),
        "the CLI turn to wait for approval",
    )
    assert turn.status == Turn.WAITING_APPROVAL, (turn.status, turn.error_code, first.log_text())
    proposal = Proposal.objects.get()
    assert (proposal.tool, proposal.turn_id, proposal.tool_call_id) == (
        "open_incident",
        str(turn.pk),
        "toolu_inc",
    )
    requests_before = len(fake_anthropic.message_requests)

    first.signal(signal.SIGTERM)  # a deploy's restart, the card still waiting
    second = web("b", extra=cli)
    wait_for(lambda: lease_expired(turn.owner), "process A's lease to expire")
    fake_anthropic.replies.push(Reply(text="The incident is open."))
    ops = Session(second.url, operator)
    assert ops.call("POST", "/api/auth/reauth", {"password": operator.raw_password})[0] == 200
    status, body = ops.call("POST", f"/api/ai/proposals/{proposal.pk}/approve")
    assert status == 200 and body["proposal"]["status"] == "executed", body

    ended = wait_for(lambda: settled(turn.pk), "the CLI's continuation to end")
    assert ended.status == Turn.COMPLETE, (ended.status, ended.error_code, second.log_text())
    assert Incident.objects.count() == 1
    resumed = [
        r.raw_body.decode()
        for r in fake_anthropic.message_requests[requests_before:]
        if "toolu_inc" in r.raw_body.decode()
    ]
    assert len(resumed) == 1 and "executed" in resumed[0]  # one new CLI run, with the outcome
    last = Message.objects.filter(author_kind=Message.MODEL).latest("id")
    assert (last.text, last.status, last.author) == ("The incident is open.", "complete", "cody")
    assert not McpToken.objects.filter(kind=McpToken.TURN, revoked_at__isnull=True).exists()
    assert_sandboxed(fake_anthropic, outbound, tmp_path)
