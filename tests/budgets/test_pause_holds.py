"""A budget pause holds (issue 25 item 1): only an administrator's budget change or the
period's end lifts it. Every other way back to `active` — enable, PATCH status, verify,
the background re-check after a failed verify, the vault re-check, a new API key, a new
OAuth token — keeps a connection `paused` while its budget is used up, whoever asks."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from hal.actions.base import Actor
from providers.budget_models import ConnectionBudget
from providers.models import AIConnection
from providers.usage import record_usage
from tests.conftest import make_user
from tests.fakes.fixtures import *  # noqa: F403

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = ["operate_only", "admin"]


@pytest.fixture
def admin(operator):
    return Actor(user=operator, via="api", reauth_at=time.time())


@pytest.fixture
def plain(django_user_model):
    return make_user(django_user_model, "plain", perms=("operate",))


@pytest.fixture
def actor_of(admin, plain):
    """The actor of a role: operate-only (no re-auth) or an administrator just re-authed."""

    def pick(role: str) -> Actor:
        if role == "admin":
            return Actor(user=admin.user, via="api", reauth_at=time.time())
        return Actor(user=plain, via="api")

    return pick


@pytest.fixture
def paused(admin, fake_openai, provider_api_key):
    """An OpenAI-compatible connection on the fake, verified, then paused by its budget."""
    from providers.actions import check_set_connection_secret, check_verify_connection
    from providers.budgets import check_set_budget

    conn = AIConnection.objects.create(
        name="alpha",
        provider=AIConnection.OPENAI_COMPAT,
        auth_method=AIConnection.API_KEY,
        base_url=fake_openai.base_url,
        status=AIConnection.REAUTH_REQUIRED,
    )
    check_set_connection_secret(actor=admin, connection=conn.pk, api_key=provider_api_key)
    outcome = check_verify_connection(actor=admin, connection=conn.pk)
    assert outcome.ok and outcome.connection.status == "active", outcome.error
    check_set_budget(actor=admin, connection=conn.pk, data={"tokens_per_day": 30})
    record_usage(conn.pk, 20, 15, outcome.connection.model)  # 35 of 30: paused
    conn.refresh_from_db()
    assert conn.status == AIConnection.PAUSED
    return conn


def status_of(conn: AIConnection) -> str:
    return AIConnection.objects.get(pk=conn.pk).status


@pytest.mark.parametrize("role", ROLES)
def test_disable_then_enable_keeps_it_paused(paused, actor_of, role):
    from providers.actions import check_set_connection_enabled

    actor = actor_of(role)
    check_set_connection_enabled(actor=actor, connection=paused.pk, enabled=False)
    assert status_of(paused) == "disabled"
    conn = check_set_connection_enabled(actor=actor, connection=paused.pk, enabled=True)
    assert conn.status == status_of(paused) == "paused"
    budget = ConnectionBudget.objects.get(connection=paused)
    assert "used up" in budget.paused_reason and budget.paused_until is not None


@pytest.mark.parametrize("role", ROLES)
def test_patch_status_keeps_it_paused(paused, actor_of, role):
    from hal.errors import PermissionDenied
    from providers.actions import check_update_connection

    actor = actor_of(role)
    if role == "operate_only":  # PATCH needs `administer`: refused, and nothing changes
        with pytest.raises(PermissionDenied):
            check_update_connection(actor=actor, connection=paused.pk, data={"status": "active"})
        assert status_of(paused) == "paused"
        return
    check_update_connection(actor=actor, connection=paused.pk, data={"status": "disabled"})
    conn = check_update_connection(actor=actor, connection=paused.pk, data={"status": "active"})
    assert conn.status == status_of(paused) == "paused"


@pytest.mark.parametrize("role", ROLES)
def test_verify_keeps_it_paused(paused, actor_of, role):
    from providers.actions import check_verify_connection

    outcome = check_verify_connection(actor=actor_of(role), connection=paused.pk)
    assert outcome.ok
    assert status_of(paused) == "paused"


@pytest.mark.parametrize("role", ROLES)
def test_failed_verify_then_background_recheck_keeps_it_paused(paused, actor_of, role, fake_openai):
    from providers.actions import check_verify_connection
    from providers.recheck import Rechecker

    fake_openai.fail_next(500)
    outcome = check_verify_connection(actor=actor_of(role), connection=paused.pk)
    assert not outcome.ok and status_of(paused) == "error"
    done = Rechecker().run_once()
    assert done == [(paused.pk, False)]
    assert status_of(paused) == "paused"


@pytest.mark.parametrize("role", ROLES)
def test_vault_recheck_keeps_it_paused(paused, actor_of, role):
    from providers.vault_recheck import VAULT_UNAVAILABLE_ERROR, recheck_vault_blocked

    AIConnection.objects.filter(pk=paused.pk).update(
        status=AIConnection.REAUTH_REQUIRED, last_error=VAULT_UNAVAILABLE_ERROR
    )
    assert recheck_vault_blocked(actor_of(role)) == [paused.pk]
    assert status_of(paused) == "paused"


def test_a_new_api_key_keeps_it_paused(paused, admin, provider_api_key, fake_openai):
    """Setting a key needs an administrator (with re-auth) already; it is no budget change."""
    from providers.actions import check_set_connection_secret, check_verify_connection

    fake_openai.fail_next(401)
    check_verify_connection(actor=admin, connection=paused.pk)
    assert status_of(paused) == "reauth_required"
    check_set_connection_secret(actor=admin, connection=paused.pk, api_key=provider_api_key)
    assert status_of(paused) == "paused"


@pytest.mark.parametrize("role", ROLES)
def test_a_new_oauth_token_keeps_it_paused(paused, actor_of, role):
    from providers.actions import do_store_oauth_tokens

    AIConnection.objects.filter(pk=paused.pk).update(auth_method=AIConnection.OAUTH)
    tokens = SimpleNamespace(access_token="at-" + str(time.time_ns()), expires_at=None)
    conn = do_store_oauth_tokens(
        actor_of(role), paused, tokens, action_code="connections.oauth_connect"
    )
    assert conn.status == status_of(paused) == "paused"


def test_only_the_administrators_budget_change_lifts_it(paused, admin, actor_of):
    from hal.errors import PermissionDenied
    from providers.budgets import check_set_budget

    with pytest.raises(PermissionDenied):
        check_set_budget(
            actor=actor_of("operate_only"), connection=paused.pk, data={"tokens_per_day": 100}
        )
    assert status_of(paused) == "paused"
    check_set_budget(actor=admin, connection=paused.pk, data={"tokens_per_day": 100})
    assert status_of(paused) == "active"


def test_operate_only_over_http_disable_enable_then_send_is_refused(
    paused, plain, client, fake_openai
):
    """The issue's reproduction: the pause survives, and the send reaches no provider."""
    client.force_login(plain)
    base = f"/api/ai/connections/{paused.pk}"
    assert client.post(f"{base}/disable").json()["status"] == "disabled"
    enabled = client.post(f"{base}/enable")
    assert enabled.status_code == 200 and enabled.json()["status"] == "paused"
    rooms = client.get("/api/ai/rooms").json()["rooms"]
    room = next(r for r in rooms if r.get("connection_id") == paused.pk)
    before = len(fake_openai.completion_requests)
    sent = client.post(
        f"/api/ai/rooms/{room['id']}/messages",
        json.dumps({"text": "hello"}),
        content_type="application/json",
    )
    assert sent.status_code == 409 and sent.json()["error"]["code"] == "budget_exhausted"
    assert len(fake_openai.completion_requests) == before
