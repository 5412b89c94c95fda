"""Issue 48 item 4: the red-team cases of personal tokens, with OAuth access tokens, at a
real daphne's /mcp — plus the audience check (RFC 8707) at the resource itself."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from django.utils import timezone

from hal.actions import mcp_oauth
from hal.actions.base import Actor
from hal.models import AuditEntry, McpOAuthGrant, McpOAuthToken, Server
from tests.browser.conftest import LiveServer
from tests.mcp.test_mcp_http import post

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        server = LiveServer(tmp_path_factory.mktemp("mcp-oauth-door"))
    yield server
    server.stop()


def mint(user, resource: str) -> str:
    """An access token as the token endpoint issues it (registration, consent, exchange)."""
    return mint_pair(user, resource)[0]


def mint_pair(user, resource: str) -> tuple[str, str]:
    """(access token, refresh token) of one new grant."""
    client = mcp_oauth.do_register_client(
        Actor(user=None, via="mcp"),
        mcp_oauth.new_client_id(),
        {"client_name": "door test", "redirect_uris": ["http://127.0.0.1:9/cb"]},
    )
    code = secrets.token_urlsafe(16)
    grant = mcp_oauth.do_approve_mcp_client(
        Actor(user=user, via="web"),
        client,
        "http://127.0.0.1:9/cb",
        "x" * 43,
        "S256",
        resource,
        code,
    )
    raw, refresh = mcp_oauth.new_access_token(), mcp_oauth.new_refresh_token()
    token = {"access_token": raw, "refresh_token": refresh, "expires_in": 600}
    mcp_oauth.do_issue_tokens(grant, token, code=mcp_oauth.find_code(code, client))
    return raw, refresh


def bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


def test_an_oauth_token_reads_and_cannot_write(live, operator):
    Server.objects.create(hostname="new-01")
    raw = mint(operator, live.url + "/mcp")
    assert post(live.url, bearer(raw))[0] == 200
    call = (
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"approve_server",'
        b'"arguments":{"server":"new-01"},"_meta":{}}}'
    )
    status, body = post(live.url, {**bearer(raw), "mcp-protocol-version": "2025-06-18"}, call)
    assert status == 200
    assert body["result"]["isError"] is True
    assert Server.objects.get(hostname="new-01").status == "pending"
    row = AuditEntry.objects.filter(action="tools.call").get()
    assert (row.via, row.result, row.actor_id) == ("mcp", "refused", operator.pk)
    assert McpOAuthGrant.objects.get().last_used_at is not None


def test_a_token_for_another_resource_is_refused_at_mcp(live, operator):
    # Issued for HAL reached as localhost; presented to HAL reached as 127.0.0.1.
    raw = mint(operator, live.url.replace("127.0.0.1", "localhost") + "/mcp")
    status, body = post(live.url, bearer(raw))
    assert (status, body["error"]["code"]) == (401, "invalid_token")


def test_revoked_expired_rotated_and_disabled_are_401(live, operator):
    resource = live.url + "/mcp"
    revoked, expired, rotated, good = (mint(operator, resource) for _ in range(4))
    grants = list(McpOAuthGrant.objects.order_by("id"))
    mcp_oauth.do_revoke_mcp_grant(Actor(user=operator, via="web"), grants[0], "revoked")
    McpOAuthToken.objects.filter(grant=grants[1]).update(
        access_expires_at=timezone.now() - timedelta(seconds=1)
    )
    McpOAuthToken.objects.filter(grant=grants[2]).update(rotated_at=timezone.now())
    for raw in (revoked, expired, rotated, good[:-2] + "xx", "hal-oat-"):
        status, body = post(live.url, bearer(raw))
        assert status == 401, body
        assert body["error"]["code"] in ("invalid_token", "not_authenticated")
    assert post(live.url, bearer(good))[0] == 200
    operator.is_active = False
    operator.save(update_fields=["is_active"])
    assert post(live.url, bearer(good))[0] == 401


def test_foreign_origin_and_host_are_refused_with_an_oauth_token(live, operator):
    raw = mint(operator, live.url + "/mcp")
    status, body = post(live.url, {**bearer(raw), "Origin": "https://evil.example"})
    assert (status, body["error"]["code"]) == (403, "origin_refused")
    status, body = post(live.url, {**bearer(raw), "Host": "127.rebind.evil.example"})
    assert (status, body["error"]["code"]) == (400, "bad_host")
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (2 << 20) + b'"}}'
    assert post(live.url, bearer(raw), big)[0] == 413


def test_a_refresh_token_is_no_access_token(live, operator):
    access, refresh = mint_pair(operator, live.url + "/mcp")
    assert post(live.url, bearer(access))[0] == 200
    assert post(live.url, bearer(refresh))[0] == 401
