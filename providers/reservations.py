"""Budget reservations: a model call holds an estimate of its tokens (and cost) against its
connection's remaining budget from before it is sent until its real usage is charged.

Without them every call checked only the status, and a budget was charged after the
call: twenty sends at once all passed the check and overshot it twentyfold. Now:

- **Estimate** (`estimate`): input tokens = the prompt's characters (system prompt,
  messages, tool schemas) / `HAL_BUDGET_CHARS_PER_TOKEN` (3: deliberately below the ~4
  of English text, so an estimate rarely falls short), rounded up; plus the call's
  `max_tokens` (the provider's, else `HAL_BUDGET_OUTPUT_TOKENS`, 4096). Cost: that pair
  priced with the model's price, when there is one.
- **Reserve** (`reserve`): inside the caller's transaction — the one that checks the send
  and writes its turns — each connection row and then its budget row are locked, in
  connection order (`select_for_update` on PostgreSQL; on SQLite HAL's IMMEDIATE
  transactions already hold the write lock), then usage + live reservations + the
  estimate must fit every limit of the day and the month, or the call is refused with 409
  `budget_exhausted`. The rows
  (`UsageReservation`) are written in the same transaction (`attach`), so a send that
  fails leaves none, and several processes see each other's.
- **Settle** (`settle`, `release`): the transaction that ends a reply (complete, stopped,
  failed, waiting for a decision) replaces its reservation by the tokens it used, before
  `message.completed` is published; when that usage is charged (chatrooms/integration.py
  batches), the reservation is deleted in that same transaction. Stop, failure and a
  turn that never ran release it the same way.
- **Leaks**: a process that dies holds its reservations at most
  `HAL_BUDGET_RESERVATION_SECONDS` (900): past `expires_at` they no longer count, and chat
  recovery deletes those of the turns it marks interrupted (`sweep`).

Bound: a call can use more than its estimate only by input tokens the ratio missed
(output is capped by max_tokens), so usage exceeds a budget by at most the real-minus-
estimated difference of the calls in flight together — with the conservative ratio, none.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.errors import Conflict
from providers.budget_models import ConnectionBudget, UsageReservation
from providers.models import AIConnection
from providers.usage import cost_of, price_of
from providers.usage_totals import day_end, month_end, period_totals, utc_today

DEFAULT_CHARS_PER_TOKEN = 3.0
DEFAULT_OUTPUT_TOKENS = 4096
DEFAULT_RESERVATION_SECONDS = 900.0

_TOOLS_CHARS: dict[tuple[str, ...], int] = {}


def chars_per_token() -> float:
    """HAL_BUDGET_CHARS_PER_TOKEN (3): characters of prompt counted as one input token."""
    value = float(getattr(settings, "HAL_BUDGET_CHARS_PER_TOKEN", DEFAULT_CHARS_PER_TOKEN))
    return value if value > 0 else DEFAULT_CHARS_PER_TOKEN


def output_tokens(provider: Any) -> int:
    """A call's most output tokens: its provider's max_tokens, else HAL_BUDGET_OUTPUT_TOKENS."""
    value: Any = getattr(provider, "max_tokens", None) or getattr(
        settings, "HAL_BUDGET_OUTPUT_TOKENS", DEFAULT_OUTPUT_TOKENS
    )
    return max(int(value), 0)


def reservation_seconds() -> float:
    """HAL_BUDGET_RESERVATION_SECONDS (900): how long a reservation counts at most."""
    return float(getattr(settings, "HAL_BUDGET_RESERVATION_SECONDS", DEFAULT_RESERVATION_SECONDS))


def _tools_chars(tools: list[Any]) -> int:
    """The tool schemas' size (sent with every call; cached per tool set)."""
    key = tuple(getattr(t, "name", str(t)) for t in tools)
    size = _TOOLS_CHARS.get(key)
    if size is None:
        size = sum(
            len(getattr(t, "name", ""))
            + len(getattr(t, "description", ""))
            + len(json.dumps(getattr(t, "input_schema", None) or {}, default=str))
            for t in tools
        )
        if len(_TOOLS_CHARS) > 64:
            _TOOLS_CHARS.clear()
        _TOOLS_CHARS[key] = size
    return size


