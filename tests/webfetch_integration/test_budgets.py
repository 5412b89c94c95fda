"""Daily budgets: token flag, fetch degraded mode (half the pages, half the bytes), resets."""

from __future__ import annotations

import datetime

import pytest
from asgiref.sync import sync_to_async

from hal.errors import InvalidInput, NotFound, PermissionDenied
from hal.models import AuditEntry
from tests.webfetch_integration.conftest import add_page, ai_actor, approver, make_connection
from webfetch import budgets
from webfetch.prefetch import prefetch_context


def _audits(code: str) -> int:
    return AuditEntry.objects.filter(action=code).count()


@pytest.mark.django_db
def test_token_budget_flag_is_visible_and_audited_once(settings, client_op):
    settings.HAL_BUDGET_TOKENS_PER_DAY = 100
    conn = make_connection()
    first = budgets.record_usage(conn.pk, 40, 30)
    assert first.tokens_used == 70 and not first.tokens_exceeded
    assert _audits("budgets.tokens_exceeded") == 0
    second = budgets.record_usage(conn.pk, 20, 20)
    assert second.tokens_exceeded and second.tokens_used == 110
    budgets.record_usage(conn.pk, 5, 5)  # still recorded: never a silent stop
    assert _audits("budgets.tokens_exceeded") == 1
    entry = AuditEntry.objects.get(action="budgets.tokens_exceeded")
    assert entry.target_id == str(conn.pk) and entry.via == "system"

    body = client_op.get("/api/ai/budgets").json()
    (row,) = [b for b in body["budgets"] if b["connection_id"] == conn.pk]
    assert row["name"] == conn.name
    assert (row["tokens_used"], row["tokens_limit"], row["tokens_exceeded"]) == (120, 100, True)
    assert row["degraded"] is False and row["fetch_bytes_limit"] == 0


@pytest.mark.django_db
def test_unlimited_by_default_and_counters_reset_each_day(settings, monkeypatch):
    conn = make_connection()
    status = budgets.record_usage(conn.pk, 10**9, 10**9)
    assert status.tokens_limit == 0 and not status.tokens_exceeded
    settings.HAL_BUDGET_TOKENS_PER_DAY = 10
    assert budgets.budget_status(conn.pk).tokens_exceeded
    tomorrow = budgets.utc_today() + datetime.timedelta(days=1)
    monkeypatch.setattr(budgets, "utc_today", lambda: tomorrow)
    fresh = budgets.budget_status(conn.pk)
    assert fresh.tokens_used == 0 and not fresh.tokens_exceeded and fresh.day == str(tomorrow)
    budgets.record_usage(conn.pk, 11, 0)
    budgets.record_usage(conn.pk, 11, 0)
    # One audit per period: today's flag is a new period's flag.
    assert _audits("budgets.tokens_exceeded") == 1


@pytest.mark.django_db
def test_record_usage_refuses_garbage():
    for args in ((0, 1, 1), (1, -1, 0), (1, 1.5, 0), (1, True, 0), ("1", 1, 1)):
        with pytest.raises(InvalidInput):
            budgets.record_usage(*args)


@pytest.mark.django_db
def test_per_connection_limits_are_set_through_an_audited_action(settings, operator, viewer):
    from webfetch.actions import check_set_budget_limit

    settings.HAL_BUDGET_FETCH_BYTES_PER_DAY = 1000
    conn = make_connection()
    with pytest.raises(PermissionDenied):
        check_set_budget_limit(
            actor=approver(viewer), connection_id=conn.pk, tokens_per_day=5, fetch_bytes_per_day=5
        )
    limit = check_set_budget_limit(
        actor=approver(operator), connection_id=conn.pk, tokens_per_day=50, fetch_bytes_per_day=None
    )
    assert (limit.tokens_per_day, limit.fetch_bytes_per_day) == (50, None)
    assert budgets.limits_for(conn.pk) == (50, 1000)  # None → the setting's default
    assert AuditEntry.objects.filter(action="budgets.set_limit", result="ok").count() == 1
    with pytest.raises(InvalidInput):
        check_set_budget_limit(
            actor=approver(operator),
            connection_id=conn.pk,
            tokens_per_day=-1,
            fetch_bytes_per_day=0,
        )
    with pytest.raises(NotFound):
        check_set_budget_limit(
            actor=approver(operator), connection_id=999999, tokens_per_day=1, fetch_bytes_per_day=0
        )


@pytest.mark.django_db(transaction=True)
async def test_fetch_budget_degrades_to_half_the_pages_and_bytes(
    server, allow_loopback, settings, operator
):
    settings.HAL_WEBFETCH_MAX_BYTES = 4000
    settings.HAL_BUDGET_FETCH_BYTES_PER_DAY = 3000
    conn = await sync_to_async(make_connection)()
    big = "\n\n".join("word " * 40 for _ in range(60))  # ~12 kB of HTML
    urls = [add_page(server, f"/big{i}", f"Big {i}", big) for i in range(4)]

    normal = await prefetch_context(
        f"{urls[0]} {urls[1]}", operator_id=operator.pk, shared=False, connection_ids=[conn.pk]
    )
    assert not normal.degraded and len(normal.results) == 2
    assert [r.bytes_read for r in normal.results] == [4000, 4000]
    assert all(r.truncated for r in normal.results)
    status = await sync_to_async(budgets.budget_status)(conn.pk)
    assert status.degraded and status.fetch_bytes_used == 8000 and status.fetches == 2
    assert await sync_to_async(_audits)("budgets.fetch_degraded") == 1

    degraded = await prefetch_context(
        f"{urls[2]} {urls[3]}", operator_id=operator.pk, shared=True, connection_ids=[conn.pk]
    )
    assert degraded.degraded
    assert [r.url for r in degraded.results] == [urls[2]]  # half as many pages
    assert degraded.results[0].bytes_read == 2000  # half the bytes
    assert degraded.skipped_urls == (urls[3],)
    assert degraded.blocks[1].startswith(f"could not read {urls[3]}: budget")
    assert "/big3" not in server.paths()
    assert await sync_to_async(_audits)("budgets.fetch_degraded") == 1  # once per period


@pytest.mark.django_db(transaction=True)
async def test_fetch_url_in_degraded_mode_reads_half_the_bytes(
    server, allow_loopback, settings, operator
):
    from hal.tools import run_tool_call
    from webfetch.models import FetchAllowDomain

    settings.HAL_WEBFETCH_MAX_BYTES = 4000
    settings.HAL_BUDGET_FETCH_BYTES_PER_DAY = 1
    conn = await sync_to_async(make_connection)()
    await sync_to_async(FetchAllowDomain.objects.create)(domain="127.0.0.1")
    big = "\n\n".join("word " * 40 for _ in range(60))
    a, b = add_page(server, "/a", "A", big), add_page(server, "/b", "B", big)
    origin = {"connection_id": conn.pk, "turn_id": "7"}
    first = await sync_to_async(run_tool_call)(
        "fetch_url", {"url": a}, actor=ai_actor(operator), origin=origin
    )
    assert first.result["provenance"]["bytes_read"] == 4000 and not first.result["degraded"]
    second = await sync_to_async(run_tool_call)(
        "fetch_url", {"url": b}, actor=ai_actor(operator), origin=origin
    )
    assert second.result["degraded"] and second.result["provenance"]["bytes_read"] == 2000
    status = await sync_to_async(budgets.budget_status)(conn.pk)
    assert status.fetch_bytes_used == 6000
