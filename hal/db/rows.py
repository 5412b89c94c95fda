"""Fixed-shape SQL for the chat's hot path: insert, select and update with SQL built once.

On a chat send the queryset machinery (cloning, compiling, resolving lookups) cost several
times the statements themselves: about 0.3–0.6 ms of Python per statement, a dozen
statements before the model is asked (docs/performance.md). These helpers build the
statement a queryset would run from the model's own metadata once per shape, keep it, and
prepare values and convert results through the fields exactly as the ORM does (JSON,
datetimes, booleans, foreign keys), so every backend gets and gives what it expects.
Only quoted identifiers from model metadata go into the SQL; every value is a parameter.
`tests/core/test_rows.py` holds them to what the ORM writes and reads, on both databases.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.db import connection as db_connection
from django.db import models

M = TypeVar("M", bound=models.Model)

_SQL: dict[tuple[Any, ...], str] = {}
_SQL_LOCK = threading.Lock()
_OPERATORS = {"exact": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "in": "IN"}


def _sql(key: tuple[Any, ...], build: Any) -> str:
    sql = _SQL.get(key)
    if sql is None:
        sql = build()
        with _SQL_LOCK:
            if len(_SQL) > 1024:  # shapes are few; an `in` of many lengths must not grow it
                _SQL.clear()
            _SQL[key] = sql
    return sql


def _field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    if name == "pk":
        return model._meta.pk  # type: ignore[return-value]
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field) and field.concrete, name
    return field


def _qcol(field: Any) -> str:
    """The field's column, quoted for this backend."""
    column: str | None = field.column
    assert column is not None
    return db_connection.ops.quote_name(column)


def _where(
    model: type[models.Model], where: dict[str, Any]
) -> tuple[tuple[Any, ...], list[tuple[models.Field[Any, Any], str, Any]]]:
    """(shape, [(field, operator, value)]) of `name[__lookup]=value` conditions (AND)."""
    terms = []
    shape = []
    for key, value in where.items():
        name, _, lookup = key.partition("__")
        lookup = lookup or "exact"
        if lookup not in _OPERATORS or (lookup == "exact" and value is None):
            raise ValueError(f"unsupported condition {key}={value!r}")
        field = _field(model, name)
        if lookup == "in":
            value = list(value)
        terms.append((field, lookup, value))
        shape.append((field.column, lookup, len(value) if lookup == "in" else 0))
    return tuple(shape), terms


def _where_sql(terms: list[tuple[models.Field[Any, Any], str, Any]]) -> str:
    parts = []
    for field, lookup, value in terms:
        if lookup == "in":
            holders = ", ".join(["%s"] * len(value)) or "NULL"
            parts.append(f"{_qcol(field)} IN ({holders})")
        else:
            parts.append(f"{_qcol(field)} {_OPERATORS[lookup]} %s")
    return " AND ".join(parts) or "1 = 1"


def _where_params(terms: list[tuple[models.Field[Any, Any], str, Any]]) -> list[Any]:
    params: list[Any] = []
    for field, lookup, value in terms:
        target = field.target_field if field.is_relation else field  # type: ignore[attr-defined]
        values = value if lookup == "in" else [value]
        for v in values:
            if isinstance(v, models.Model):  # a related object stands for its key
                v = v.pk
            params.append(target.get_db_prep_value(v, db_connection, prepared=False))
    return params


def _converters(model: type[models.Model], fields: Sequence[models.Field[Any, Any]]) -> list[Any]:
    """Per selected column, the backend's and the field's converters (what the ORM's
    compiler applies to each fetched row), kept on this thread's connection wrapper."""
    plans = db_connection.__dict__.setdefault("_hal_rows_converters", {})
    key = (model._meta.label, tuple(f.attname for f in fields))
    plan = plans.get(key)
    if plan is None:
        plan = []
        for field in fields:
            col = field.get_col(model._meta.db_table)
            found = db_connection.ops.get_db_converters(col) + col.get_db_converters(db_connection)
            plan.append((found, col) if found else None)
        plans[key] = plan
    return plan


