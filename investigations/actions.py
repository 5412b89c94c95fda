"""Investigation actions: queue (on an incident's opening, or an operator's request), claim,
record a read call, stop (an operator, the incident's closing), finish — each audited.

The summary's own writes (the room message, the proposals, the timeline entry) are in
`investigations.summary`; the model conversation in `investigations.service`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import Conflict, NotFound
from hal.models import Incident
from hal.web.ids import as_id
from investigations import wording
from investigations.live import publish_message, publish_status
from investigations.models import Investigation

log = logging.getLogger("hal.investigations")

SETTING = "ai.incident_investigator"
OFF = "off"
ROUNDS_SETTING = "ai.investigation_max_rounds"
TOKENS_SETTING = "ai.investigation_max_tokens"
SECONDS_SETTING = "ai.investigation_max_seconds"
CONCURRENCY_SETTING = "ai.investigation_concurrency"
ACTOR_LABEL = "hal-investigator"
MAX_ATTEMPTS = 2  # a worker restart re-queues a running investigation once, then fails it
CLAIM_LOCK_KEY = 0x4841_4C49  # "HALI": the advisory lock that serialises claims (PostgreSQL)


def investigator_actor() -> Actor:
    """HAL's investigator acts as itself (a system actor), never as an operator."""
    return Actor.for_system("system", ACTOR_LABEL)


def investigator_setting() -> str:
    from hal.actions.settings import get_setting

    return str(get_setting(SETTING))


def budget_now() -> dict[str, int]:
    """The per-investigation budget from the settings (copied onto each investigation)."""
    from hal.actions.settings import get_setting

    return {
        "rounds": int(get_setting(ROUNDS_SETTING)),
        "tokens": int(get_setting(TOKENS_SETTING)),
        "seconds": int(get_setting(SECONDS_SETTING)),
    }


def incident_room(incident: Incident) -> Any:
    """The incident's room ("Incident #N"), created on first use."""
    from chatrooms.models import Room

    room, _created = Room.objects.get_or_create(
        kind=Room.INCIDENT, incident=incident, defaults={"operator": None, "connection": None}
    )
    return room


def post_notice(room: Any, text: Any, **meta: Any) -> Any:
    """A HAL line in the incident room: English in the row (what models read), and — for a
    hal.i18n text — the text itself beside it (`meta.text_i18n`), which each reader's
    page and socket render in their language."""
    from chatrooms.models import Message

    if i18n.is_text(text):
        meta = {**meta, "text_i18n": text}
    message = Message.objects.create(
        room=room, author_kind=Message.HAL, author="HAL", text=i18n.english(text), meta=meta
    )
    publish_message(message)
    return message


def _load(investigation_id: Any, *, lock: bool = False) -> Investigation:
    pk = as_id(investigation_id)
    qs = Investigation.objects.select_for_update() if lock else Investigation.objects
    found = qs.filter(pk=pk).first() if pk is not None else None
    if found is None:
        raise NotFound(_("No such investigation."), code="investigation_not_found")
    return found


# --- queue ------------------------------------------------------------------------------


def do_queue_investigation(actor: Actor, incident: Incident) -> Investigation | None:
    """Queue an investigation of `incident` by the configured model (inside the caller's
    transaction); None when the setting is off or one is already queued or running."""
    choice = investigator_setting()
    if choice == OFF:
        return None
    from providers.models import AIConnection

    connection = AIConnection.objects.filter(pk=int(choice)).first() if choice.isdigit() else None
    try:
        # A savepoint: the one-active-per-incident constraint refusing it must not undo
        # the incident change this runs inside.
        with transaction.atomic():
            room = incident_room(incident)
            investigation = Investigation.objects.create(
                incident=incident,
                room=room,
                connection=connection,
                model=(connection.model if connection else "")[:200],
                started_by=actor.label[:150],
                budget=budget_now(),
            )
    except IntegrityError:
        return None
    publish_status(investigation)
    name = f"@{connection.name}" if connection else None
    post_notice(
        room,
        wording.queued(investigation.pk, incident.identifier, name, actor.label),
        investigation=investigation.pk,
    )
    record_audit(
        actor,
        "investigations.start",
        target=incident,
        after={
            "investigation": investigation.pk,
            "connection": connection.pk if connection else None,
            "budget": investigation.budget,
        },
    )
    return investigation


