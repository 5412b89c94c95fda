"""Issue 13 item 2: the worker's background re-check brings an `error` connection back."""

from __future__ import annotations

import pytest

from providers.models import AIConnection
from providers.recheck import Rechecker

from .conftest import API, call

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_once(reauthed, make_connection, fake_anthropic, provider_api_key):
    """A keyed connection whose verify met a short provider outage (status error)."""
    c = make_connection(base_url=fake_anthropic.base_url)
    call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": provider_api_key})
    fake_anthropic.fail_next(500)
    assert call(reauthed, "POST", f"{API}/{c['id']}/verify").status_code == 502
    assert AIConnection.objects.get(pk=c["id"]).status == "error"
    return c


def test_recheck_returns_an_error_connection_to_active(failed_once, fake_anthropic):
    done = Rechecker().run_once(now=0.0)
    assert done == [(failed_once["id"], True)]
    conn = AIConnection.objects.get(pk=failed_once["id"])
    assert conn.status == "active" and conn.model == fake_anthropic.models[0]
    assert conn.last_error == "" and conn.last_error_at is None


def test_recheck_backs_off_while_the_provider_is_down(failed_once, fake_anthropic, settings):
    settings.HAL_CONNECTION_RECHECK_SECONDS = 10
    checker = Rechecker()
    fake_anthropic.fail_next(500, times=2)
    calls = lambda: len(fake_anthropic.requests_to("/v1/models"))  # noqa: E731
    before = calls()
    assert checker.run_once(now=100.0) == [(failed_once["id"], False)]
    assert checker.run_once(now=105.0) == []  # waits 10 s after the first failure
    assert checker.run_once(now=110.0) == [(failed_once["id"], False)]
    assert checker.run_once(now=125.0) == []  # then 20 s
    assert calls() == before + 2
    assert checker.run_once(now=130.0) == [(failed_once["id"], True)]
    assert AIConnection.objects.get(pk=failed_once["id"]).status == "active"


def test_recheck_leaves_other_states_alone(reauthed, make_connection, fake_anthropic):
    c = make_connection(base_url=fake_anthropic.base_url)  # reauth_required: no key
    AIConnection.objects.create(
        name="off", provider="anthropic", auth_method="api_key", status="disabled"
    )
    assert Rechecker().run_once(now=0.0) == []
    assert AIConnection.objects.get(pk=c["id"]).status == "reauth_required"


def test_a_chat_failures_last_error_shows_in_the_operators_language_while_it_stands(
    reauthed, make_connection, fake_anthropic
):
    """Issue 41: /ops/ai shows a chat failure's reason translated — and never a stale one
    once anything else (a verify, a new key) has written another last_error."""
    from django.utils import translation

    from hal import i18n
    from providers.recheck import do_record_chat_failure

    c = make_connection(base_url=fake_anthropic.base_url)
    reason = i18n.text(
        "The provider rejected this connection's API key (invalid, expired or revoked): set "
        "a new key on /ops/ai."
    )
    conn = do_record_chat_failure(c["id"], "auth", "HTTP 401: invalid x-api-key", reason)
    assert conn.last_error == "Chat failed (auth): HTTP 401: invalid x-api-key"
    with translation.override("ko"):
        korean = conn.last_error_text()
    assert korean.startswith("채팅 실패(auth): ") and "API 키" in korean
    with translation.override("en"):
        assert "rejected this connection's API key" in conn.last_error_text()
    page = reauthed.get("/ops/ai").content.decode()
    assert "rejected this connection&#x27;s API key" in page

    # Another writer changes last_error (here a verify without a key): the stored sentence
    # no longer describes it and is not shown.
    assert reauthed.post(f"/api/ai/connections/{c['id']}/verify").status_code == 502
    conn.refresh_from_db()
    assert "rejected" not in conn.last_error
    with translation.override("ko"):
        assert conn.last_error_text() == translation.gettext(conn.last_error)
