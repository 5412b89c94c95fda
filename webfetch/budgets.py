"""Per-connection daily budgets: model tokens and fetched bytes, flags, degraded fetching.

Periods are UTC days: usage is one `BudgetUsage` row per (connection, day), so a new day
starts from zero without any reset job. Limits come from `BudgetLimit` (per connection)
or the settings `HAL_BUDGET_TOKENS_PER_DAY` / `HAL_BUDGET_FETCH_BYTES_PER_DAY`
(0 = unlimited). Over the fetch budget a connection fetches in *degraded mode* (half as
many pages, half the bytes); over the token budget it is flagged. Nothing is ever
silently stopped: each flag is visible (`GET /api/ai/budgets`, /ops/web) and audited
once per period when it goes up.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, record_audit, require_perm
from hal.db import rows as fixed_rows
from hal.errors import InvalidInput
from hal.live.events import OPS_GROUP, publish
from webfetch.models import BudgetLimit, BudgetUsage

PREFETCH_PAGES = 2  # SPEC §6: at most 2 URLs per message
SEARCH_PAGES = 3  # pages search fetches (depth 1) per query
MAX_COUNTER = 10**15  # one call may not add more than this (garbage in, not a counter)

AUDIT_ACTOR = "budgets"


def utc_today() -> datetime.date:
    """The current budget period (UTC day)."""
    return timezone.now().astimezone(datetime.UTC).date()


def default_token_limit() -> int:
    return max(0, int(getattr(settings, "HAL_BUDGET_TOKENS_PER_DAY", 0)))


def default_fetch_limit() -> int:
    return max(0, int(getattr(settings, "HAL_BUDGET_FETCH_BYTES_PER_DAY", 0)))


def base_max_bytes() -> int:
    return int(getattr(settings, "HAL_WEBFETCH_MAX_BYTES", 1_000_000))


@dataclass(frozen=True)
class BudgetStatus:
    """One connection's budget state for one day (limits 0 = unlimited)."""

    connection_id: int
    day: str
    input_tokens: int
    output_tokens: int
    tokens_used: int
    tokens_limit: int
    tokens_exceeded: bool
    fetch_bytes_used: int
    fetch_bytes_limit: int
    fetches: int
    degraded: bool
    name: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FetchPlan:
    """How much a fetch may take now: normal, or halved in degraded mode."""

    max_pages: int
    search_pages: int
    max_bytes: int
    degraded: bool


def limits_for(connection_id: int) -> tuple[int, int]:
    """(tokens per day, fetch bytes per day) of a connection; 0 = unlimited."""
    # Fixed SQL (hal/db/rows.py): read for every charged model call.
    row = fixed_rows.first(BudgetLimit, {"connection_id": connection_id})
    tokens = row.tokens_per_day if row and row.tokens_per_day is not None else None
    fetch = row.fetch_bytes_per_day if row and row.fetch_bytes_per_day is not None else None
    return (
        default_token_limit() if tokens is None else max(0, tokens),
        default_fetch_limit() if fetch is None else max(0, fetch),
    )


def _over(used: int, limit: int) -> bool:
    # Reaching the limit counts as over: nothing is left to spend.
    return limit > 0 and used >= limit


def _status(connection_id: int, usage: BudgetUsage | None, day: datetime.date) -> BudgetStatus:
    tokens_limit, fetch_limit = limits_for(connection_id)
    inp = usage.input_tokens if usage else 0
    out = usage.output_tokens if usage else 0
    fetched = usage.fetch_bytes if usage else 0
    return BudgetStatus(
        connection_id=connection_id,
        day=day.isoformat(),
        input_tokens=inp,
        output_tokens=out,
        tokens_used=inp + out,
        tokens_limit=tokens_limit,
        tokens_exceeded=_over(inp + out, tokens_limit),
        fetch_bytes_used=fetched,
        fetch_bytes_limit=fetch_limit,
        fetches=usage.fetches if usage else 0,
        degraded=_over(fetched, fetch_limit),
    )


def budget_status(connection_id: int) -> BudgetStatus:
    """Today's budget state of one connection."""
    day = utc_today()
    usage = BudgetUsage.objects.filter(connection_id=connection_id, day=day).first()
    return _status(connection_id, usage, day)


