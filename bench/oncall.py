"""On-call rehearsal (issue 27, item 3): ten scripted incidents on a seeded fleet, each
investigated by a scripted fake model through HAL's real path, end to end.

Not a timed test: it prints what it measured and exits non-zero only when the plumbing is
wrong. For each incident it checks the room "Incident #N", the read calls the model made,
the investigation entry on the timeline (with links to the tool results), the proposals
waiting for a person, and that nothing was executed without approval (no job, no change
created by a proposal). It prints the time from "incident opened" to "summary posted",
measured on the database's own timestamps, with the investigator running as it does in
production: the worker's loop (`investigations.runner.worker_loop`) in a thread.

The operator has a verified e-mail and webhook channel on tests/notifications' loopback
SMTP sink and webhook receiver; the worker's notification delivery loop
(`notifications.worker.run_loop`) runs in a second thread, and the rehearsal prints the
time from "incident opened" until the summary's e-mail and signed webhook were accepted
(each checked at its receiver, the webhook's HMAC signature verified).

The fake model is tests/fakes' Anthropic server (the real Messages wire format over a
loopback socket) with a fixed investigation queued per incident: two read rounds, then
`submit_findings` citing the calls and naming one next step (with a runbook when one fits).

Usage: .venv/bin/python bench/oncall.py [--poll 0.2] [--keep]
  SQLite in a temp dir by default; DATABASE_URL=postgres://… to run on PostgreSQL (it
  migrates that database and leaves its rows).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import setup_django
from bench.harness.oncall_setup import Inbox, investigator, open_inbox, start_workers


@dataclass
class Scenario:
    """One rehearsed incident: how it opens, what the model reads, what it proposes."""

    name: str
    opened_by: str  # operator | agent | health | proposal
    severity: str
    title: str
    servers: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    reads: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    cause: str = ""
    step: tuple[str, dict[str, Any]] = ("check_mail_relay", {})
    runbook: str = ""


SCENARIOS = [
    Scenario(
        "disk filling",
        "agent",
        "sev2",
        "Disk on web1 above 90 %",
        servers=["web1.bench.test"],
        reads=[
            ("get_metrics", {"server": "web1.bench.test"}),
            ("get_server", {"server": "web1.bench.test"}),
        ],
        cause="Logs of portal fill /var on web1.",
        step=(
            "set_server_maintenance",
            {"server": "web1.bench.test", "enabled": True, "reason": "disk"},
        ),
        runbook="Disk filling",
    ),
    Scenario(
        "module failing health after a release",
        "health",
        "sev2",
        "",
        modules=["portal"],
        reads=[("list_releases", {"module": "portal"}), ("list_jobs", {"module": "portal"})],
        cause="The last portal release fails its health check.",
        step=("check_module_health", {"module": "portal"}),
    ),
    Scenario(
        "agent silent",
        "operator",
        "sev3",
        "Agent on web2 silent",
        servers=["web2.bench.test"],
        reads=[("list_servers", {}), ("get_server", {"server": "web2.bench.test"})],
        cause="web2's agent stopped sending heartbeats.",
        step=(
            "set_server_maintenance",
            {"server": "web2.bench.test", "enabled": True, "reason": "silent"},
        ),
    ),
    Scenario(
        "job stuck",
        "operator",
        "sev3",
        "A deploy job has been running for an hour",
        modules=["webmaker"],
        reads=[("list_jobs", {"status": "running"}), ("search_audit", {})],
        cause="The job's runner lost its lease.",
        step=("check_module_health", {"module": "webmaker"}),
    ),
    Scenario(
        "budget pause",
        "operator",
        "sev4",
        "A model connection was paused by its budget",
        reads=[("list_settings", {}), ("search_audit", {})],
        cause="The daily token budget of a connection ran out.",
        step=("check_mail_relay", {}),
    ),
    Scenario(
        "mail relay failing",
        "agent",
        "sev3",
        "Mail relay refuses connections",
        modules=["arimail"],
        reads=[("get_mail_status", {}), ("get_health", {})],
        cause="The SMTP relay is unreachable.",
        step=("check_mail_relay", {}),
    ),
    Scenario(
        "DR snapshot stale",
        "operator",
        "sev3",
        "No DR snapshot for two days",
        reads=[("get_dr_status", {}), ("search_audit", {})],
        cause="The nightly snapshot stopped running.",
        step=("take_dr_snapshot", {}),
    ),
    Scenario(
        "error rate on webmaker",
        "proposal",
        "sev2",
        "webmaker answers 5xx",
        modules=["webmaker"],
        reads=[("list_modules", {}), ("get_overview", {})],
        cause="webmaker's backend is overloaded.",
        step=("check_module_health", {"module": "webmaker"}),
    ),
    Scenario(
        "emergency mode",
        "operator",
        "sev1",
        "Emergency-recovery mode entered",
        reads=[("get_emergency_status", {}), ("get_health", {})],
        cause="An operator entered emergency mode after a failed deploy.",
        step=("check_mail_relay", {}),
    ),
    Scenario(
        "settings change regret",
        "agent",
        "sev4",
        "A settings change slowed approvals",
        reads=[
            (
                "get_change_history",
                {"target_type": "setting", "target_id": "proposals.expiry_minutes"},
            ),
            ("list_settings", {}),
        ],
        cause="proposals.expiry_minutes was lowered.",
        step=("check_mail_relay", {}),
    ),
]


def script(fake: Any, sc: Scenario, index: int, runbook_ids: dict[str, int]) -> None:
    """Queue the fixed investigation of one scenario on the fake model."""
    from tests.fakes.script import Reply, ScriptedToolCall

    ids = [f"toolu_s{index}_{n}" for n in range(len(sc.reads))]
    calls = [
        ScriptedToolCall(name, args, id=i) for (name, args), i in zip(sc.reads, ids, strict=True)
    ]
    step: dict[str, Any] = {"tool": sc.step[0], "arguments": sc.step[1], "why": "next"}
    if sc.runbook:
        step["runbook"] = {"id": runbook_ids[sc.runbook], "version": 1}
    fake.replies.push(
        Reply(text=f"Checking {sc.name}.", tool_calls=calls[:1]),
        Reply(text="", tool_calls=calls[1:]),
        Reply(
            text="Findings.",
            tool_calls=[
                ScriptedToolCall(
                    "submit_findings",
                    {
                        "checked": [
                            {"claim": f"{name} was read.", "evidence": [i]}
                            for (name, _), i in zip(sc.reads, ids, strict=True)
                        ],
                        "likely_cause": sc.cause,
                        "next_steps": [step],
                    },
                    id=f"toolu_s{index}_submit",
                )
            ],
        ),
    )


def seed(admin: Any) -> tuple[dict[str, int], Any]:
    """Servers web1/web2, a runbook, and a failing health endpoint for portal."""
    import http.server

    from hal.actions import servers
    from runbooks.actions import check_create_runbook

    for n, host in enumerate(("web1.bench.test", "web2.bench.test"), start=10):
        s = servers.check_register_server(actor=admin, hostname=host, address=f"127.0.0.{n}")
        servers.check_approve_server(actor=admin, server=s.pk)
    book = check_create_runbook(
        actor=admin, title="Disk filling", body="1. Put the server in maintenance.\n2. Rotate logs."
    )

    class Down(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Down)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    return {"Disk filling": book.pk}, site


def open_incident(sc: Scenario, admin: Any, agent: Any, health_url: str) -> Any:
    """Open the scenario's incident the way it says (operator, agent, health check, or a
    model's proposal approved by an operator)."""
    from hal.actions import incidents, jobs, releases
    from hal.models import Incident

    if sc.opened_by == "health":
        _configure_health(admin, "portal", health_url)
        job = releases.check_module_health(actor=admin, module="portal")
        jobs.run_hal_job.call(job.pk)
        return Incident.objects.order_by("-id").first()
    args = dict(severity=sc.severity, title=sc.title, servers=sc.servers, modules=sc.modules)
    if sc.opened_by == "proposal":
        return _open_by_approved_proposal(admin, args)
    actor = agent if sc.opened_by == "agent" else admin
    return incidents.check_open_incident(actor=actor, **args)