@action("investigations.start")
def check_start_investigation(*, actor: Actor, incident_id: Any) -> Investigation:
    """Ask the investigator to look at an open incident again (write)."""
    require_perm(actor, "operate")
    with transaction.atomic():
        pk = as_id(incident_id)
        incident = Incident.objects.select_for_update().filter(pk=pk).first() if pk else None
        if incident is None:
            raise NotFound(_("No such incident."), code="incident_not_found")
        if incident.status != Incident.OPEN:
            raise Conflict(_("This incident is closed."), code="incident_not_open")
        if investigator_setting() == OFF:
            raise Conflict(
                _("No investigator is set (setting ai.incident_investigator)."),
                code="investigator_off",
            )
        if Investigation.objects.filter(incident=incident, status__in=Investigation.ACTIVE):
            raise Conflict(
                _("An investigation of this incident is already running."),
                code="investigation_running",
            )
        found = do_queue_investigation(actor, incident)
        if found is None:
            raise Conflict(
                _("An investigation of this incident is already running."),
                code="investigation_running",
            )
        return found


# --- stop -------------------------------------------------------------------------------


@action("investigations.stop")
def check_stop_investigation(*, actor: Actor, investigation_id: Any) -> Investigation:
    """Stop a queued or running investigation (write); what it found so far stays in its
    room, nothing goes to the timeline."""
    require_perm(actor, "operate")
    with transaction.atomic():
        investigation = _load(investigation_id, lock=True)
        if not investigation.active or investigation.stop_requested:
            raise Conflict(
                _("This investigation is not running."), code="investigation_not_running"
            )
        return do_stop_investigation(actor, investigation, reason="stopped by an operator")


def do_stop_investigation(
    actor: Actor, investigation: Investigation, *, reason: str
) -> Investigation:
    """Ask a locked active investigation to stop: a queued one ends now; a running one ends
    at its worker's next check (within a second), which keeps its room as it was."""
    with transaction.atomic():
        investigation.stop_requested = True
        investigation.stopped_by = actor.label[:150]
        fields = ["stop_requested", "stopped_by"]
        if investigation.status == Investigation.QUEUED:
            investigation.status = Investigation.STOPPED
            investigation.reason = reason[:500]
            investigation.finished_at = timezone.now()
            fields += ["status", "reason", "finished_at"]
        investigation.save(update_fields=fields)
        publish_status(investigation)
        post_notice(
            investigation.room,
            wording.stopped(investigation.pk, reason, actor.label),
            investigation=investigation.pk,
        )
        record_audit(
            actor,
            "investigations.stop",
            target=investigation.incident,
            after={"investigation": investigation.pk, "reason": reason[:200]},
        )
    return investigation


def stop_for_closed_incident(incident: Incident, actor_label: str) -> None:
    """A closed incident stops its investigation (inside the close's transaction)."""
    actor = Actor.for_system("system", actor_label or "hal")
    for investigation in Investigation.objects.select_for_update().filter(
        incident=incident, status__in=Investigation.ACTIVE, stop_requested=False
    ):
        do_stop_investigation(actor, investigation, reason="the incident was closed")


# --- the worker's side ------------------------------------------------------------------


def max_running() -> int:
    """HAL_INVESTIGATION_MAX_RUNNING (default 4): investigations running at once across
    every worker (each worker also keeps to `ai.investigation_concurrency`)."""
    return max(1, int(getattr(settings, "HAL_INVESTIGATION_MAX_RUNNING", 4)))


