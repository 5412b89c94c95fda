"""The MCP OAuth cleanup (hal/actions/mcp_oauth_cleanup.py): spent codes, dead tokens and
registration spam go; live codes and tokens, every grant and every client with a grant stay.
One audit row per run that deleted something, with counts; the worker runs it."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from hal.actions.base import Actor
from hal.actions.mcp_oauth_cleanup import check_cleanup_mcp_oauth, sweep_mcp_oauth
from hal.models import AuditEntry, McpOAuthClient, McpOAuthCode, McpOAuthGrant, McpOAuthToken
from hal.models.fleet import hash_token

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def _actor() -> Actor:
    return Actor.for_system("task", label="worker")


def _client(age: timedelta = timedelta(0)) -> McpOAuthClient:
    client = McpOAuthClient.objects.create(
        client_id="hal-client-" + secrets.token_urlsafe(8),
        client_name="Test client",
        redirect_uris=["http://127.0.0.1:33418/callback"],
    )
    McpOAuthClient.objects.filter(pk=client.pk).update(created_at=timezone.now() - age)
    return client


def _grant(client: McpOAuthClient | None = None, revoked_ago: timedelta | None = None):
    user = get_user_model().objects.create_user("u" + secrets.token_hex(4))
    grant = McpOAuthGrant.objects.create(
        user=user, client=client or _client(), resource="http://127.0.0.1/mcp"
    )
    if revoked_ago is not None:
        McpOAuthGrant.objects.filter(pk=grant.pk).update(
            revoked_at=timezone.now() - revoked_ago, revoked_reason="revoked"
        )
    return grant


def _code(grant, *, expires_in: timedelta, used_ago: timedelta | None = None) -> McpOAuthCode:
    now = timezone.now()
    return McpOAuthCode.objects.create(
        grant=grant,
        code_hash=hash_token(secrets.token_urlsafe(16)),
        redirect_uri="http://127.0.0.1:33418/callback",
        code_challenge="c" * 43,
        expires_at=now + expires_in,
        used_at=None if used_ago is None else now - used_ago,
    )


def _token(
    grant,
    *,
    access_in: timedelta,
    refresh_in: timedelta | None = None,
    rotated_ago: timedelta | None = None,
) -> McpOAuthToken:
    now = timezone.now()
    return McpOAuthToken.objects.create(
        grant=grant,
        access_hash=hash_token(secrets.token_urlsafe(16)),
        refresh_hash=hash_token(secrets.token_urlsafe(16)) if refresh_in is not None else None,
        access_expires_at=now + access_in,
        refresh_expires_at=now + refresh_in if refresh_in is not None else None,
        rotated_at=None if rotated_ago is None else now - rotated_ago,
    )


def _exists(row) -> bool:
    return type(row).objects.filter(pk=row.pk).exists()


def test_codes_used_or_expired_past_the_grace_are_deleted(settings):
    settings.HAL_MCP_OAUTH_PURGE_DAYS = 7
    grant = _grant()
    used_long_ago = _code(grant, expires_in=-8 * DAY, used_ago=8 * DAY)
    expired_long_ago = _code(grant, expires_in=-8 * DAY)
    used_recently = _code(grant, expires_in=-DAY, used_ago=DAY)  # reuse still detected
    counts = check_cleanup_mcp_oauth(actor=_actor())
    assert counts["codes"] == 2
    assert not _exists(used_long_ago) and not _exists(expired_long_ago)
    assert _exists(used_recently) and _exists(grant)


def test_dead_tokens_past_the_grace_are_deleted_and_their_grants_kept(settings):
    settings.HAL_MCP_OAUTH_PURGE_DAYS = 7
    grant = _grant()
    rotated = _token(grant, access_in=-9 * DAY, refresh_in=20 * DAY, rotated_ago=8 * DAY)
    expired = _token(grant, access_in=-40 * DAY, refresh_in=-10 * DAY)
    access_only = _token(grant, access_in=-8 * DAY)
    revoked = _grant(revoked_ago=8 * DAY)
    of_revoked = _token(revoked, access_in=-8 * DAY, refresh_in=20 * DAY)
    rotated_recently = _token(grant, access_in=-DAY, refresh_in=20 * DAY, rotated_ago=DAY)
    counts = check_cleanup_mcp_oauth(actor=_actor())
    assert counts["tokens"] == 4
    for row in (rotated, expired, access_only, of_revoked):
        assert not _exists(row)
    assert _exists(rotated_recently)
    # The access page still lists both grants, the revoked one as revoked.
    assert _exists(grant) and McpOAuthGrant.objects.get(pk=revoked.pk).revoked_at is not None


def test_clients_without_a_grant_older_than_a_day_are_deleted():
    spam = _client(age=25 * timedelta(hours=1))
    fresh = _client(age=timedelta(hours=23))  # may still be on its way to the consent page
    counts = check_cleanup_mcp_oauth(actor=_actor())
    assert counts["clients"] == 1
    assert not _exists(spam) and _exists(fresh)


def test_live_codes_live_tokens_grants_and_clients_with_grants_are_never_deleted(settings):
    settings.HAL_MCP_OAUTH_PURGE_DAYS = 1
    old = _client(age=400 * DAY)
    grant = _grant(old)
    revoked_recently = _grant(_client(age=400 * DAY), revoked_ago=timedelta(hours=1))
    McpOAuthGrant.objects.filter(pk__in=[grant.pk, revoked_recently.pk]).update(
        created_at=timezone.now() - 400 * DAY
    )
    live_code = _code(grant, expires_in=timedelta(minutes=1))
    # The access token expired long ago, its refresh token is live: the pair stays.
    refreshable = _token(grant, access_in=-30 * DAY, refresh_in=DAY)
    live = _token(grant, access_in=timedelta(hours=1), refresh_in=30 * DAY)
    # Dead only since its grant's revocation an hour ago: within the grace.
    of_revoked = _token(revoked_recently, access_in=timedelta(hours=1), refresh_in=30 * DAY)
    keep = [old, grant, revoked_recently, live_code, refreshable, live, of_revoked]
    before = AuditEntry.objects.count()
    counts = check_cleanup_mcp_oauth(actor=_actor())
    assert counts == {"codes": 0, "tokens": 0, "clients": 0}
    assert all(_exists(row) for row in keep)
    assert AuditEntry.objects.count() == before  # nothing deleted: no audit row


def test_one_audit_row_with_counts_per_run_and_a_bounded_batch(settings):
    settings.HAL_MCP_OAUTH_PURGE_DAYS = 7
    settings.HAL_MCP_OAUTH_CLEANUP_BATCH = 2
    grant = _grant()
    for _ in range(3):
        _code(grant, expires_in=-8 * DAY)
    first = check_cleanup_mcp_oauth(actor=_actor())
    assert first["codes"] == 2  # the batch bounds one run; the next run takes the rest
    rows = AuditEntry.objects.filter(action="mcp_oauth.cleanup")
    assert rows.count() == 1
    assert rows.get().after == {"codes": 2, "tokens": 0, "clients": 0}
    assert check_cleanup_mcp_oauth(actor=_actor())["codes"] == 1
    assert rows.count() == 2
    assert check_cleanup_mcp_oauth(actor=_actor())["codes"] == 0
    assert rows.count() == 2


def test_the_worker_runs_the_cleanup_among_its_periodic_sweeps(settings):
    from hal.management.commands import hal_worker

    settings.HAL_MCP_OAUTH_PURGE_DAYS = 7
    sweeps = dict(hal_worker.periodic_sweeps())
    assert sweeps.get("mcp_oauth.cleanup") is sweep_mcp_oauth
    spam = _client(age=2 * DAY)
    hal_worker.Command._app_sweeps(_actor())
    assert not _exists(spam)
    assert AuditEntry.objects.filter(action="mcp_oauth.cleanup").count() == 1
