"""Token usage per connection: record one model call, sum per UTC day and month, price it.

`record_usage(connection, input_tokens, output_tokens, model)` is the one entry point for
every model call that costs tokens: chat turns and relays (chatrooms/integration.py) and
the second-opinion reviewer. It adds to the `UsageDay` aggregate row of (connection, UTC
day, model) with one UPDATE, prices the call with the connection's `ModelPrice` for
that model (if any), and lets providers/budgets.py warn at 80 % or pause at 100 %.
Periods are UTC: a day starts at 00:00 UTC, a month on the 1st at 00:00 UTC.
"""

from __future__ import annotations

import datetime
import time
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.db import rows
from hal.errors import InvalidInput
from hal.observe import families
from providers.budget_models import ModelPrice, UsageDay
from providers.models import AIConnection
from providers.usage_totals import (  # noqa: F401 (re-exported: one place to import from)
    CHART_DAYS,
    budget_dict,
    chart_bars,
    day_end,
    month_end,
    month_start,
    period_totals,
    usage_summaries,
    utc_today,
)

MAX_TOKENS = 10**12  # one call may not add more (garbage in, not a counter)
MILLION = Decimal(1_000_000)
COST_PLACES = Decimal("0.000001")


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        raise InvalidInput(
            format_lazy(_("{name} must be a non-negative integer."), name=name),
            code="invalid_usage",
        )
    return value


def price_of(connection_id: int, model: str) -> tuple[Decimal, Decimal] | None:
    # Fixed SQL (hal/db/rows.py): read for every charged model call.
    row = rows.first(ModelPrice, {"connection_id": connection_id, "model": model})
    return (row.input_per_million, row.output_per_million) if row else None


def cost_of(
    price: tuple[Decimal, Decimal] | None, input_tokens: int, output_tokens: int
) -> Decimal:
    if price is None:
        return Decimal(0)
    raw = (price[0] * input_tokens + price[1] * output_tokens) / MILLION
    return raw.quantize(COST_PLACES)


def _add(
    connection_id: int,
    day: datetime.date,
    model: str,
    inp: int,
    out: int,
    cost: Decimal,
    calls: int = 1,
) -> None:
    """One UPDATE in the common case; the day's first call for a model inserts the row."""
    where = {"connection_id": connection_id, "day": day, "model": model}
    values = {"input_tokens": inp, "output_tokens": out, "cost": cost, "calls": calls}
    if rows.increment(UsageDay, where, values):  # fixed SQL (hal/db/rows.py): every call
        return
    try:
        with transaction.atomic():  # a savepoint: a concurrent first insert may win
            UsageDay.objects.create(
                connection_id=connection_id,
                day=day,
                model=model,
                input_tokens=inp,
                output_tokens=out,
                cost=cost,
                calls=calls,
            )
    except IntegrityError:
        rows.increment(UsageDay, where, values)


def record_usage(
    connection: Any,
    input_tokens: int,
    output_tokens: int,
    model: str = "",
    *,
    room_id: int | None = None,
    calls: int = 1,
) -> dict[str, Any]:
    """Charge one model call to its connection (any caller: chat, relay, reviewer), or the
    sum of `calls` calls of the same model and room (chatrooms/integration.py's batches).

    `connection` is an AIConnection or its id; `model` prices the call (empty: unpriced).
    Returns the budget outcome ({"warned": [...], "paused": bool}); with `room_id`, the
    80 % / 100 % notices go to that room."""
    from providers import budgets

    connection_id = int(getattr(connection, "pk", connection))
    inp = _count(input_tokens, "input_tokens")
    out = _count(output_tokens, "output_tokens")
    model = str(model or "")[:200]
    calls = _count(calls, "calls")
    if not inp and not out:
        return {"warned": [], "paused": False}
    day = utc_today()
    # No savepoint of its own inside a caller's transaction: the caller's is enough.
    with transaction.atomic(savepoint=False):
        cost = cost_of(price_of(connection_id, model), inp, out)
        _add(connection_id, day, model, inp, out, cost, calls)
        if cost and families.ON:
            # In the metrics once charged (the same figure the budgets add up).
            name = getattr(connection, "name", None)
            transaction.on_commit(lambda: count_cost(connection_id, cost, name))
        return budgets.after_usage(connection_id, day, room_id=room_id)


_NAMES: dict[int, tuple[float, str]] = {}
NAME_SECONDS = 60.0  # a renamed connection's cost follows its new name within a minute


def count_cost(connection_id: int, cost: Decimal, name: str | None = None) -> None:
    """hal_ai_connection_cost_total{connection} (hal/observe/families.py) by its name."""
    if name is None:
        now = time.monotonic()
        cached = _NAMES.get(connection_id)
        if cached is None or now - cached[0] > NAME_SECONDS:
            found = AIConnection.objects.filter(pk=connection_id).values_list("name", flat=True)
            cached = _NAMES[connection_id] = (now, str(found.first() or "unknown"))
        name = cached[1]
    families.connection_cost.labels(name).inc(float(cost))


async def arecord_usage(
    connection: Any, input_tokens: int, output_tokens: int, model: str = "", **kw: Any
) -> dict[str, Any]:
    """record_usage for async callers."""
    return await sync_to_async(record_usage, thread_sensitive=True)(
        connection, input_tokens, output_tokens, model, **kw
    )
