"""Alerts in, end to end (issue 46 item 6): alerts fired in a real Prometheus Alertmanager
reach a HAL daphne process as incidents, HAL's investigator posts its summary (a scripted
fake model over the real Anthropic wire format), and the summary's signed webhook reaches
the on-call operator; then a storm of alerts straight at the receiver.

Part 1, --alerts alerts one after another, each its own group: fired (POST /api/v2/alerts
to Alertmanager; group_wait 1 s) → incident opened → investigator summary → webhook
delivered. p50/p95 of each step from the fire, on the database's timestamps against this
machine's clock (one host: one clock). The investigations and the notification delivery
run as in production: `hal_worker`'s loops, in threads of this process.

Part 2, a storm: --storm alerts, each a new group, POSTed to /api/alerts/alertmanager at an
even pace over --storm-seconds by --clients threads (the receiver's answer time, p50/p99/
max, measured by the client); the rows written per table, incidents opened, investigations
queued (the worker is stopped first: queued, not run).

Not a timed test: it prints what it measured; exit status 1 when a step never happened.

Usage: .venv/bin/python bench/alerts.py [--alerts 10] [--storm 1000] [--storm-seconds 60]
  SQLite in a temp dir by default; PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_alerts
  (it migrates that database and leaves its rows).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import Daphne, pct, setup_django

BOUND = 120.0  # seconds: a step that did not happen by then never will


def wait(check: Any, bound: float = BOUND, every: float = 0.02) -> Any:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    return None


def script(fake: Any, n: int) -> None:
    """One investigation: one read round, then findings with one next step."""
    from tests.fakes.script import Reply, ScriptedToolCall

    fake.replies.push(
        Reply(text="Looking.", tool_calls=[ScriptedToolCall("get_health", {}, id=f"t{n}_h")]),
        Reply(
            text="Findings.",
            tool_calls=[
                ScriptedToolCall(
                    "submit_findings",
                    {
                        "checked": [{"claim": "HAL is healthy.", "evidence": [f"t{n}_h"]}],
                        "likely_cause": "unknown",
                        "next_steps": [
                            {"tool": "check_mail_relay", "arguments": {}, "why": "next"}
                        ],
                    },
                    id=f"t{n}_s",
                )
            ],
        ),
    )


def seconds_since(t0: float, when: Any) -> float:
    return when.timestamp() - t0


def part_one(count: int, am: Any, fake: Any) -> tuple[list[dict[str, float]], int]:
    from hal.models import Incident, IncidentEvent
    from notifications.models import Delivery

    rows, missing = [], 0
    for n in range(count):
        name = f"BenchAlert{n}"
        script(fake, n)
        t0 = time.time()
        am.post_alerts(
            [
                {
                    "labels": {"alertname": name, "severity": "critical"},
                    "annotations": {"summary": f"{name} fired"},
                    "generatorURL": f"http://prometheus.bench.test/graph?{name}",
                }
            ]
        )
        incident = wait(lambda n=name: Incident.objects.filter(title__startswith=n).first())
        entry = incident and wait(
            lambda i=incident: IncidentEvent.objects.filter(
                incident=i, kind="investigation"
            ).first()
        )
        sent = entry and wait(
            lambda e=entry: Delivery.objects.filter(
                event__key=f"incident_event:{e.pk}",
                status=Delivery.SENT,
                channel__kind="webhook",
            ).first()
        )
        if not sent:
            missing += 1
            print(f"{name}: a step never happened", flush=True)
            continue
        rows.append(
            {
                "incident": seconds_since(t0, incident.opened_at),
                "summary": seconds_since(t0, entry.created_at),
                "webhook": seconds_since(t0, sent.sent_at),
            }
        )
    return rows, missing


def counts() -> dict[str, int]:
    from alerts.models import Alert, AlertGroup, AlertStorm
    from hal.models import AuditEntry, Incident, IncidentEvent
    from investigations.models import Investigation

    return {
        "incidents": Incident.objects.count(),
        "timeline rows": IncidentEvent.objects.count(),
        "audit rows": AuditEntry.objects.count(),
        "alert groups": AlertGroup.objects.count(),
        "alerts": Alert.objects.count(),
        "storm rows": AlertStorm.objects.count(),
        "investigations": Investigation.objects.count(),
    }


def part_two(url: str, token: str, storm: int, seconds: float, clients: int) -> list[float]:
    """`storm` new groups at an even pace; each request's answer time (s)."""
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = time.monotonic() + 0.5
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")

    def one(i: int) -> None:
        delay = start + i * seconds / storm - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        body = {
            "version": "4",
            "groupKey": f'{{}}:{{alertname="Storm{i}"}}',
            "truncatedAlerts": 0,
            "status": "firing",
            "receiver": "hal",
            "groupLabels": {"alertname": f"Storm{i}"},
            "commonLabels": {},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager.bench.test",
            "alerts": [
                {
                    "status": "firing",
                    "labels": {"alertname": f"Storm{i}", "severity": "warning"},
                    "annotations": {"summary": "storm"},
                    "startsAt": now,
                    "endsAt": "0001-01-01T00:00:00Z",
                    "generatorURL": "http://prometheus.bench.test/graph",
                    "fingerprint": f"{i:016x}",
                }
            ],
        }
        request = urllib.request.Request(
            url + "/api/alerts/alertmanager",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            method="POST",
        )
        began = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=BOUND) as response:
                ok = response.status == 200
        except urllib.error.URLError as exc:
            ok = False
            failures.append(str(exc)[:100])
        took = time.perf_counter() - began
        with lock:
            if ok:
                latencies.append(took)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(storm)))
    if failures:
        print(f"storm: {len(failures)} requests failed, e.g. {failures[0]}")
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alerts", type=int, default=10)
    parser.add_argument("--storm", type=int, default=1000)
    parser.add_argument("--storm-seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--poll", type=float, default=0.2, help="worker poll interval (s)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hal-alerts-bench-"))
    try:
        env = setup_django(tmp)
        return run(args, env, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: Any, env: dict[str, str], tmp: Path) -> int:
    from django.db import connection

    from alerts.sources import check_create_source
    from bench.harness.oncall_setup import investigator, open_inbox, start_workers
    from hal.actions.settings import do_change_setting, get_definition
    from tests.alerts.alertmanager import Alertmanager

    print(f"database: {connection.vendor}", flush=True)
    admin, fake = investigator("alerts", args.poll)
    inbox = open_inbox(admin)
    _row, token, _key = check_create_source(actor=admin, name="bench-am", kind="alertmanager")
    # Part 2's own source: part 1's groups must not count toward its storm window.
    _row, storm_token, _key = check_create_source(
        actor=admin, name="bench-storm", kind="alertmanager"
    )
    # Part 1's alerts are a scripted set, not a storm: each opens its own incident.
    storms = get_definition("alerts.storm_groups")
    do_change_setting(admin, storms, max(args.alerts + 1, 10), reason="bench")
    daphne = Daphne(env, tmp).start()
    am = Alertmanager(tmp / "am", daphne.url, token)
    stop, workers = start_workers()
    missing = 0
    try:
        am.wait_ready()
        rows, missing = part_one(args.alerts, am, fake)
        am.stop()
        for step in ("incident", "summary", "webhook"):
            values = [r[step] for r in rows]
            print(
                f"fired → {step:<8}: p50 {pct(values, 0.5):.3f} s, p95 {pct(values, 0.95):.3f} s"
                f" over {len(values)} alerts (Alertmanager group_wait 1 s, worker poll "
                f"{args.poll} s)",
                flush=True,
            )
        stop.set()
        for thread in workers:
            thread.join(30)
        do_change_setting(admin, storms, storms.default, reason="bench")
        before = counts()
        began = time.monotonic()
        latencies = part_two(daphne.url, storm_token, args.storm, args.storm_seconds, args.clients)
        took = time.monotonic() - began
        after = counts()
        print(
            f"storm: {len(latencies)}/{args.storm} new groups answered 200 in {took:.1f} s "
            f"(alerts.storm_groups {storms.default}); "
            f"receiver p50 {pct(latencies, 0.5) * 1000:.1f} ms, "
            f"p99 {pct(latencies, 0.99) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms",
            flush=True,
        )
        print(
            "storm rows written: " + ", ".join(f"{k} +{after[k] - before[k]}" for k in after),
            flush=True,
        )
        missing += args.storm - len(latencies)
    finally:
        stop.set()
        am.stop()
        daphne.stop()
        fake.stop()
        inbox.receiver.stop()
        inbox.sink.close()
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
