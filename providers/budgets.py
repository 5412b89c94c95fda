"""Daily and monthly token/cost budgets per connection: warn at 80 %, pause at 100 %.

A connection whose budget is exhausted gets the status `paused` (with a reason and the
end of the period); sending to it is refused with 409 `budget_exhausted`. It comes back
in two ways only: an administrator raises the budget (`check_set_budget`, re-auth), or
the period ends — checked lazily (`resume_expired`, one indexed query) when a message is
sent and when /ops/ai or the connections API is read; there is no background job.
Periods are UTC days and UTC months (providers/usage.py).
"""

from __future__ import annotations

import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.db import rows
from hal.errors import Conflict, InvalidInput
from hal.live.events import OPS_GROUP, publish
from providers.budget_models import ConnectionBudget, ModelPrice
from providers.budget_rules import (
    LIMIT_FIELDS,
    _describe,
    _record_pause,
    _utc,
    assess,
)
from providers.models import AIConnection, connection_changed
from providers.status_hooks import BUDGET_PAUSED, connection_stopped
from providers.usage_totals import (
    budget_dict,
    month_start,
    period_totals,
    utc_today,
)

# Sent with `room_id=` and `text=` (a hal.i18n.text) for the 80 % and pause notices;
# chatrooms/apps.py connects the receiver that posts them in that room.
budget_notice = Signal()

WARN_RATIO = Decimal("0.8")
AUDIT_ACTOR = "budgets"
PRICE_MAX = Decimal("100000000")


def _notify(room_id: int | None, text: dict[str, Any]) -> None:
    """A HAL notice in the room where the usage happened (none without a room).

    providers sits below chatrooms (tests/test_architecture.py): the rooms post it from
    their receiver of `budget_notice`, inside this transaction."""
    if room_id is not None:
        budget_notice.send(sender=ConnectionBudget, room_id=room_id, text=text)


def _changed(conn: AIConnection) -> None:
    publish(OPS_GROUP, "connection.updated", conn.as_dict())
    transaction.on_commit(
        lambda: connection_changed.send(
            sender=AIConnection, connection=conn, created=False, deleted=False
        )
    )


def after_usage(
    connection_id: int, day: datetime.date, *, room_id: int | None = None
) -> dict[str, Any]:
    """After a call was charged (inside its transaction): warn once at 80 %, pause at 100 %."""
    # Fixed SQL (hal/db/rows.py): read for every charged model call.
    budget = rows.first(ConnectionBudget, {"connection_id": connection_id})
    if budget is None or not any(getattr(budget, f) for f in LIMIT_FIELDS):
        return {"warned": [], "paused": False}
    totals = period_totals(connection_id, day)
    ratios = assess(budget, totals)
    exhausted = [p for p, r in ratios.items() if r >= 1]
    if exhausted:
        return {"warned": [], "paused": _pause(budget, totals, exhausted, day, room_id)}
    warned = []
    for period, key in (("day", day), ("month", month_start(day))):
        if ratios[period] < WARN_RATIO:
            continue
        field = f"warned_{period}"
        # Conditional: of two concurrent calls crossing 80 %, exactly one posts the notice.
        stamped = (
            ConnectionBudget.objects.filter(pk=budget.pk)
            .exclude(**{field: key})
            .update(**{field: key})
        )
        if stamped != 1:
            continue
        warned.append(period)
        conn = AIConnection.objects.get(pk=connection_id)
        described = _describe(budget, totals, period)
        record_audit(
            Actor.for_system("system", AUDIT_ACTOR),
            "connections.budget_warning",
            target=conn,
            after={"period": period, "used": described},
            message=f"80% of the {described}",
        )
        _notify(
            room_id,
            i18n.text(
                gettext_noop("@{name} has used 80% of its {period} budget ({used})."),
                name=conn.name,
                period=period_word(period),
                used=described.split(": ", 1)[1],
            ),
        )
    return {"warned": warned, "paused": False}


def period_word(period: str) -> dict[str, Any]:
    return i18n.text(gettext_noop("daily") if period == "day" else gettext_noop("monthly"))