def _serialise_claims() -> None:
    """One claim at a time across workers, for the rest of this transaction: PostgreSQL
    takes a transaction-scoped advisory lock; SQLite's IMMEDIATE transaction already holds
    the database's write lock."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CLAIM_LOCK_KEY])


def claim_next(owner: str) -> int | None:
    """Take the oldest queued investigation for this worker (exactly once); its id — None
    when none is queued or HAL_INVESTIGATION_MAX_RUNNING live runs are going already."""
    now = timezone.now()
    stale = now - timedelta(seconds=float(getattr(settings, "HAL_INVESTIGATION_STALE_SECONDS", 60)))
    with transaction.atomic():
        _serialise_claims()
        # Live runs only: a dead worker's (stale heartbeat) is re-queued by the next round.
        running = Investigation.objects.filter(
            status=Investigation.RUNNING, heartbeat_at__gte=stale
        ).count()
        if running >= max_running():
            return None
        for pk in (
            Investigation.objects.filter(status=Investigation.QUEUED)
            .order_by("id")
            .values_list("pk", flat=True)[:5]
        ):
            won = Investigation.objects.filter(pk=pk, status=Investigation.QUEUED).update(
                status=Investigation.RUNNING,
                owner=owner[:64],
                heartbeat_at=now,
                started_at=now,
                attempts=F("attempts") + 1,
            )
            if won:
                claimed = Investigation.objects.filter(pk=pk).first()
                if claimed is not None:
                    publish_status(claimed)
                return int(pk)
    return None


def heartbeat(investigation_id: int, owner: str) -> bool:
    """Show life; False when it should stop (a stop was asked, or it is no longer ours)."""
    updated = Investigation.objects.filter(
        pk=investigation_id, owner=owner, status=Investigation.RUNNING, stop_requested=False
    ).update(heartbeat_at=timezone.now())
    return bool(updated)


def requeue_stale(max_age_seconds: float) -> list[int]:
    """Running investigations whose worker stopped showing life (a restart): queued again
    once, then failed — a model call is never left half-done and unowned."""
    cutoff = timezone.now() - timedelta(seconds=max_age_seconds)
    out: list[int] = []
    actor = investigator_actor()
    for pk in Investigation.objects.filter(
        status=Investigation.RUNNING, heartbeat_at__lt=cutoff
    ).values_list("pk", flat=True):
        with transaction.atomic():
            inv = Investigation.objects.select_for_update().get(pk=pk)
            if inv.status != Investigation.RUNNING or (
                inv.heartbeat_at and inv.heartbeat_at >= cutoff
            ):
                continue
            if inv.stop_requested:
                do_finish(actor, inv, Investigation.STOPPED, reason="stopped")
            elif inv.attempts >= MAX_ATTEMPTS:
                do_finish(actor, inv, Investigation.FAILED, reason="interrupted twice")
            else:
                inv.status, inv.owner = Investigation.QUEUED, ""
                inv.save(update_fields=["status", "owner"])
                publish_status(inv)
                post_notice(inv.room, wording.interrupted(inv.pk), investigation=inv.pk)
            out.append(pk)
    return out


def record_call(investigation_id: int, call: dict[str, Any]) -> None:
    """Remember one tool call of the investigation (the evidence its summary may cite)."""
    with transaction.atomic():
        inv = Investigation.objects.select_for_update().get(pk=investigation_id)
        inv.calls = [*inv.calls, call]
        inv.save(update_fields=["calls"])


def save_progress(investigation_id: int, rounds: int, usage: dict[str, int]) -> None:
    Investigation.objects.filter(pk=investigation_id).update(rounds=rounds, usage=usage)


def do_finish(
    actor: Actor,
    investigation: Investigation,
    status: str,
    *,
    reason: str = "",
    summary: dict[str, Any] | None = None,
    proposal_ids: list[int] | None = None,
) -> Investigation:
    """End a locked investigation with its outcome (audited; a notice in its room)."""
    with transaction.atomic():
        investigation.status = status
        investigation.reason = reason[:500]
        investigation.finished_at = timezone.now()
        investigation.owner = ""
        fields = ["status", "reason", "finished_at", "owner"]
        if summary is not None:
            investigation.summary = summary
            fields.append("summary")
        if proposal_ids is not None:
            investigation.proposal_ids = proposal_ids
            fields.append("proposal_ids")
        investigation.save(update_fields=fields)
        publish_status(investigation)
        if status != Investigation.DONE:
            post_notice(
                investigation.room,
                wording.ended(investigation.pk, status, reason),
                investigation=investigation.pk,
            )
        record_audit(
            actor,
            "investigations.finish",
            target=investigation.incident,
            result="ok" if status == Investigation.DONE else "failed",
            error_code="" if status == Investigation.DONE else status,
            after={
                "investigation": investigation.pk,
                "status": status,
                "rounds": investigation.rounds,
                "calls": len(investigation.calls),
                "proposals": investigation.proposal_ids,
                "reason": reason[:200],
            },
        )
    return investigation


def concurrency() -> int:
    """How many investigations one worker runs at once (the setting, at least 1)."""
    from hal.actions.settings import get_setting

    return max(1, int(get_setting(CONCURRENCY_SETTING)))


def finish(
    investigation_id: int, status: str, reason: str = "", *, owner: str | None = None
) -> Investigation | None:
    """End a running investigation (a stop, a budget, a failure) unless it has ended — or,
    given its run's claim (`owner`), unless another run has claimed it since."""
    with transaction.atomic():
        inv = Investigation.objects.select_for_update().get(pk=investigation_id)
        if not inv.active:
            return None
        if owner is not None and inv.owner != owner:
            return None  # re-queued (this run looked dead) and now another run's
        if inv.stop_requested and status != Investigation.STOPPED:
            status, reason = Investigation.STOPPED, reason or "stopped"
        return do_finish(investigator_actor(), inv, status, reason=reason)
