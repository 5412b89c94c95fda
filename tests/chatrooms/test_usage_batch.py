"""Usage is charged in batches: the calls of a fan-out, ending together, share one trip to
the DB threads and one transaction (two transactions per reply queued the later replies'
completions behind the first ones' bookkeeping); one failing record loses only itself."""

from __future__ import annotations

import asyncio

import pytest
from django.db.models import Sum

from chatrooms import integration
from providers import usage
from providers.budget_models import UsageDay

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_fan_outs_usage_is_recorded_in_one_trip(models, monkeypatch):
    from hal.db import threads as dbthreads

    trips: list[str] = []
    original = dbthreads._db_call

    def counting(loop, fn, *args, **kwargs):
        trips.append(getattr(fn, "__name__", repr(fn)))
        return original(loop, fn, *args, **kwargs)

    monkeypatch.setattr(dbthreads, "_db_call", counting)
    calls = [integration.record_usage(m.id, 100 + i, 10, model="m1") for i, m in enumerate(models)]
    await asyncio.gather(*calls)
    assert trips == ["_record_usage_batch"]
    rows = UsageDay.objects.filter(connection_id__in=[m.id for m in models])
    total = await rows.aaggregate(tokens_in=Sum("input_tokens"), tokens_out=Sum("output_tokens"))
    assert total == {"tokens_in": 300 + 0 + 1 + 2, "tokens_out": 30}


async def test_one_failing_record_loses_only_itself(models, monkeypatch):
    original = usage.record_usage
    broken = models[1].id

    def flaky(connection_id, *args, **kwargs):
        if connection_id == broken:
            raise RuntimeError("boom")
        return original(connection_id, *args, **kwargs)

    monkeypatch.setattr(usage, "record_usage", flaky)
    await asyncio.gather(*(integration.record_usage(m.id, 50, 5, model="m1") for m in models))
    charged = {
        row.connection_id
        async for row in UsageDay.objects.filter(connection_id__in=[m.id for m in models])
    }
    assert charged == {models[0].id, models[2].id}


async def test_batches_charge_in_connection_order_whatever_order_the_replies_ended(
    models, monkeypatch
):
    """Two batches in flight at once (two DB threads, two web processes) lock the same
    usage rows in the same order: in arrival order they could deadlock, and PostgreSQL's
    detection, a second later, dropped one call's charge."""
    from webfetch import budgets

    order: list[tuple[str, int]] = []
    original_usage, original_budgets = usage.record_usage, budgets.record_usage

    def charging(connection_id, *args, **kwargs):
        order.append(("usage", connection_id))
        return original_usage(connection_id, *args, **kwargs)

    def flagging(connection_id, *args, **kwargs):
        order.append(("web", connection_id))
        return original_budgets(connection_id, *args, **kwargs)

    monkeypatch.setattr(usage, "record_usage", charging)
    monkeypatch.setattr(budgets, "record_usage", flagging)
    ids = sorted(m.id for m in models)
    await asyncio.gather(*(integration.record_usage(pk, 10, 1, model="m1") for pk in reversed(ids)))
    assert order == [(kind, pk) for pk in ids for kind in ("web", "usage")]


