"""The in-memory credential cache: decrypted once per secret version, never used after a change.

Two `CredentialCache` instances stand for two web processes sharing one database: each
checks the secret's (id, version) in the database on every call, so a rotated or deleted
key is seen by both as soon as the change commits.
"""

from __future__ import annotations

import pytest

from providers import services
from providers.services import CredentialCache, get_credential_sync
from vault import api as vault

from .conftest import API, call

pytestmark = pytest.mark.django_db


@pytest.fixture
def decrypts(monkeypatch):
    """Counts the vault decrypts done for provider calls."""
    seen: list[str] = []
    real = vault.get_plaintext

    def spy(secret, /, **kwargs):
        seen.append(kwargs["purpose"])
        return real(secret, **kwargs)

    monkeypatch.setattr(services.vault, "get_plaintext", spy)
    return seen


def _keyed(reauthed, make_connection, key: str, name: str = "claude") -> int:
    c = make_connection(name=name)
    assert call(reauthed, "PUT", f"{API}/{c['id']}/secret", {"api_key": key}).status_code == 200
    return c["id"]


def test_decrypted_once_per_version(reauthed, make_connection, canary, decrypts):
    cid = _keyed(reauthed, make_connection, canary)
    for _ in range(3):
        assert get_credential_sync(cid).reveal() == canary
    assert decrypts == ["connection.api_key"]
    replacement = canary[::-1]
    call(reauthed, "PUT", f"{API}/{cid}/secret", {"api_key": replacement})
    for _ in range(2):
        assert get_credential_sync(cid).reveal() == replacement
    assert decrypts == ["connection.api_key"] * 2


def test_two_processes_never_use_a_rotated_key(reauthed, make_connection, canary):
    cid = _keyed(reauthed, make_connection, canary)
    first, second = CredentialCache(), CredentialCache()
    assert first.get(cid).reveal() == canary
    assert second.get(cid).reveal() == canary
    # Rotated through the API of "another process": both see the new key at once.
    replacement = canary[::-1]
    call(reauthed, "PUT", f"{API}/{cid}/secret", {"api_key": replacement})
    assert first.get(cid).reveal() == replacement
    assert second.get(cid).reveal() == replacement


def test_deleted_key_is_refused_by_every_cache(reauthed, make_connection, canary):
    cid = _keyed(reauthed, make_connection, canary)
    first, second = CredentialCache(), CredentialCache()
    assert first.get(cid).reveal() == canary and second.get(cid).reveal() == canary
    assert call(reauthed, "DELETE", f"{API}/{cid}/secret").status_code == 200
    for cache in (first, second):
        with pytest.raises(Exception) as info:
            cache.get(cid)
        assert getattr(info.value, "code", "") == "credential_missing"


def test_switch_to_oauth_is_not_served_from_cache(reauthed, make_connection, canary):
    from providers.models import AIConnection

    cid = _keyed(reauthed, make_connection, canary)
    cache = CredentialCache()
    assert cache.get(cid).reveal() == canary
    # The auth method changes under the cache (e.g. edited in another process): the API
    # key must not be handed out as an OAuth token.
    AIConnection.objects.filter(pk=cid).update(auth_method=AIConnection.OAUTH)
    with pytest.raises(Exception) as info:
        cache.get(cid)
    assert getattr(info.value, "code", "") == "credential_missing"


def test_checked_together_a_rotated_key_is_read_again_and_a_deleted_one_left_out(
    reauthed, make_connection, canary, decrypts
):
    """`get_many` (a fan-out's prepare): the same rules as `get`, the cached ones checked
    in two queries together."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    kept = _keyed(reauthed, make_connection, canary, "kept")
    rotated = _keyed(reauthed, make_connection, canary[::-1], "rotated")
    deleted = _keyed(reauthed, make_connection, canary.upper(), "deleted")
    first, second = CredentialCache(), CredentialCache()
    for cache in (first, second):
        got = cache.get_many([kept, rotated, deleted])
        assert [got[c].reveal() for c in (kept, rotated, deleted)] == [
            canary,
            canary[::-1],
            canary.upper(),
        ]
    with CaptureQueriesContext(connection) as queries:
        assert sorted(first.get_many([kept, rotated, deleted])) == [kept, rotated, deleted]
    assert len(queries.captured_queries) == 2  # nothing changed: no per-connection query
    call(reauthed, "PUT", f"{API}/{rotated}/secret", {"api_key": canary + "x"})
    assert call(reauthed, "DELETE", f"{API}/{deleted}/secret").status_code == 200
    for cache in (first, second):
        got = cache.get_many([kept, rotated, deleted])
        assert sorted(got) == [kept, rotated]
        assert got[kept].reveal() == canary and got[rotated].reveal() == canary + "x"
