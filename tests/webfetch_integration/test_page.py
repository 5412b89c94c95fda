"""/ops/web: metrics, budgets, allowlist, curated sources; the Tavily key form (re-auth)."""

from __future__ import annotations

import secrets

import pytest

from hal.models import AuditEntry
from tests.webfetch_integration.conftest import make_connection

pytestmark = pytest.mark.django_db


def test_page_shows_metrics_budgets_allowlist_and_curated(client_op, settings):
    from webfetch.budgets import record_usage
    from webfetch.models import CuratedSource, FetchAllowDomain

    settings.HAL_BUDGET_TOKENS_PER_DAY = 10
    conn = make_connection("gpt")
    record_usage(conn.pk, 8, 8)
    FetchAllowDomain.objects.create(domain="docs.python.org", note="stdlib")
    CuratedSource.objects.create(domain="postgresql.org", title="Postgres docs", tags="db")
    response = client_op.get("/ops/web")
    assert response.status_code == 200
    html = response.content.decode()
    for text in (
        "web-metrics",
        "Domain entropy",
        "Cache hit rate",
        "docs.python.org",
        "Postgres docs",
        "@gpt",
        'data-flag="tokens_exceeded"',
    ):
        assert text in html, text
    from django.urls import reverse

    assert reverse("webfetch:web") == "/ops/web"


def test_tavily_key_needs_reauth_and_shows_only_the_hint(client_op, operator):
    from vault.api import find_secret

    key = secrets.token_urlsafe(32)
    refused = client_op.post("/ops/web", {"op": "tavily_key", "api_key": key})
    assert refused.status_code == 403
    assert b"reauth_required" in refused.content
    assert (
        find_secret(purpose="search.tavily_key", owner_type="webfetch", owner_id="tavily") is None
    )

    client_op.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    saved = client_op.post("/ops/web", {"op": "tavily_key", "api_key": key})
    assert saved.status_code == 302
    secret = find_secret(purpose="search.tavily_key", owner_type="webfetch", owner_id="tavily")
    assert secret is not None
    page = client_op.get("/ops/web").content.decode()
    assert secret.hint in page and key not in page
    entry = AuditEntry.objects.get(action="webfetch.tavily_key", result="ok")
    assert key not in str(entry.after) and entry.after == {"hint": secret.hint}


def test_viewer_cannot_set_the_key_or_limits(client, viewer):
    client.force_login(viewer)
    assert client.get("/ops/web").status_code == 200
    response = client.post("/ops/web", {"op": "tavily_key", "api_key": secrets.token_urlsafe(8)})
    assert response.status_code == 403
    conn = make_connection()
    api = client.post(
        f"/api/ai/budgets/{conn.pk}", {"tokens_per_day": 5}, content_type="application/json"
    )
    assert api.status_code == 403


def test_budgets_api(client, client_op, operator):
    conn = make_connection()
    anonymous = client.__class__().get("/api/ai/budgets")
    assert anonymous.status_code == 401
    response = client_op.post(
        f"/api/ai/budgets/{conn.pk}",
        {"tokens_per_day": 1000, "fetch_bytes_per_day": 0},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = client_op.get("/api/ai/budgets").json()
    (row,) = body["budgets"]
    assert (row["tokens_limit"], row["fetch_bytes_limit"], row["degraded"]) == (1000, 0, False)
    bad = client_op.post(
        f"/api/ai/budgets/{conn.pk}", {"tokens_per_day": -5}, content_type="application/json"
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_limit"
