"""Live console counters (pending approvals, fleet health, running jobs, open incidents):
sent to every console page over /ws/ops/ as `counters.updated` after any change that can
move them, so the overview cards, the Approvals menu entry and the AI button never go stale."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db import transaction

from hal.live.events import OPS_GROUP, send_now

EVENT = "counters.updated"
# Events after which a counter may have moved (prefix match).
MOVING_EVENTS = ("proposal.", "job.updated", "server.updated", "incident.", "server.heartbeat")
# Heartbeats arrive from every agent all the time: they refresh the counters at most this
# often per process (fleet health moves when a server goes silent or comes back).
HEARTBEAT_EVERY_SECONDS = 5.0
_last_heartbeat = [0.0]
_lock = threading.Lock()


def counters() -> dict[str, Any]:
    """The numbers the overview cards and the menu badges show."""
    from hal.models import Incident
    from hal.queries.ops import fleet_health, pending_approvals, running_jobs

    return {
        "pending_approvals": pending_approvals(),
        "fleet": fleet_health(),
        "running_jobs": running_jobs(limit=0)[0],
        "open_incidents": Incident.objects.filter(status=Incident.OPEN).count(),
    }


def send_counters() -> None:
    """Send the current counters to every console page (after a commit)."""
    send_now(OPS_GROUP, EVENT, counters())


def note_event(group: str, event_type: str) -> None:
    """Called by hal.events.publish (hooked in by HalConfig.ready()): queue a counters
    update after this commit if `event_type` may move a counter."""
    if group != OPS_GROUP or not event_type.startswith(MOVING_EVENTS):
        return
    if event_type == "server.heartbeat":
        now = time.monotonic()
        with _lock:
            if now - _last_heartbeat[0] < HEARTBEAT_EVERY_SECONDS:
                return
            _last_heartbeat[0] = now
    transaction.on_commit(send_counters)
