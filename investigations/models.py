"""One investigation of an incident by the investigator model (queued → running → ended)."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q


class Investigation(models.Model):
    """A model's read-only look at one incident, in the incident's room, within a budget."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"  # a summary was posted to the timeline
    STOPPED = "stopped"  # an operator, or the incident's closing, stopped it
    BUDGET = "budget_exceeded"  # tool rounds, tokens or wall time ran out
    FAILED = "failed"  # the model could not be asked (inactive, provider error, restarts)
    STATUS_CHOICES = [(s, s) for s in (QUEUED, RUNNING, DONE, STOPPED, BUDGET, FAILED)]
    ACTIVE = (QUEUED, RUNNING)

    incident = models.ForeignKey(
        "hal.Incident", on_delete=models.CASCADE, related_name="investigations"
    )
    room = models.ForeignKey(
        "chatrooms.Room", on_delete=models.CASCADE, related_name="investigations"
    )
    connection = models.ForeignKey(
        "providers.AIConnection", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=STATUS_CHOICES, default=QUEUED)
    started_by = models.CharField(max_length=150, blank=True)
    # The worker running it and when it last showed life (a restart re-queues a stale one).
    owner = models.CharField(max_length=64, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    stop_requested = models.BooleanField(default=False)
    stopped_by = models.CharField(max_length=150, blank=True)
    # The budget it runs under, copied from the settings when it was queued.
    budget = models.JSONField(default=dict, blank=True)
    rounds = models.PositiveSmallIntegerField(default=0)
    usage = models.JSONField(default=dict, blank=True)
    # The read calls it made: [{"id", "tool", "arguments", "ok", "message_id"}].
    calls = models.JSONField(default=list, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    proposal_ids = models.JSONField(default=list, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            # One investigation per incident at a time.
            models.UniqueConstraint(
                fields=["incident"],
                condition=Q(status__in=["queued", "running"]),
                name="investigations_one_active_per_incident",
            )
        ]
        indexes = [models.Index(fields=["status"], name="investigations_status")]

    def __str__(self) -> str:
        return f"investigation #{self.pk} of INC-{self.incident_id} ({self.status})"

    @property
    def active(self) -> bool:
        return self.status in self.ACTIVE

    def as_dict(self) -> dict[str, Any]:
        """The API shape."""
        from investigations.wording import reason_text

        return {
            "id": self.pk,
            "incident_id": self.incident_id,
            "room_id": self.room_id,
            "connection_id": self.connection_id,
            "model": self.model,
            "status": self.status,
            "started_by": self.started_by,
            "stop_requested": self.stop_requested,
            "stopped_by": self.stopped_by,
            "budget": self.budget,
            "rounds": self.rounds,
            "usage": self.usage,
            "calls": self.calls,
            "summary": self.summary,
            "proposal_ids": self.proposal_ids,
            "reason": self.reason,
            # The reason in each reader's language (hal.i18n.localize; dropped for models).
            "reason_i18n": reason_text(self.reason),
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "url": f"/incidents/{self.incident_id}/room/",
        }