def _pause(
    budget: ConnectionBudget,
    totals: dict[str, Any],
    exhausted: list[str],
    day: datetime.date,
    room_id: int | None,
) -> bool:
    """Set status `paused` with a reason until the latest exhausted period ends."""
    conn = AIConnection.objects.select_for_update(no_key=True).get(pk=budget.connection_id)
    reason, until = _record_pause(budget, totals, exhausted, day)
    if conn.status != AIConnection.ACTIVE:
        return conn.status == AIConnection.PAUSED  # disabled/error stay as they are
    before = {"status": conn.status}
    conn.status = AIConnection.PAUSED
    conn.save(update_fields=["status", "updated_at"])
    record_audit(
        Actor.for_system("system", AUDIT_ACTOR),
        "connections.budget_paused",
        target=conn,
        before=before,
        after={"status": conn.status, "reason": reason, "paused_until": until.isoformat()},
        message=reason,
    )
    connection_stopped(BUDGET_PAUSED, conn, reason)
    _notify(
        room_id,
        i18n.text(
            gettext_noop(
                "@{name} is paused: {reason}. It resumes at {until}, or an administrator "
                "raises its budget on /ops/ai."
            ),
            name=conn.name,
            reason=reason,
            until=_utc(until),
        ),
    )
    _changed(conn)
    return True


def _resume(conn: AIConnection, why: str, actor: Actor | None = None) -> None:
    """paused → active, clearing the reason (inside the caller's transaction)."""
    ConnectionBudget.objects.filter(connection_id=conn.pk).update(
        paused_reason="", paused_until=None
    )
    if conn.status != AIConnection.PAUSED:
        return
    from providers.verification import settle_ready

    settle_ready(conn)  # the one way to `active` (it checks the budget again)
    if conn.status == AIConnection.PAUSED:
        return
    conn.save(update_fields=["status", "last_error", "updated_at"])
    record_audit(
        actor or Actor.for_system("system", AUDIT_ACTOR),
        "connections.budget_resumed",
        target=conn,
        before={"status": AIConnection.PAUSED},
        after={"status": conn.status},
        message=why,
    )
    _changed(conn)


def resume_expired(now: datetime.datetime | None = None) -> list[int]:
    """Resume every connection whose exhausted period has ended (lazy: at send/read time)."""
    now = now or timezone.now()
    due = list(
        ConnectionBudget.objects.filter(paused_until__lte=now).values_list(
            "connection_id", flat=True
        )
    )
    resumed = []
    for connection_id in due:
        with transaction.atomic():
            conn = (
                AIConnection.objects.select_for_update(no_key=True).filter(pk=connection_id).first()
            )
            budget = (
                ConnectionBudget.objects.select_for_update()
                .filter(connection_id=connection_id)
                .first()
            )
            if (
                conn is None
                or budget is None
                or budget.paused_until is None
                or budget.paused_until > now
            ):
                continue  # someone else resumed it meanwhile
            _resume(conn, "the budget period ended")
            resumed.append(connection_id)
    return resumed


def budget_exhausted(conn: Any) -> Conflict:
    """The 409 for sending to a paused connection: why, when it resets, what to do."""
    budget = ConnectionBudget.objects.filter(connection_id=conn.pk).first()
    until = budget.paused_until if budget else None
    return Conflict(
        format_lazy(
            _(
                "@{name} is paused because its budget is used up ({reason}). It resumes at "
                "{until}, or an administrator raises its budget on /ops/ai."
            ),
            name=conn.name,
            reason=(budget.paused_reason if budget else "") or _("budget exhausted"),
            until=_utc(until) if until else _("the end of the period"),
        ),
        code="budget_exhausted",
        details={
            "connection_id": conn.pk,
            "status": conn.status,
            "paused_until": until.isoformat() if until else None,
        },
    )


# ----- actions ----------------------------------------------------------------------------


def _limit(value: Any, name: str, *, money: bool) -> Any:
    if value is None or value == "":
        return None
    if money:
        try:
            number = Decimal(str(value))
        except InvalidOperation:
            number = Decimal(-1)
        if isinstance(value, bool) or not number.is_finite() or not 0 < number < PRICE_MAX:
            raise InvalidInput(
                format_lazy(_("{name} must be a positive amount or empty."), name=name),
                code="invalid_budget",
            )
        return number.quantize(Decimal("0.0001"))
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 10**15:
        raise InvalidInput(
            format_lazy(_("{name} must be a positive whole number or empty."), name=name),
            code="invalid_budget",
        )
    return value


def budget_form(post: Any) -> dict[str, Any]:
    """The /ops/ai budget form's fields (empty: no limit)."""
    return {f: post.get(f, "").strip() for f in LIMIT_FIELDS}


