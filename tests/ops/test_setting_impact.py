"""What changing a setting says it will do (issue 41): the values an operator picked by
name are named (a connection's "@gpt", not its id "1"; "off"; yes/no for a switch), in the
reader's language, with what the setting controls as the Settings page says it; a model and
the audit log keep English and the raw values."""

from __future__ import annotations

import json

import pytest

from hal.actions.base import Actor
from hal.models import Confirmation, Proposal
from hal.tools.dispatch import run_tool_call
from providers.models import AIConnection

pytestmark = pytest.mark.django_db

REVIEWER = "ai.proposal_reviewer"


@pytest.fixture
def gpt() -> AIConnection:
    return AIConnection.objects.create(
        name="gpt", provider="openai_compat", auth_method="api_key", status="active"
    )


@pytest.fixture
def client_ko(reauthed):
    assert reauthed.post("/language/", {"language": "ko", "next": "/"}).status_code == 302
    return reauthed


def _start(client, name, value):
    response = client.post(
        "/api/confirmations",
        {"action": "settings.change", "params": {"name": name, "value": value}},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return response.json()["confirmation"]["impact"]


def test_a_connection_setting_names_the_connection(reauthed, gpt):
    impact = _start(reauthed, REVIEWER, str(gpt.pk))
    assert impact["summary"] == "Change ai.proposal_reviewer from off to @gpt."
    assert impact["details"]["before"] == "off" and impact["details"]["after"] == "@gpt"


def test_the_model_reads_english_and_the_row_keeps_the_raw_values(operator, gpt):
    actor = Actor(user=operator, via="ai", label="ops", session_key="chat")
    outcome = run_tool_call("change_setting", {"name": REVIEWER, "value": str(gpt.pk)}, actor=actor)
    payload = outcome.as_payload()
    assert "_i18n" not in json.dumps(payload)
    details = payload["proposal"]["impact"]["details"]
    assert (details["before"], details["after"], details["type"]) == ("off", "@gpt", "text")
    assert details["controls"].startswith("The second opinion")
    assert payload["proposal"]["arguments"] == {"name": REVIEWER, "value": str(gpt.pk)}
    stored = Proposal.objects.get().impact
    assert stored["summary"] == "Change ai.proposal_reviewer from off to @gpt."
    assert (stored["details"]["before"], stored["details"]["after"]) == ("off", str(gpt.pk))


def test_the_korean_impact_has_no_english_left(client_ko, gpt):
    impact = _start(client_ko, REVIEWER, str(gpt.pk))
    assert impact["summary"] == "ai.proposal_reviewer을(를) 끔에서 @gpt(으)로 변경합니다."
    details = impact["details"]
    assert details["before"] == "끔" and details["after"] == "@gpt"
    assert details["type"] == "텍스트"
    assert details["controls"] == "쓰기 및 고위험 AI 제안에 대한 두 번째 의견(조언만 함)."
    assert not any(key.endswith("_i18n") for key in details)
    # What was stored for the model and the audit log is English, with the raw values.
    stored = Confirmation.objects.get().impact
    assert stored["details"]["after"] == str(gpt.pk)
    assert stored["summary"] == "Change ai.proposal_reviewer from off to @gpt."


def test_a_switch_says_yes_and_no(client_ko):
    impact = _start(client_ko, "webfetch.auto_fetch_default", "false")
    assert impact["summary"] == "webfetch.auto_fetch_default을(를) 예에서 아니요(으)로 변경합니다."
    assert (impact["details"]["before"], impact["details"]["after"]) == ("예", "아니요")


def test_a_number_stays_a_number(reauthed):
    impact = _start(reauthed, "proposals.expiry_minutes", 30)
    assert impact["summary"] == "Change proposals.expiry_minutes from 60 to 30."
    assert (impact["details"]["before"], impact["details"]["after"]) == (60, 30)


def test_the_settings_page_shows_the_korean_controls(client_ko, gpt):
    response = client_ko.post("/settings/", {"op": "start", "name": REVIEWER, "value": gpt.pk})
    html = response.content.decode()
    assert "쓰기 및 고위험 AI 제안에 대한 두 번째 의견(조언만 함)." in html
    assert "The second opinion" not in html
    assert "@gpt" in html and "from &#x27;off&#x27;" not in html


def test_every_setting_says_what_it_controls_in_korean():
    from hal.actions.settings import REGISTRY, change_impact
    from hal.i18n import localize

    actor = Actor(user=None, via="system", label="test", system=True)
    for name, definition in REGISTRY.items():
        details = change_impact(actor, {"name": name, "value": definition.default}).details
        assert details["controls"] == definition.controls  # English, as the model reads it
        shown = localize({"details": details}, "ko")["details"]["controls"]
        assert shown != definition.controls, name