async def test_one_usage_batch_at_a_time_and_later_calls_join_the_waiting_one(models, monkeypatch):
    """At 64 streams a reply ends every 60 ms: batches in flight on several DB threads at
    once waited on each other's usage-row locks (a batch took up to 590 ms) and held the
    threads a send's trip needed (its first token waited up to 150 ms for one). One batch
    is written at a time per process; what ends meanwhile joins the next."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from hal.db import threads as dbthreads

    # Four DB threads, as on PostgreSQL (SQLite's one would serialise them anyway).
    monkeypatch.setattr(dbthreads, "_executor", ThreadPoolExecutor(4))
    inside, most, batches = 0, 0, []
    lock, release = threading.Lock(), threading.Event()

    def slow_batch(items):
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
            batches.append(sorted(item[1] for item in items))
        release.wait(5)
        with lock:
            inside -= 1

    monkeypatch.setattr(integration, "_record_usage_batch", slow_batch)
    pk = models[0].id
    first = asyncio.ensure_future(integration.record_usage(pk, 1, 1, model="m1"))
    while not batches:
        await asyncio.sleep(0.01)
    later = []
    for tokens in (2, 3, 4):  # each past the batching window of the one before
        later.append(asyncio.ensure_future(integration.record_usage(pk, tokens, 1, model="m1")))
        await asyncio.sleep(integration.USAGE_BATCH_SECONDS * 3)
    assert not any(task.done() for task in later)
    release.set()
    await asyncio.wait_for(asyncio.gather(first, *later), 10)
    assert most == 1
    assert batches == [[1], [2, 3, 4]]


def _queries_of_a_batch(items) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as seen:
        integration._record_usage_batch(items)
    return len(seen.captured_queries)


async def test_a_batch_charges_each_connection_once_however_many_of_its_calls_it_holds(models):
    """Issue 29: at 64 streams the usage bookkeeping was a sixth of the web process's CPU,
    ~10 queries per reply. A batch sums its calls per connection (and per model and room
    for the priced rows) and writes each sum once: its queries grow with the connections
    it charges, not with the calls; every call is still counted."""
    from asgiref.sync import sync_to_async

    alpha, beta = models[0].id, models[1].id
    batch = sync_to_async(_queries_of_a_batch)
    await batch([(alpha, 1, 1, "m1", None, None), (beta, 1, 1, "m1", None, None)])  # the rows
    one = await batch([(alpha, 10, 1, "m1", None, None)])
    six = await batch([(alpha, 10 + i, 1, "m1", None, None) for i in range(6)])
    assert six == one
    day = await UsageDay.objects.aget(connection_id=alpha, model="m1")
    assert (day.input_tokens, day.output_tokens, day.calls) == (1 + 10 + 75, 8, 8)
    two = await batch([(alpha, 5, 1, "m1", None, None), (beta, 5, 1, "m1", None, None)] * 3)
    assert two <= 2 * one
    day = await UsageDay.objects.aget(connection_id=beta, model="m1")
    assert (day.input_tokens, day.output_tokens, day.calls) == (16, 4, 4)


def _reads_of_a_batch(items) -> dict[str, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as seen:
        integration._record_usage_batch(items)
    reads: dict[str, int] = {}
    for query in seen.captured_queries:
        sql = query["sql"]
        if sql.startswith("SELECT"):
            table = sql.split(" FROM ", 1)[1].split()[0].strip('"')
            reads[table] = reads.get(table, 0) + 1
    return reads


async def test_a_batch_reads_the_limits_prices_and_budgets_of_all_its_connections_at_once(models):
    """Issue 43: each connection a batch charged read its token limit, its price and its
    budget with a query each — eight connections a message, twenty-four reads. They are
    read once for the whole batch; each connection is still charged at its own price."""
    from decimal import Decimal

    from asgiref.sync import sync_to_async

    from providers.budget_models import ModelPrice

    ids = [m.id for m in models]
    await ModelPrice.objects.acreate(
        connection_id=ids[1],
        model="m1",
        input_per_million=Decimal(1_000_000),
        output_per_million=Decimal(0),
    )
    items = [(pk, 3, 1, "m1", None, None) for pk in ids]
    await sync_to_async(integration._record_usage_batch)(items)  # the day's rows exist
    reads = await sync_to_async(_reads_of_a_batch)(items)
    for table in ("webfetch_budgetlimit", "providers_modelprice", "providers_connectionbudget"):
        assert reads.get(table) == 1, (table, reads)
    costs = {day.connection_id: day.cost async for day in UsageDay.objects.filter(model="m1")}
    assert costs == {ids[0]: 0, ids[1]: Decimal(6), ids[2]: 0}
