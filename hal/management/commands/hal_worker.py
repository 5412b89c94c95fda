"""Run HAL's task worker: django_tasks_db's worker loop + a liveness heartbeat + orphan sweeps."""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections, connection
from django.utils import timezone
from django.utils.crypto import get_random_string

from hal.actions.base import Actor
from hal.actions.dr import sweep_stale_snapshots
from hal.actions.jobs import sweep_orphans, worker_label
from hal.actions.mcp_oauth_cleanup import sweep_mcp_oauth
from hal.actions.proposals import sweep_expired_proposals, sweep_interrupted_executions
from hal.hooks.workers import loops, sweeps
from hal.management.worker_retry import ResilientWorker, retrying
from hal.models import Job, WorkerHeartbeat
from hal.models.fleet import lease_deadline

log = logging.getLogger("hal.worker")
SWEEP_EVERY_SECONDS = 60
# hal's own sweeps that take the worker's actor (the apps' come from hal/hooks/workers.py).
HAL_SWEEPS: list[tuple[str, Any]] = [
    ("dr.stale_snapshots", sweep_stale_snapshots),
    ("mcp_oauth.cleanup", sweep_mcp_oauth),  # dead codes, tokens, grantless clients
]


def periodic_sweeps() -> list[tuple[str, Any]]:
    """The sweeps run every SWEEP_EVERY_SECONDS after the orphan/proposal sweeps, in order."""
    return HAL_SWEEPS + sweeps()


def beat(worker_id: str, started_at: Any) -> None:
    """Record that this worker is alive and renew the leases of the jobs it is running."""
    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        worker_id=worker_id,
        defaults={
            "hostname": socket.gethostname()[:255],
            "pid": os.getpid(),
            "started_at": started_at,
            "last_seen_at": now,
        },
    )
    Job.objects.filter(status=Job.RUNNING, claimed_by=worker_label()).update(
        heartbeat_at=now, lease_expires_at=lease_deadline()
    )


class Command(BaseCommand):
    help = "Run the task worker (queues default and agent) with heartbeat and orphan sweep."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--queue-name", default="default,agent")
        parser.add_argument("--interval", type=float, default=1.0)
        parser.add_argument("--batch", action="store_true", help="run ready tasks, then exit")
        parser.add_argument("--max-tasks", type=int, default=None)
        parser.add_argument("--worker-id", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        worker_id = options["worker_id"] or f"{socket.gethostname()}-{get_random_string(8)}"
        actor = Actor.for_system("task", label=worker_label())
        started_at = timezone.now()
        retrying("worker start", lambda: beat(worker_id, started_at))
        # A restart: whatever was running under an expired lease is orphaned.
        swept = retrying("worker start", lambda: sweep_orphans(actor))
        if swept:
            log.warning("marked orphaned jobs failed: %s", swept)
        stop = threading.Event()
        thread = threading.Thread(
            target=self._heartbeat_loop, args=(worker_id, started_at, actor, stop), daemon=True
        )
        thread.start()
        if settings.HAL_METRICS_WORKER_PORT and settings.HAL_METRICS:
            # This process's metrics for Prometheus, on loopback only and without a token:
            # one scrape target per process (ADR 0023).
            from prometheus_client import start_http_server

            start_http_server(settings.HAL_METRICS_WORKER_PORT, addr="127.0.0.1")
        # The apps' own loops (e.g. connections in `error` verified again with backoff),
        # each in its own thread: a provider call must never delay a heartbeat.
        app_loops = [
            threading.Thread(target=fn, args=(stop,), daemon=True, name=name)
            for name, fn in loops()
        ]
        for loop in app_loops:
            loop.start()
        # Transient database errors (SQLite locked past its busy timeout, a dropped
        # PostgreSQL connection) pause the task loop instead of ending the process.
        worker = ResilientWorker(
            queue_names=options["queue_name"].split(","),
            interval=options["interval"],
            batch=options["batch"],
            backend_name="default",
            startup_delay=False,
            max_tasks=options["max_tasks"],
            worker_id=worker_id[:64],
            excluded_queue_names=[],
        )
        if not options["batch"]:
            worker.configure_signals()
        try:
            worker.run()
        finally:
            stop.set()
            thread.join(timeout=5)
            for loop in app_loops:
                loop.join(timeout=5)
            if not options["batch"]:
                # A worker that stops (systemctl stop: SIGTERM) says so by removing its
                # heartbeat: dr_restore and /api/health see at once that none runs, rather
                # than after HAL_WORKER_STALE_SECONDS. A --batch run leaves its last beat.
                close_old_connections()
                try:
                    WorkerHeartbeat.objects.filter(worker_id=worker_id).delete()
                except Exception:  # the beat then simply goes stale
                    log.exception("worker %s: could not remove its heartbeat", worker_id)
                log.info("worker %s stopped", worker_id)

    @staticmethod
    def _app_sweeps(actor: Actor) -> None:
        """hal's and the apps' sweeps (periodic_sweeps); one failing does not skip the others."""
        for name, fn in periodic_sweeps():
            try:
                fn(actor)
            except Exception:
                log.exception("worker sweep %s failed", name)

    def _heartbeat_loop(
        self, worker_id: str, started_at: Any, actor: Actor, stop: threading.Event
    ) -> None:
        every = float(getattr(settings, "HAL_WORKER_HEARTBEAT_SECONDS", 5))
        since_sweep = 0.0
        try:
            while not stop.wait(every):
                close_old_connections()
                try:
                    beat(worker_id, started_at)
                    since_sweep += every
                    if since_sweep >= SWEEP_EVERY_SECONDS:
                        since_sweep = 0.0
                        sweep_orphans(actor)
                        # Pending proposals past their expiry turn `expired` (and the
                        # waiting model is told) even when nobody reads them.
                        sweep_expired_proposals()
                        sweep_interrupted_executions()
                        self._app_sweeps(actor)
                except Exception:  # a missed beat is logged; the next one retries
                    log.exception("worker heartbeat failed")
        finally:
            connection.close()
