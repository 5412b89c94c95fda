"""Budgets over HTTP: the connection JSON's `usage`, PUT budget/prices (re-auth), /ops/ai."""

from __future__ import annotations

import pytest

from providers.models import AIConnection
from providers.usage import record_usage


@pytest.fixture
def conn(db):
    return AIConnection.objects.create(
        name="alpha", provider="anthropic", auth_method="api_key", model="m1", status="active"
    )


def put(client, path, body):
    return client.put(path, body, content_type="application/json")


def test_budget_api_needs_reauth_and_pauses_and_resumes(client_op, operator, conn):
    record_usage(conn, 300, 0, "m1")
    path = f"/api/ai/connections/{conn.pk}/budget"
    refused = put(client_op, path, {"tokens_per_day": 100})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "reauth_required"
    assert (
        client_op.post(
            "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
        ).status_code
        == 200
    )
    bad = put(client_op, path, {"tokens_per_day": "lots"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_budget"
    body = put(client_op, path, {"tokens_per_day": 100}).json()
    assert body["status"] == "paused" and body["next_action"] == "raise_budget"
    assert body["usage"]["budget"]["tokens_per_day"] == 100
    assert body["usage"]["today"]["tokens"] == 300
    body = put(client_op, path, {"tokens_per_day": 1000, "tokens_per_month": None}).json()
    assert body["status"] == "active" and body["usage"]["paused_reason"] == ""
    price = put(
        client_op,
        f"/api/ai/connections/{conn.pk}/prices",
        {"model": "m1", "input_per_million": 2, "output_per_million": 8},
    )
    assert price.status_code == 200
    assert price.json()["usage"]["prices"][0]["input_per_million"] == 2.0


def test_listing_has_usage_without_n_plus_one(client_op, conn, django_assert_max_num_queries):
    for n in range(6):
        c = AIConnection.objects.create(name=f"c{n}", provider="anthropic", auth_method="api_key")
        record_usage(c, 10, 10, "m1")
    record_usage(conn, 1, 2, "m1")
    client_op.get("/api/ai/connections")  # warm the session/permission caches
    with django_assert_max_num_queries(12) as captured:
        response = client_op.get("/api/ai/connections")
    few = len(captured.captured_queries)
    AIConnection.objects.create(name="more", provider="anthropic", auth_method="api_key")
    with django_assert_max_num_queries(few):
        client_op.get("/api/ai/connections")
    alpha = next(c for c in response.json()["connections"] if c["name"] == "alpha")
    assert alpha["usage"]["today"] == {
        "input_tokens": 1,
        "output_tokens": 2,
        "tokens": 3,
        "cost": None,
    }
    assert alpha["usage"]["period"] == "UTC"


def test_ops_ai_shows_the_paused_connection_and_its_one_action(reauthed, conn):
    record_usage(conn, 500, 0, "m1")
    response = reauthed.post(
        "/ops/ai", {"op": "budget", "id": conn.pk, "tokens_per_day": "400", "cost_per_day": ""}
    )
    assert response.status_code == 302
    page = reauthed.get("/ops/ai").content.decode()
    assert 'data-field="paused"' in page
    assert "daily budget: 500 of 400 tokens used up" in page
    assert "Raise the budget" in page
    assert 'data-action="raise_budget"' in page
    assert '<svg class="usage-chart"' in page and "<rect" in page


def test_korean_page_and_notice(client_op, conn):
    from django.utils.translation import gettext_noop

    from hal import i18n
    from providers.budgets import period_word

    assert client_op.post("/language/", {"language": "ko", "next": "/"}).status_code == 302
    page = client_op.get("/ops/ai").content.decode()
    assert "사용량과 예산" in page and "오늘 (UTC)" in page
    text = i18n.text(
        gettext_noop("@{name} has used 80% of its {period} budget ({used})."),
        name="alpha",
        period=period_word("day"),
        used="44 of 50 tokens",
    )
    assert (
        i18n.render(text, "ko") == "@alpha이(가) 일일 예산의 80%를 사용했습니다(44 of 50 tokens)."
    )


def test_ops_ai_price_form_sets_and_removes_a_price(reauthed, conn):
    from providers.budget_models import ModelPrice

    form = {"op": "price", "id": conn.pk, "model": "m1"}
    response = reauthed.post(
        "/ops/ai", {**form, "input_per_million": "3", "output_per_million": "15"}
    )
    assert response.status_code == 302
    record_usage(conn, 1_000_000, 0, "m1")
    page = reauthed.get("/ops/ai").content.decode()
    assert "m1: 3.0 / 15.0" in page and "cost 3.0000" in page
    bad = reauthed.post("/ops/ai", {**form, "input_per_million": "-1", "output_per_million": "1"})
    assert bad.status_code == 400 and b"invalid_price" in bad.content
    reauthed.post("/ops/ai", {**form, "input_per_million": "", "output_per_million": ""})
    assert not ModelPrice.objects.exists()