def prompt_chars(system: str, messages: Iterable[Any], tools: list[Any]) -> int:
    """The characters a call sends: system prompt, every message's text, tool calls and
    results, speaker labels, and the tool schemas."""
    total = len(system or "") + _tools_chars(tools or [])
    for message in messages:
        total += len(getattr(message, "text", "") or "") + len(getattr(message, "speaker", ""))
        for call in getattr(message, "tool_calls", ()) or ():
            total += len(call.name) + len(json.dumps(call.arguments, default=str))
        for result in getattr(message, "tool_results", ()) or ():
            total += len(result.content or "")
    return total


@dataclass
class Hold:
    """One call's estimate for one connection (tokens, and cost when the model is priced)."""

    connection: Any
    input_tokens: int
    output_tokens: int
    cost: Decimal = Decimal(0)
    turn_id: int | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def connection_id(self) -> int:
        return int(self.connection.pk)


def estimate(
    connection: Any, provider: Any, system: str, messages: Iterable[Any], tools: list[Any]
) -> Hold:
    """A call's estimate: ceil(prompt chars / ratio) input tokens + its max_tokens output."""
    inp = math.ceil(prompt_chars(system, messages, tools) / chars_per_token())
    out = output_tokens(provider)
    price = price_of(connection.pk, connection.model) if connection.model else None
    return Hold(connection, inp, out, cost_of(price, inp, out))


def _limits(budget: ConnectionBudget) -> list[tuple[str, str, Any]]:
    """(period, "tokens"|"cost", limit) of every limit set."""
    out = []
    for period, suffix in (("day", "per_day"), ("month", "per_month")):
        for kind in ("tokens", "cost"):
            limit = getattr(budget, f"{kind}_{suffix}")
            if limit:
                out.append((period, kind, limit))
    return out


def _refusal(
    connection: Any, period: str, kind: str, need: Any, left: Any, until: datetime.datetime
) -> Conflict:
    """409 budget_exhausted: this call does not fit in what is left of a budget."""
    from providers.budget_rules import _utc

    unit = _("tokens") if kind == "tokens" else _("cost")
    return Conflict(
        format_lazy(
            _(
                "@{name} does not have enough {period} budget left for this call (it needs "
                "about {need} {unit}, {left} are left). It resets at {until}, or an "
                "administrator raises its budget on /ops/ai."
            ),
            name=connection.name,
            period=_("daily") if period == "day" else _("monthly"),
            need=need,
            unit=unit,
            left=max(left, 0),
            until=_utc(until),
        ),
        code="budget_exhausted",
        details={
            "connection_id": connection.pk,
            "status": connection.status,
            "paused_until": None,
            "period": period,
            "needed": int(need) if kind == "tokens" else float(need),
            "remaining": int(max(left, 0)) if kind == "tokens" else float(max(left, 0)),
            "resets_at": until.isoformat(),
        },
    )


def reserve(holds: list[Hold], *, replacing: int | None = None) -> list[Hold]:
    """Check that every hold fits its connection's budget, locking the budget rows in
    connection order (inside the caller's transaction); raises 409 `budget_exhausted`.

    Holds of connections without a budget are dropped (returned: the ones to `attach`).
    `replacing`: the turn whose own reservation the new hold replaces (a tool round)."""
    now = timezone.now()
    day = utc_today(now)
    kept: list[Hold] = []
    by_connection: dict[int, list[Hold]] = {}
    for hold in holds:
        by_connection.setdefault(hold.connection_id, []).append(hold)
    for connection_id in sorted(by_connection):
        mine = by_connection[connection_id]
        # Connection, then budget: the order of every other budget writer (do_set_budget,
        # the pause of a charge, keep_paused), so a reservation never deadlocks with them.
        # FOR NO KEY UPDATE (PostgreSQL): rows inserted with a key to the connection (turns,
        # reservations, usage) take FOR KEY SHARE on it, which FOR UPDATE waits for — two
        # such transactions each waiting for the other's share was a deadlock (20 sends at
        # once over two processes); NO KEY UPDATE still orders every budget writer.
        list(
            AIConnection.objects.select_for_update(no_key=True)
            .filter(pk=connection_id)
            .values_list("pk")
        )
        budget = (
            ConnectionBudget.objects.select_for_update().filter(connection_id=connection_id).first()
        )
        limits = _limits(budget) if budget is not None else []
        if not limits:
            continue
        totals = period_totals(connection_id, day)
        live = UsageReservation.objects.filter(connection_id=connection_id, expires_at__gt=now)
        if replacing is not None:
            live = live.exclude(turn_id=replacing)
        held = live.aggregate(tokens=Sum("tokens"), cost=Sum("cost"))
        need = {
            "tokens": sum(h.tokens for h in mine),
            "cost": sum((h.cost for h in mine), Decimal(0)),
        }
        for period, kind, limit in limits:
            used = totals[period][kind] + (held[kind] or 0)
            if used + need[kind] > limit:
                until = day_end(day) if period == "day" else month_end(day)
                raise _refusal(mine[0].connection, period, kind, need[kind], limit - used, until)
        kept.extend(mine)
    return kept


