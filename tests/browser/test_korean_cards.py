"""Proposal and result cards in Korean (issue 41 item 7, the Korean page test of issue 24
carried into the browser, where the cards are drawn): every field is labelled from the
tool's schema in Korean, coded values (statuses, yes/no, job kinds) as labels, times as
times, the impact details of a high-risk change — a setting's description included — in
Korean; what models and operators wrote stays as written (translate="no"). Also: a result
card shows its whole result (issue 41 item 10: the last value was cut mid-line)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import login, screenshot
from tests.browser.helpers import call, connect_model, csrf, reauth, wait_until
from tests.core.test_korean_pages import leftovers
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

# What these fixtures name (the connection, the operator, hosts' and incidents' words are
# marked as content already).
NAMES = {"gpt", "ops"}


def _english_left(html: str) -> list[str]:
    return sorted({word for word in leftovers(html) if word not in NAMES})


def _korean(page, base) -> None:
    page.request.post(
        base + "/language/",
        form={"language": "ko", "next": "/"},
        headers={"X-CSRFToken": csrf(page)},
    )


def _world(page, base, operator, fake, key) -> dict:
    from django.utils import timezone

    from hal.actions.base import Actor
    from hal.models import Server
    from hal.tools import run_tool_call

    conn = connect_model(page, base, operator, "gpt", fake, key)
    now = timezone.now()
    web = Server.objects.create(
        hostname="web-01.example.internal", status="active", last_heartbeat_at=now, approved_at=now
    )
    Server.objects.create(hostname="new-01.example.internal")
    rooms = call(page, base, "GET", "/api/ai/rooms")["rooms"]
    room = next(r for r in rooms if r["kind"] == "unified")["id"]
    # A model reply the proposals hang on, so the panel shows their cards (and results).
    fake.replies.push(Reply(text="Here is what I would do."))
    call(page, base, "POST", f"/api/ai/rooms/{room}/messages", {"text": "what now?"})
    from chatrooms.models import Message

    reply = wait_until(
        lambda: Message.objects.filter(author_kind="model", status="complete").first()
    )
    actor = Actor(user=operator, via="ai", label=operator.username, session_key="chat")
    origin = {"connection_id": conn["id"], "room_id": room, "message_id": reply.pk}

    def propose(tool, args):
        outcome = run_tool_call(tool, args, actor=actor, origin=origin)
        assert outcome.proposal is not None, outcome.error
        return outcome.proposal.pk

    opened = propose(
        "open_incident",
        {"severity": "sev3", "title": "Disk full web-01", "servers": [web.hostname]},
    )
    approved = propose("approve_server", {"server": "new-01.example.internal"})
    reauth(page, base, operator)
    for pk in (opened, approved):
        call(page, base, "POST", f"/api/ai/proposals/{pk}/approve")
    isolate = propose("isolate_server", {"server": web.hostname, "reason": "suspicious traffic"})
    setting = propose("change_setting", {"name": "ai.proposal_reviewer", "value": str(conn["id"])})
    return {"server": web.pk, "executed": [opened, approved], "pending": [isolate, setting]}


def _show_impacts(page, scope: str, pending: list[int]) -> None:
    for pk in pending:
        card = page.locator(f"{scope} [data-proposal-id='{pk}']").first
        card.locator(".proposal-impact-btn").click()
        expect(card.locator(".proposal-retype")).to_be_enabled()


def test_cards_impacts_and_results_are_korean(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory(viewport=(1440, 900))
    login(page, base, operator)
    ids = _world(page, base, operator, fake_anthropic, provider_api_key)
    _korean(page, base)
    reauth(page, base, operator)

    page.goto(base + "/proposals/")
    page.wait_for_selector("body[data-proposals-ready=true]", state="attached")
    _show_impacts(page, "#main", ids["pending"])
    main = page.locator("#main")
    # The labels come from the tools' schemas, translated; the raw name is on hover.
    severity = main.locator("dt[title=severity]").first
    expect(severity).to_have_text("심각도")
    expect(main.locator("dt[title=last_heartbeat_at]").first).to_have_text("마지막 하트비트")
    expect(main.locator("dd[title=active]").first).to_have_text("활성")
    expect(main.locator(".proposal-impact-detail dt[title=controls]").first).to_have_text(
        "제어 대상"
    )
    expect(main).to_contain_text("쓰기 및 고위험 AI 제안에 대한 두 번째 의견(조언만 함).")
    expect(main).to_contain_text("끔에서 @gpt(으)로 변경합니다")
    expect(main).to_contain_text("서버를 격리합니다(활성)")
    assert _english_left(main.inner_html()) == []
    screenshot(page, "approvals-cards-ko")

    # The same cards in the panel, with the executed ones' results in full.
    page.goto(base + "/")
    page.wait_for_selector("#ai-panel[data-ready=true]", state="attached")
    panel = page.locator("#ai-panel")
    for pk in ids["executed"]:
        result = panel.locator(f"[data-proposal-id='{pk}'] .proposal-result")
        expect(result).to_be_visible()
        # Nothing of the result is cut off: its box is as tall as what it holds.
        assert result.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
        last = result.locator("dd").last.bounding_box()
        card = panel.locator(f"[data-proposal-id='{pk}']").bounding_box()
        assert last["y"] + last["height"] <= card["y"] + card["height"]
    _show_impacts(page, "#ai-panel", ids["pending"])
    assert _english_left(panel.locator("#ai-log").inner_html()) == []
    screenshot(page, "panel-cards-ko")

    # The fleet page's three-step dialog shows the impact details the same way.
    page.goto(f"{base}/servers/{ids['server']}/")
    page.locator("button[data-hr-action='servers.isolate']").click()
    dialog = page.locator("dialog.hr-dialog")
    dialog.locator("input").fill("checking")
    dialog.locator("button[type=submit]").click()
    expect(dialog.locator("input.hr-retype")).to_be_visible()
    expect(dialog.locator("dt[title=effect]")).to_have_text("효과")
    assert _english_left(dialog.inner_html()) == []
    screenshot(page, "fleet-dialog-ko")