def _configure_health(admin: Any, module: str, url: str) -> None:
    from hal.actions import confirm, releases

    params = {"module": module, "health_check_url": url}
    conf = confirm.check_start_confirmation(
        actor=admin, action_code="modules.configure", params=params
    )
    confirm.check_confirm_target(actor=admin, token=conf.token, typed=conf.target_identifier)
    releases.check_configure_module(actor=admin, confirmation=str(conf.token), **params)


def _open_by_approved_proposal(admin: Any, args: dict[str, Any]) -> Any:
    from hal.actions.proposals import check_approve_proposal
    from hal.models import Incident
    from hal.tools import run_tool_call

    outcome = run_tool_call("open_incident", args, actor=admin.with_via("ai"))
    check_approve_proposal(actor=admin, proposal_id=outcome.proposal.pk)
    return Incident.objects.order_by("-id").first()


# --- notification delivery ---------------------------------------------------------------
INBOX: Inbox | None = None


def notified_at(incident: Any, summary_event: Any) -> dict[str, float] | None:
    """Seconds from "incident opened" until the worker's delivery loop had the summary's
    e-mail and signed webhook accepted (Delivery.sent_at, the database's clock as the
    summary's), once both arrived at the sink and the receiver (signature checked); None
    when either is missing after 60 s."""
    import hashlib
    import hmac

    from notifications.models import Delivery

    assert INBOX is not None
    rows: list[Any] = []
    for _ in range(int(60 / 0.05)):
        rows = list(
            Delivery.objects.filter(
                event__key=f"incident_event:{summary_event.pk}", status=Delivery.SENT
            ).select_related("channel")
        )
        if len(rows) == 2:
            break
        time.sleep(0.05)
    else:
        return None
    out = {}
    for row in rows:
        key = str(row.uuid)
        if row.channel.kind == "email":
            if not any(m["X-HAL-Delivery"] == key for m in INBOX.sink.messages):
                return None
        else:
            posts = [p for p in INBOX.receiver.posts() if p.headers.get("x-hal-delivery") == key]
            if not posts:
                return None
            want = hmac.new(INBOX.secret.encode(), posts[0].raw_body, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(
                posts[0].headers.get("x-hal-signature", ""), f"sha256={want}"
            ):
                return None
        out[row.channel.kind] = (row.sent_at - incident.opened_at).total_seconds()
    return out


def check(sc: Scenario, incident: Any, proposals_before: set[int], jobs_before: int) -> list[str]:
    """What is wrong with this incident's rehearsal (empty: all good)."""
    from chatrooms.models import Message, Room
    from hal.models import IncidentEvent, Job, Proposal
    from investigations.models import Investigation

    problems = []
    room = Room.objects.filter(kind=Room.INCIDENT, incident=incident).first()
    if room is None or room.display_title() != f"Incident #{incident.pk}":
        problems.append("no room")
    inv = Investigation.objects.filter(incident=incident).first()
    if inv is None or inv.status != Investigation.DONE:
        problems.append(f"investigation {inv.status if inv else 'missing'} ({inv and inv.reason})")
        return problems
    if [c["tool"] for c in inv.calls] != [name for name, _ in sc.reads]:
        problems.append(f"reads {[c['tool'] for c in inv.calls]}")
    if not all(c["ok"] for c in inv.calls):
        problems.append("a read failed: " + ", ".join(c["tool"] for c in inv.calls if not c["ok"]))
    anchors = set(Message.objects.filter(room=room).values_list("meta__anchor", flat=True))
    if not all(c["anchor"] in anchors for c in inv.calls):
        problems.append("a read is missing from the room")
    entry = IncidentEvent.objects.filter(incident=incident, kind="investigation").first()
    if entry is None or not any("#call-" in link["url"] for link in entry.data.get("links", [])):
        problems.append("no timeline entry with links")
    new = Proposal.objects.exclude(pk__in=proposals_before).filter(room_id=room.pk if room else 0)
    if not new.exists() or new.exclude(status=Proposal.PENDING).exists():
        problems.append("no proposal waiting")
    if sc.runbook and not new.filter(runbook__title=sc.runbook).exists():
        problems.append("the runbook reference is missing")
    if Job.objects.count() != jobs_before:
        problems.append("a job ran without approval")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poll", type=float, default=0.2, help="worker poll interval (s)")
    parser.add_argument("--keep", action="store_true", help="keep the temp data dir")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hal-oncall-"))
    try:
        setup_django(tmp)
        return rehearse(args.poll)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def rehearse(poll: float) -> int:
    global INBOX
    from hal.actions.base import Actor
    from hal.models import IncidentEvent, Job, Proposal

    admin, fake = investigator("oncall", poll)
    agent = Actor.for_system("agent", "agent:web1.bench.test")
    runbook_ids, site = seed(admin)
    health_url = f"http://127.0.0.1:{site.server_address[1]}/health"
    INBOX = open_inbox(admin)
    stop, workers = start_workers()
    failures = 0
    rows = []
    try:
        for index, sc in enumerate(SCENARIOS, start=1):
            script(fake, sc, index, runbook_ids)
            proposals_before = set(Proposal.objects.values_list("pk", flat=True))
            jobs_before = Job.objects.count() + (1 if sc.opened_by == "health" else 0)
            incident = open_incident(sc, admin, agent, health_url)
            entry = None
            for _ in range(int(60 / 0.05)):
                entry = IncidentEvent.objects.filter(
                    incident=incident, kind="investigation"
                ).first()
                if entry is not None:
                    break
                time.sleep(0.05)
            problems = check(sc, incident, proposals_before, jobs_before)
            to_summary = (entry.created_at - incident.opened_at).total_seconds() if entry else None
            notified = notified_at(incident, entry) if entry else None
            if notified is None:
                problems.append("the operator was not notified (e-mail and signed webhook)")
            failures += bool(problems)
            rows.append((index, sc, incident, to_summary, notified, problems))
            shown = f"{to_summary:.3f} s" if to_summary is not None else "—"
            told = (
                f"e-mail {notified['email']:.3f} s, webhook {notified['webhook']:.3f} s"
                if notified
                else "—"
            )
            print(
                f"{index:2d}. {sc.name:<40} INC-{incident.pk:<4} opened by {sc.opened_by:<8} "
                f"summary {shown:>9}  notified: {told}  "
                + ("OK" if not problems else "FAIL: " + "; ".join(problems)),
                flush=True,
            )
    finally:
        stop.set()
        for thread in workers:
            thread.join(10)
        fake.stop()
        site.shutdown()
        INBOX.receiver.stop()
        INBOX.sink.close()
    times = sorted(r[3] for r in rows if r[3] is not None)
    if times:
        print(
            f"opened → summary: min {times[0]:.3f} s, median {times[len(times) // 2]:.3f} s, "
            f"max {times[-1]:.3f} s (worker poll {poll} s); {len(rows) - failures}/{len(rows)} OK"
        )
    for channel in ("email", "webhook"):
        secs = sorted(r[4][channel] for r in rows if r[4])
        if secs:
            print(
                f"opened → {channel} of the summary: min {secs[0]:.3f} s, "
                f"median {secs[len(secs) // 2]:.3f} s, max {secs[-1]:.3f} s "
                f"(delivery poll {poll} s)"
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