def attach(holds: list[Hold]) -> None:
    """Write the reservations of checked holds (their `turn_id` set), same transaction."""
    if not holds:
        return
    expires = timezone.now() + datetime.timedelta(seconds=reservation_seconds())
    UsageReservation.objects.bulk_create(
        [
            UsageReservation(
                connection_id=h.connection_id,
                turn_id=h.turn_id,
                tokens=h.tokens,
                cost=h.cost,
                expires_at=expires,
            )
            for h in holds
        ]
    )


def replace(hold: Hold) -> bool:
    """A turn's next call (a tool round, a continuation): its reservation becomes what the
    turn has used so far (in `hold`) plus the next call's estimate, if that fits; raises
    409 `budget_exhausted` otherwise. Inside the caller's transaction. False: no budget."""
    assert hold.turn_id is not None
    kept = reserve([hold], replacing=hold.turn_id)
    UsageReservation.objects.filter(turn_id=hold.turn_id).delete()
    attach(kept)
    return bool(kept)


def settle(turn_id: int, connection: Any, input_tokens: int, output_tokens: int) -> int:
    """A call has ended: its turn's reservation holds what it used instead of its estimate
    (inside the transaction that ends the reply), until the usage batch charges it and
    deletes the reservation in one transaction. Between the two the finished call counts
    once, at its real size: a send right after the reply ends is not refused for an
    estimate the call no longer needs."""
    price = price_of(connection.pk, connection.model) if connection.model else None
    return int(
        UsageReservation.objects.filter(turn_id=turn_id).update(
            tokens=input_tokens + output_tokens,
            cost=cost_of(price, input_tokens, output_tokens),
        )
    )


def lock_connections(connection_ids: Iterable[int]) -> None:
    """Lock these connections as `reserve` does (FOR NO KEY UPDATE, in connection order,
    inside the caller's transaction). The usage batch takes them before it moves its calls
    from reserved to used: `reserve` reads the usage and the reservations in two statements,
    and on PostgreSQL a batch committed between the two counted its calls in neither."""
    ids = sorted({int(i) for i in connection_ids})
    if ids:
        list(
            AIConnection.objects.select_for_update(no_key=True)
            .filter(pk__in=ids)
            .order_by("pk")
            .values_list("pk")
        )


def release(turn_ids: Iterable[int]) -> int:
    """Delete the reservations of these turns (charged, stopped, failed or interrupted)."""
    ids = [int(t) for t in turn_ids if t is not None]
    if not ids:
        return 0
    return int(UsageReservation.objects.filter(turn_id__in=ids).delete()[0])


def sweep(now: datetime.datetime | None = None) -> int:
    """Delete reservations past their expiry (they already count no longer)."""
    moment = now or timezone.now()
    return int(UsageReservation.objects.filter(expires_at__lte=moment).delete()[0])


def reserved(connection_id: int) -> dict[str, Any]:
    """What the live reservations of a connection hold now: {"tokens", "cost", "calls"}."""
    row = UsageReservation.objects.filter(
        connection_id=connection_id, expires_at__gt=timezone.now()
    ).aggregate(tokens=Sum("tokens"), cost=Sum("cost"))
    calls = UsageReservation.objects.filter(
        connection_id=connection_id, expires_at__gt=timezone.now()
    ).count()
    return {"tokens": row["tokens"] or 0, "cost": row["cost"] or Decimal(0), "calls": calls}