def price_form(post: Any) -> dict[str, Any]:
    """The /ops/ai price form's fields (both empty: remove the price)."""
    data: dict[str, Any] = {"model": post.get("model", "").strip()}
    for field in ("input_per_million", "output_per_million"):
        data[field] = post.get(field, "").strip() or None
    return data


def clean_budget(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInput(_("Send a JSON object."), code="invalid_budget")
    unknown = sorted(set(data) - set(LIMIT_FIELDS))
    if unknown:
        raise InvalidInput(
            format_lazy(_("Unknown budget fields: {names}."), names=", ".join(unknown)),
            code="invalid_budget",
        )
    return {f: _limit(data.get(f), f, money=f.startswith("cost")) for f in LIMIT_FIELDS}


@action("connections.set_budget")
def check_set_budget(*, actor: Actor, connection: Any, data: Any) -> AIConnection:
    """Set a connection's daily/monthly token and cost budgets (administer + re-auth)."""
    from providers.actions import resolve_connection

    require_perm(actor, "administer")
    conn = resolve_connection(connection)
    require_recent(actor)
    return do_set_budget(actor, conn, clean_budget(data))


def do_set_budget(actor: Actor, conn: AIConnection, limits: dict[str, Any]) -> AIConnection:
    """Save the budget (audited before/after); a raised budget resumes a paused connection."""
    with transaction.atomic():
        conn = AIConnection.objects.select_for_update(no_key=True).get(pk=conn.pk)
        budget, _created = ConnectionBudget.objects.select_for_update().get_or_create(
            connection=conn
        )
        before = budget_dict(budget)
        for field, value in limits.items():
            setattr(budget, field, value)
        budget.save()
        budgeted = any(getattr(budget, f) for f in LIMIT_FIELDS)
        if conn.budgeted != budgeted:  # sends reserve only for budgeted connections
            AIConnection.objects.filter(pk=conn.pk).update(budgeted=budgeted)
            conn.budgeted = budgeted
        record_audit(
            actor, "connections.set_budget", target=conn, before=before, after=budget_dict(budget)
        )
        day = utc_today()
        totals = period_totals(conn.pk, day)
        exhausted = [p for p, r in assess(budget, totals).items() if r >= 1]
        if exhausted:
            _pause(budget, totals, exhausted, day, None)
        elif conn.status == AIConnection.PAUSED:
            _resume(conn, "the budget was raised", actor)
        else:
            _changed(conn)
    conn.refresh_from_db()
    return conn


def _price(value: Any, name: str) -> Decimal:
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        number = Decimal(-1)
    if (
        isinstance(value, bool)
        or value is None
        or not number.is_finite()
        or not 0 <= number < PRICE_MAX
    ):
        raise InvalidInput(
            format_lazy(_("{name} must be a non-negative amount."), name=name), code="invalid_price"
        )
    return number.quantize(Decimal("0.0001"))


@action("connections.set_price")
def check_set_price(*, actor: Actor, connection: Any, data: Any) -> AIConnection:
    """Set (or with both prices null, remove) one model's price per million tokens."""
    from providers.actions import resolve_connection

    require_perm(actor, "administer")
    conn = resolve_connection(connection)
    require_recent(actor)
    if not isinstance(data, dict):
        raise InvalidInput(_("Send a JSON object."), code="invalid_price")
    model = data.get("model")
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise InvalidInput(_("Name the model the price is for."), code="invalid_price")
    model = model.strip()
    remove = data.get("input_per_million") is None and data.get("output_per_million") is None
    prices = None
    if not remove:
        prices = (
            _price(data.get("input_per_million"), "input_per_million"),
            _price(data.get("output_per_million"), "output_per_million"),
        )
    with transaction.atomic():
        row = ModelPrice.objects.select_for_update().filter(connection=conn, model=model).first()
        before = None if row is None else [str(row.input_per_million), str(row.output_per_million)]
        if prices is None:
            if row is not None:
                row.delete()
        else:
            ModelPrice.objects.update_or_create(
                connection=conn,
                model=model,
                defaults={"input_per_million": prices[0], "output_per_million": prices[1]},
            )
        record_audit(
            actor,
            "connections.set_price",
            target=conn,
            before={"model": model, "per_million": before},
            after={
                "model": model,
                "per_million": None if prices is None else [str(p) for p in prices],
            },
        )
        _changed(conn)
    return conn
