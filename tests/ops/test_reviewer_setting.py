"""The reviewer setting (`ai.proposal_reviewer`): a select of off / any / each connection,
and a value naming no connection refused by the settings action on every path."""

from __future__ import annotations

import pytest

from hal.actions import settings as s
from hal.errors import InvalidInput
from hal.models import Setting
from providers.models import AIConnection
from tests.ops.conftest import audit_rows

pytestmark = pytest.mark.django_db

NAME = "ai.proposal_reviewer"


def connection(name: str) -> AIConnection:
    return AIConnection.objects.create(
        name=name, provider="anthropic", auth_method="api_key", status="active"
    )


def missing_id() -> int:
    top = AIConnection.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    return top + 1000


def test_api_refuses_an_id_that_names_no_connection(reauthed):
    connection("alpha")
    r = reauthed.post(f"/api/settings/{NAME}", {"value": str(missing_id())}, "application/json")
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "unknown_reviewer"
    assert not Setting.objects.filter(name=NAME).exists()
    assert [row.error_code for row in audit_rows("settings.change", "refused")] == [
        "unknown_reviewer"
    ]


def test_confirmation_step_one_refuses_it_too(reauthed):
    """The three-step start (what the page, the AI tools and MCP go through) refuses it."""
    r = reauthed.post(
        "/api/confirmations",
        {"action": "settings.change", "params": {"name": NAME, "value": str(missing_id())}},
        "application/json",
    )
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"] == "unknown_reviewer"


def test_existing_connection_off_and_any_are_accepted():
    definition = s.get_definition(NAME)
    alpha = connection("alpha")
    assert s.coerce(definition, str(alpha.pk)) == str(alpha.pk)
    assert s.coerce(definition, "off") == "off" and s.coerce(definition, "any") == "any"
    with pytest.raises(InvalidInput) as exc:
        s.coerce(definition, "everyone")
    assert exc.value.code == "invalid_setting_value"


def test_setting_offers_off_any_and_each_connection_by_name(reauthed):
    alpha, beta = connection("alpha"), connection("beta")
    detail = reauthed.get(f"/api/settings/{NAME}").json()["setting"]
    assert [o["value"] for o in detail["options"]] == ["off", "any", str(alpha.pk), str(beta.pk)]
    assert [o["label"] for o in detail["options"]][2:] == ["@alpha", "@beta"]
    page = reauthed.get("/settings/").content.decode()
    row = page.split('id="setting-aiproposal_reviewer"')[1].split("</tr>")[0]
    assert '<select name="value"' in row and '<input name="value"' not in row
    assert f'<option value="{beta.pk}">@beta</option>' in row
    assert '<option value="any">any other active model</option>' in row
