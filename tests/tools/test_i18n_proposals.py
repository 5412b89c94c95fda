"""Impact summaries: stored as msgid + params, Korean on a ko operator's card, English for
the model that proposed the call and for the audit log."""

from __future__ import annotations

import json

import pytest
from django.utils import translation

from hal.models import AuditEntry, Proposal
from hal.tools.dispatch import run_tool_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_ko(client_op):
    assert client_op.post("/language/", {"language": "ko", "next": "/"}).status_code == 302
    return client_op


def _propose(ai_actor):
    # The model's turn runs with whatever language the process has active: Korean here.
    with translation.override("ko"):
        return run_tool_call(
            "isolate_server", {"server": "web-01", "reason": "compromised"}, actor=ai_actor
        )


def test_the_model_reads_an_english_impact_without_translation_fields(world, ai_actor):
    payload = _propose(ai_actor).as_payload()
    impact = payload["proposal"]["impact"]
    assert impact["summary"] == "Isolate server web-01 (active)."
    assert "summary_i18n" not in json.dumps(payload)
    json.dumps(payload)  # nothing lazy reaches the model


def test_a_tool_error_returned_to_the_model_is_english(world, ai_actor):
    with translation.override("ko"):
        outcome = run_tool_call(
            "isolate_server", {"server": "ghost-1", "reason": "x"}, actor=ai_actor
        )
    assert outcome.error == {"code": "server_not_found", "message": "No server 'ghost-1'."}
    row = AuditEntry.objects.filter(result="refused").latest("id")
    assert row.message == "No server 'ghost-1'."


def test_the_stored_impact_keeps_english_and_the_msgid(world, ai_actor):
    _propose(ai_actor)
    impact = Proposal.objects.get().impact
    assert impact["summary"] == "Isolate server web-01 (active)."
    assert impact["summary_i18n"] == {
        "msgid": "Isolate server {hostname} ({status}).",
        # The status is a text of its own, so a Korean sentence reads "(활성)" (issue 41).
        "params": {"hostname": "web-01", "status": {"msgid": "active", "params": {}}},
    }


def test_the_proposal_card_api_shows_the_korean_impact(world, ai_actor, client_ko):
    _propose(ai_actor)
    proposal = Proposal.objects.get()
    body = client_ko.get(f"/api/ai/proposals/{proposal.pk}").json()["proposal"]
    assert body["impact"]["summary"] == "web-01 서버를 격리합니다(활성)."
    assert "summary_i18n" not in body["impact"]
    listed = client_ko.get("/api/ai/proposals?status=pending").json()
    assert "web-01 서버를 격리합니다(활성)." in json.dumps(listed, ensure_ascii=False)


def test_an_english_operator_sees_the_english_impact(world, ai_actor, client_op):
    _propose(ai_actor)
    proposal = Proposal.objects.get()
    body = client_op.get(f"/api/ai/proposals/{proposal.pk}").json()["proposal"]
    assert body["impact"]["summary"] == "Isolate server web-01 (active)."


def test_the_proposals_page_renders_the_korean_impact(world, ai_actor, client_ko):
    import re

    _propose(ai_actor)
    html = client_ko.get("/proposals/").content.decode()
    # The cards are drawn from the page's JSON (proposal_card.js), localized like the API.
    data = re.search(r'<script id="proposals-pending-data"[^>]*>(.*?)</script>', html, re.S)
    cards = json.loads(data.group(1))
    assert cards[0]["impact"]["summary"] == "web-01 서버를 격리합니다(활성)."
    assert "summary_i18n" not in cards[0]["impact"]
    assert "Isolate server web-01" not in html


def test_a_write_proposal_summary_is_translated(world, ai_actor, client_ko):
    run_tool_call("approve_server", {"server": "new-01"}, actor=ai_actor)
    proposal = Proposal.objects.get()
    assert proposal.impact["summary"] == "Approve pending server new-01."
    body = client_ko.get(f"/api/ai/proposals/{proposal.pk}").json()["proposal"]
    assert body["impact"]["summary"] == "승인 대기 중인 new-01 서버를 승인합니다."


def test_the_confirmation_impact_follows_the_operator_language(world, client_ko, operator):
    client_ko.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    response = client_ko.post(
        "/api/confirmations",
        {"action": "servers.isolate", "params": {"server": "web-01", "reason": "r"}},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert "web-01 서버를 격리합니다(활성)." in json.dumps(body, ensure_ascii=False)
    assert "summary_i18n" not in json.dumps(body)
    from hal.models import Confirmation

    assert Confirmation.objects.get().impact["summary"] == "Isolate server web-01 (active)."


def test_every_tool_summary_msgid_is_translated(world):
    # Every write tool's summary (with valid arguments) renders differently in Korean.
    from hal.i18n import is_text, render
    from hal.tools.registry import WRITE, all_tools
    from tests.tools.conftest import valid_args

    checked = 0
    for tool in all_tools():
        if tool.tier != WRITE or tool.summarize is None:
            continue
        args = (
            {"url": "https://example.test/page"}
            if tool.name == "fetch_url"
            else valid_args(tool.name, world)
        )
        summary = tool.summarize(tool.validate(args))
        assert is_text(summary), tool.name
        assert render(summary, "ko") != render(summary, "en"), tool.name
        checked += 1
    assert checked >= 10