def select(
    model: type[M],
    where: dict[str, Any],
    *,
    order_by: Sequence[str] = (),
    limit: int | None = None,
    only: Sequence[str] = (),
) -> list[M]:
    """`model.objects.filter(**where).order_by(*order_by)[:limit]` as model instances
    (every concrete field loaded, or the primary key and `only`, as `.only()` would).
    Conditions: `name`, `name__gt|gte|lt|lte|in`; order: field names, `-name` descending."""
    meta = model._meta
    fields: Sequence[Any] = meta.concrete_fields
    if only:
        wanted = {_field(model, name) for name in (*only, "pk")}
        fields = [f for f in fields if f in wanted]
    shape, terms = _where(model, where)
    key = (
        "select",
        db_connection.vendor,
        meta.label,
        shape,
        tuple(order_by),
        limit,
        tuple(f.attname for f in fields),
    )

    def build() -> str:
        qn = db_connection.ops.quote_name
        columns = ", ".join(_qcol(f) for f in fields)
        sql = f"SELECT {columns} FROM {qn(meta.db_table)} WHERE {_where_sql(terms)}"  # noqa: S608
        if order_by:
            order = [
                f"{_qcol(_field(model, o.lstrip('-')))}{' DESC' if o[0] == '-' else ' ASC'}"
                for o in order_by
            ]
            sql += " ORDER BY " + ", ".join(order)
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return sql

    sql = _sql(key, build)
    converters = _converters(model, fields)
    names = [f.attname for f in fields]
    with db_connection.cursor() as cursor:
        cursor.execute(sql, _where_params(terms))
        rows = cursor.fetchall()
    out = []
    for raw in rows:
        row = list(raw)
        for pos, plan in enumerate(converters):
            if plan is not None:
                value = row[pos]
                for convert in plan[0]:
                    value = convert(value, plan[1], db_connection)
                row[pos] = value
        out.append(model.from_db(db_connection.alias, names, row))
    return out


# (model, key field's attname) → {key value: its rows}, read ahead by `read_ahead`.
_AHEAD: ContextVar[dict[tuple[Any, str], dict[Any, list[Any]]] | None] = ContextVar(
    "hal_rows_ahead", default=None
)


@contextmanager
def read_ahead(model: type[models.Model], key: str, values: Iterable[Any]) -> Iterator[None]:
    """Within the block (this thread or task), `first(model, {key: v, ...})` for each v of
    `values` answers from one query run now instead of one query each: a batch that reads
    the same per-connection rows for several connections (chatrooms/integration.py's usage
    batch). Only for rows nothing in the block writes: they are read once, here."""
    values = list(dict.fromkeys(values))
    field = _field(model, key)
    found: dict[Any, list[Any]] = {v: [] for v in values}
    if values:
        for row in select(model, {key + "__in": values}):
            found.setdefault(getattr(row, field.attname), []).append(row)
    outer = _AHEAD.get()
    token = _AHEAD.set({**(outer or {}), (model, field.attname): found})
    try:
        yield
    finally:
        _AHEAD.reset(token)


def _from_ahead(model: type[models.Model], where: dict[str, Any]) -> tuple[bool, Any]:
    """(True, the row or None) when a `read_ahead` covers `where`, else (False, None)."""
    ahead = _AHEAD.get()
    if not ahead or any("__" in n for n in where):
        return False, None
    for (kind, attname), found in ahead.items():
        if kind is not model:
            continue
        name = next((n for n in where if _field(model, n).attname == attname), None)
        if name is None:
            continue
        value = where[name]
        if type(value) is not type(next(iter(found), value)) or value not in found:
            return False, None  # not read ahead (or another type): the database answers
        rest = [(_field(model, n), v) for n, v in where.items() if n != name]
        for row in found[value]:
            if all(
                f.get_prep_value(getattr(row, f.attname)) == f.get_prep_value(v) for f, v in rest
            ):
                return True, row
        return True, None
    return False, None


def first(model: type[M], where: dict[str, Any]) -> M | None:
    """`model.objects.filter(**where).first()` for conditions that match at most one row
    (from a `read_ahead` when one covers them)."""
    covered, row = _from_ahead(model, where)
    if covered:
        return row  # type: ignore[no-any-return]
    found = select(model, where, limit=1)
    return found[0] if found else None


