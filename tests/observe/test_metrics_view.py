"""GET /metrics (issue 47): the exposition format for allow-listed addresses or the
metrics token only, and every request counted by route name, method and status."""

from __future__ import annotations

import hashlib
import secrets

import pytest
from django.test import AsyncClient, Client
from prometheus_client.parser import text_string_to_metric_families

from hal.web.middleware import HttpMetricsMiddleware

from .conftest import sample

pytestmark = pytest.mark.django_db


def test_loopback_reads_the_exposition_format():
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    names = {f.name for f in text_string_to_metric_families(response.content.decode())}
    # The process's own families and the database's scrape-time gauges.
    assert {"hal_http_requests", "hal_chat_turns_ended", "hal_proposals"} <= names
    assert "hal_proposal_oldest_pending_age_seconds" in names


def test_an_address_not_allowed_is_refused(settings):
    response = Client(REMOTE_ADDR="203.0.113.9").get("/metrics")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "metrics_forbidden"
    assert b"hal_http_requests" not in response.content


def test_an_allowed_network_other_than_loopback(settings):
    settings.HAL_METRICS_ALLOW = ["10.20.0.0/16"]
    assert Client(REMOTE_ADDR="10.20.3.4").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 403


def test_the_bearer_token_whose_hash_is_configured(settings):
    token = secrets.token_urlsafe(24)
    settings.HAL_METRICS_TOKEN_SHA256 = hashlib.sha256(token.encode()).hexdigest()
    outside = Client(REMOTE_ADDR="203.0.113.9")
    assert outside.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    wrong = f"Bearer {token}x"
    assert outside.get("/metrics", HTTP_AUTHORIZATION=wrong).status_code == 403
    settings.HAL_METRICS_TOKEN_SHA256 = ""  # no hash configured: no token works
    assert outside.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 403


def test_only_get():
    assert Client().post("/metrics").status_code == 405


def test_requests_counted_by_route_name_never_by_path():
    before = sample("hal_http_requests_total", route="hal:api_health", method="GET", status="200")
    unmatched = sample("hal_http_requests_total", route="unmatched", method="GET", status="404")
    assert Client().get("/api/health").status_code == 200
    assert Client().get("/no/such/page/12345").status_code == 404
    after = sample("hal_http_requests_total", route="hal:api_health", method="GET", status="200")
    assert after == before + 1
    assert sample("hal_http_requests_total", route="unmatched", method="GET", status="404") == (
        unmatched + 1
    )
    assert sample("hal_http_request_duration_seconds_count", route="hal:api_health") >= 1
    text = Client().get("/metrics").content.decode()
    assert "12345" not in text and "/no/such" not in text


async def test_counted_on_the_async_chain_too():
    before = sample("hal_http_requests_total", route="hal:api_health", method="GET", status="200")
    response = await AsyncClient().get("/api/health")
    assert response.status_code == 200
    after = sample("hal_http_requests_total", route="hal:api_health", method="GET", status="200")
    assert after == before + 1


def test_the_middleware_stays_async_on_an_async_chain():
    async def view(request):  # pragma: no cover - never called
        return None

    assert HttpMetricsMiddleware(view).is_async
    assert not HttpMetricsMiddleware(lambda request: None).is_async


def test_the_refusal_in_korean(settings):
    from django.utils import translation

    with translation.override("ko"):
        response = Client(REMOTE_ADDR="203.0.113.9", HTTP_ACCEPT_LANGUAGE="ko").get("/metrics")
    assert response.status_code == 403
    assert "메트릭" in response.json()["error"]["message"]