def fetch_plan(connection_ids: Iterable[int | None] = ()) -> FetchPlan:
    """Fetch limits for a call on behalf of these connections (degraded if any is over)."""
    degraded = any(budget_status(int(c)).degraded for c in connection_ids if c is not None)
    if degraded:
        return FetchPlan(
            max_pages=max(1, PREFETCH_PAGES // 2),
            search_pages=max(1, SEARCH_PAGES // 2),
            max_bytes=max(1, base_max_bytes() // 2),
            degraded=True,
        )
    return FetchPlan(PREFETCH_PAGES, SEARCH_PAGES, base_max_bytes(), False)


async def afetch_plan(connection_ids: Iterable[int | None] = ()) -> FetchPlan:
    ids = list(connection_ids)
    return await sync_to_async(fetch_plan, thread_sensitive=True)(ids)


def list_budgets(actor: Actor) -> dict[str, Any]:
    """Every connection's budget today (plus any id with usage but no connection row)."""
    require_perm(actor, "view")
    day = utc_today()
    names: dict[int, str] = {}
    try:
        from providers.models import AIConnection

        names = dict(AIConnection.objects.values_list("id", "name"))
    except Exception:  # providers not installed (bench) → ids only
        names = {}
    usage = {u.connection_id: u for u in BudgetUsage.objects.filter(day=day)}
    ids = list(names) + sorted(set(usage) - set(names))
    rows = []
    for cid in ids:
        status = _status(cid, usage.get(cid), day)
        rows.append({**status.as_dict(), "name": names.get(cid, "")})
    return {
        "day": day.isoformat(),
        "defaults": {
            "tokens_per_day": default_token_limit(),
            "fetch_bytes_per_day": default_fetch_limit(),
        },
        "budgets": rows,
    }


# --- recording (system actions: the orchestrator and the fetch paths call these) -------------


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNTER:
        raise InvalidInput(
            format_lazy(_("{name} must be a non-negative integer."), name=name),
            code="invalid_usage",
        )
    return value


def _connection_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInput(_("connection_id must be a positive integer."), code="invalid_usage")
    return value


def _locked_usage(connection_id: int, day: datetime.date) -> BudgetUsage:
    BudgetUsage.objects.get_or_create(connection_id=connection_id, day=day)
    return BudgetUsage.objects.select_for_update().get(connection_id=connection_id, day=day)


def _flag(usage: BudgetUsage, field: str, code: str, status: BudgetStatus, message: str) -> None:
    """Raise a flag once per period: stamp it, audit it, tell the console."""
    now = timezone.now()
    changed = BudgetUsage.objects.filter(pk=usage.pk, **{f"{field}__isnull": True}).update(
        **{field: now}
    )
    if changed != 1:
        return  # already raised (and audited) this period
    setattr(usage, field, now)
    record_audit(
        Actor.for_system("system", AUDIT_ACTOR),
        code,
        target_type="ai_connection",
        target_id=status.connection_id,
        target_label=f"connection {status.connection_id}",
        after=status.as_dict(),
        message=message,
    )
    publish(OPS_GROUP, "budget.flag", {"code": code, **status.as_dict()})


def do_record_usage(connection_id: int, input_tokens: int, output_tokens: int) -> BudgetStatus:
    """Add model tokens to today's usage; the token flag goes up (audited) once per day."""
    day = utc_today()
    where = {"connection_id": connection_id, "day": day}
    added = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    # No savepoint of its own inside a caller's transaction: the caller's is enough.
    with transaction.atomic(savepoint=False):
        # The UPDATE locks the day's row until the transaction ends, as the select for
        # update did, in one query instead of three; the day's first call creates it.
        if not fixed_rows.increment(BudgetUsage, where, added):
            _locked_usage(connection_id, day)
            fixed_rows.increment(BudgetUsage, where, added)
        usage = fixed_rows.first(BudgetUsage, where)
        assert usage is not None  # updated just now, in this transaction
        status = _status(connection_id, usage, day)
        if status.tokens_exceeded and usage.tokens_exceeded_at is None:
            _flag(
                usage,
                "tokens_exceeded_at",
                "budgets.tokens_exceeded",
                status,
                f"token budget reached: {status.tokens_used} of {status.tokens_limit} today",
            )
    return status


def record_usage(connection_id: Any, input_tokens: Any, output_tokens: Any) -> BudgetStatus:
    """Record one provider call's token usage for a connection (the orchestrator calls this).

    Never refuses the call itself: over budget means a visible flag and an audit entry.
    """
    return do_record_usage(
        _connection_id(connection_id),
        _count(input_tokens, "input_tokens"),
        _count(output_tokens, "output_tokens"),
    )


async def arecord_usage(connection_id: Any, input_tokens: Any, output_tokens: Any) -> BudgetStatus:
    """record_usage for async callers."""
    return await sync_to_async(record_usage, thread_sensitive=True)(
        connection_id, input_tokens, output_tokens
    )


def do_record_fetch(connection_id: int, nbytes: int, pages: int = 1) -> BudgetStatus:
    """Add fetched bytes; degraded mode goes up (audited) once per day when the limit is hit."""
    day = utc_today()
    with transaction.atomic():
        usage = _locked_usage(connection_id, day)
        BudgetUsage.objects.filter(pk=usage.pk).update(
            fetch_bytes=F("fetch_bytes") + nbytes, fetches=F("fetches") + pages
        )
        usage.refresh_from_db()
        status = _status(connection_id, usage, day)
        if status.degraded and usage.fetch_degraded_at is None:
            _flag(
                usage,
                "fetch_degraded_at",
                "budgets.fetch_degraded",
                status,
                f"fetch budget reached: {status.fetch_bytes_used} of "
                f"{status.fetch_bytes_limit} bytes today; fetching in degraded mode",
            )
    return status


def record_fetch(connection_ids: Iterable[int | None], nbytes: int, pages: int) -> None:
    """Charge network-fetched bytes to every connection the pages were fetched for."""
    nbytes = _count(nbytes, "bytes")
    pages = _count(pages, "pages")
    if not pages:
        return
    for cid in {int(c) for c in connection_ids if c is not None}:
        do_record_fetch(_connection_id(cid), nbytes, pages)


async def arecord_fetch(connection_ids: Iterable[int | None], nbytes: int, pages: int) -> None:
    ids = list(connection_ids)
    await sync_to_async(record_fetch, thread_sensitive=True)(ids, nbytes, pages)