def insert(objs: Iterable[M]) -> list[M]:
    """`bulk_create` of unsaved instances of one model with their primary keys set from
    the INSERT's RETURNING (auto_now[_add] filled in by the fields, as `save` does)."""
    objs = list(objs)
    if not objs:
        return objs
    model = type(objs[0])
    meta = model._meta
    pk = meta.pk
    assert pk is not None
    fields = [f for f in meta.concrete_fields if f is not pk]
    if not db_connection.features.can_return_rows_from_bulk_insert:
        return model._default_manager.bulk_create(objs)  # a backend without RETURNING
    key = ("insert", db_connection.vendor, meta.label, len(objs))

    def build() -> str:
        qn = db_connection.ops.quote_name
        columns = ", ".join(_qcol(f) for f in fields)
        row = "(" + ", ".join(["%s"] * len(fields)) + ")"
        values = ", ".join([row] * len(objs))
        return (
            f"INSERT INTO {qn(meta.db_table)} ({columns}) VALUES {values} "  # noqa: S608
            f"RETURNING {_qcol(pk)}"
        )

    sql = _sql(key, build)
    params: list[Any] = []
    for obj in objs:
        for field in fields:
            params.append(
                field.get_db_prep_save(field.pre_save(obj, add=True), connection=db_connection)
            )
    with db_connection.cursor() as cursor:
        cursor.execute(sql, params)
        ids = [row[0] for row in cursor.fetchall()]
    if len(ids) != len(objs):
        raise RuntimeError(f"INSERT returned {len(ids)} ids for {len(objs)} rows")
    for obj, new_id in zip(objs, ids, strict=True):
        setattr(obj, pk.attname, new_id)
        obj._state.adding = False
        obj._state.db = db_connection.alias
    return objs


def _update_sql(model: type[models.Model], names: tuple[str, ...], guarded: bool) -> str:
    """`UPDATE … SET names = %s … WHERE pk = %s [AND status = %s]` (built once per shape)."""
    meta = model._meta
    key = ("update", db_connection.vendor, meta.label, names, guarded)

    def build() -> str:
        qn = db_connection.ops.quote_name
        sets = ", ".join(f"{_qcol(_field(model, name))} = %s" for name in names)
        where = f"{_qcol(meta.pk)} = %s"
        if guarded:
            where += f" AND {_qcol(_field(model, 'status'))} = %s"
        return f"UPDATE {qn(meta.db_table)} SET {sets} WHERE {where}"  # noqa: S608

    return _sql(key, build)


def update(
    model: type[models.Model], pk: Any, values: dict[str, Any], *, status: str | None = None
) -> int:
    """`model.objects.filter(pk=pk[, status=status]).update(**values)`; returns rowcount."""
    sql = _update_sql(model, tuple(values), status is not None)
    params = [_field(model, k).get_db_prep_save(v, db_connection) for k, v in values.items()]
    params.append(pk)
    if status is not None:
        params.append(status)
    with db_connection.cursor() as cursor:
        cursor.execute(sql, params)
        count: int = cursor.rowcount
        return count


def update_each(
    model: type[models.Model],
    changes: Sequence[tuple[Any, dict[str, Any]]],
    *,
    status: str | None = None,
) -> None:
    """`update(model, pk, values, status=status)` for each (pk, values) of `changes`, all
    with the same fields, as one statement run for every row (`executemany`: one round
    trip on PostgreSQL, in a pipeline; one prepared statement on SQLite)."""
    if not changes:
        return
    names = tuple(changes[0][1])
    sql = _update_sql(model, names, status is not None)
    fields = [_field(model, name) for name in names]
    batch = []
    for pk, values in changes:
        if tuple(values) != names:
            raise ValueError(f"update_each: every row must set {names}, not {tuple(values)}")
        params = [
            f.get_db_prep_save(values[name], db_connection)
            for f, name in zip(fields, names, strict=True)
        ]
        params.append(pk)
        if status is not None:
            params.append(status)
        batch.append(params)
    with db_connection.cursor() as cursor:
        cursor.executemany(sql, batch)


def increment(model: type[models.Model], where: dict[str, Any], amounts: dict[str, Any]) -> int:
    """`model.objects.filter(**where).update(x=F("x") + amount, …)` for integer and decimal
    columns; returns the rows it matched."""
    meta = model._meta
    shape, terms = _where(model, where)
    key = ("increment", db_connection.vendor, meta.label, shape, tuple(amounts))

    def build() -> str:
        qn = db_connection.ops.quote_name
        sets = []
        for name in amounts:
            field = _field(model, name)
            added = f"{_qcol(field)} + %s"
            if db_connection.vendor == "sqlite" and field.get_internal_type() == "DecimalField":
                # As the ORM's SQLiteNumericMixin: SQLite's + would make a float of it.
                added = f"CAST(({_qcol(field)} + CAST(%s AS NUMERIC)) AS NUMERIC)"
            sets.append(f"{_qcol(field)} = {added}")
        return (
            f"UPDATE {qn(meta.db_table)} SET {', '.join(sets)} "  # noqa: S608
            f"WHERE {_where_sql(terms)}"
        )

    sql = _sql(key, build)
    params = [
        _field(model, name).get_db_prep_value(value, db_connection, prepared=False)
        for name, value in amounts.items()
    ]
    with db_connection.cursor() as cursor:
        cursor.execute(sql, params + _where_params(terms))
        count: int = cursor.rowcount
        return count
