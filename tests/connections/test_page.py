"""The /ops/ai screen: rendering, no-JS forms, menu entry, static module and CSP."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.urls import reverse

from providers.models import AIConnection

pytestmark = pytest.mark.django_db


def test_page_lists_connections_with_status_and_hint(reauthed, canary, fake_anthropic):
    reauthed.post(
        "/ops/ai",
        {
            "op": "create",
            "name": "claude",
            "provider": "anthropic",
            "auth_method": "api_key",
            "base_url": fake_anthropic.base_url,  # adding with a key verifies at once
            "api_key": canary,
        },
    )
    conn = AIConnection.objects.get()
    conn.last_error = "scripted failure"
    AIConnection.objects.filter(pk=conn.pk).update(status="error", last_error="scripted failure")
    page = reauthed.get(reverse("providers:ops_ai"))
    html = page.content.decode()
    assert page.status_code == 200
    assert "@claude" in html and "scripted failure" in html and 'class="badge error"' in html
    assert f"{canary[:3]}…{canary[-4:]}" in html and canary not in html
    assert "hal/ops_ai.js" in html and "<script>" not in html
    assert 'href="/ops/ai"' in html  # the menu entry
    assert reverse("providers:oauth_callback") in html  # the redirect URI to register


def test_form_errors_are_shown_and_reauth_linked(client_op, canary):
    response = client_op.post(
        "/ops/ai",
        {"op": "create", "name": "bad name", "provider": "anthropic", "auth_method": "api_key"},
    )
    assert response.status_code == 400 and "invalid_name" in response.content.decode()
    response = client_op.post(
        "/ops/ai",
        {
            "op": "create",
            "name": "ok",
            "provider": "anthropic",
            "auth_method": "api_key",
            "api_key": canary,
        },
    )
    html = response.content.decode()
    assert response.status_code == 403 and "reauth_required" in html and "/reauth/" in html
    assert canary not in html and not AIConnection.objects.exists()


def test_form_update_disable_enable_delete(reauthed):
    reauthed.post(
        "/ops/ai", {"op": "create", "name": "c", "provider": "local_cli", "auth_method": "login"}
    )
    pk = AIConnection.objects.get().pk
    assert (
        reauthed.post("/ops/ai", {"op": "update", "id": pk, "name": "c2", "role": "r"}).status_code
        == 302
    )
    assert AIConnection.objects.get().name == "c2"
    reauthed.post("/ops/ai", {"op": "disable", "id": pk})
    assert AIConnection.objects.get().status == "disabled"
    reauthed.post("/ops/ai", {"op": "enable", "id": pk})
    assert AIConnection.objects.get().status == "error"  # enabled; Verify picks a model
    response = reauthed.post("/ops/ai", {"op": "model", "id": pk, "model": "opus"})
    assert response.status_code == 400 and "model_unavailable" in response.content.decode()
    reauthed.post("/ops/ai", {"op": "delete", "id": pk})
    assert not AIConnection.objects.exists()


def test_anonymous_is_sent_to_login(client):
    response = client.get("/ops/ai")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_module_exists_and_uses_the_shared_api_helper():
    path = settings.BASE_DIR / "static" / "hal" / "ops_ai.js"
    source = path.read_text()
    assert re.search(r'import \{[^}]*\bapi\b[^}]*\} from "\./app\.js"', source), source[:300]
    assert "/api/auth/reauth" in source and "reauth_required" in source


def form_action(response) -> list[str]:
    policy = response["Content-Security-Policy"]
    directive = next(d for d in policy.split(";") if d.strip().startswith("form-action"))
    return directive.split()[1:]


def test_no_js_oauth_form_may_be_redirected_to_configured_authorize_origins_only(reauthed):
    # Browsers check form-action on each redirect hop of a form POST; the no-JS OAuth form
    # is answered with a redirect to the authorization server.
    assert form_action(reauthed.get("/ops/ai")) == ["'self'"]
    AIConnection.objects.create(name="k", provider="anthropic", auth_method="api_key")
    for name, url in (
        ("a", "https://auth.example.test/oauth/authorize?x=1"),
        ("b", "https://auth.example.test:8443/authorize"),
        ("c", "http://127.0.0.1:9999/authorize"),
        ("d", ""),
    ):
        AIConnection.objects.create(
            name=name, provider="anthropic", auth_method="oauth", oauth_authorize_url=url
        )
    assert form_action(reauthed.get("/ops/ai")) == [
        "'self'",
        "http://127.0.0.1:9999",
        "https://auth.example.test",
        "https://auth.example.test:8443",
    ]
    # Other pages keep the strict policy.
    assert form_action(reauthed.get("/audit/")) == ["'self'"]
