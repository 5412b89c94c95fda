"""AI proposals: a model's write or high-risk tool call, waiting for an operator's decision."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Proposal(models.Model):
    """One write/high-risk tool call from a model; runs only after an operator approves it."""

    READ = "read"
    WRITE = "write"
    HIGH_RISK = "high_risk"
    TIER_CHOICES = [(t, t) for t in (WRITE, HIGH_RISK)]

    PENDING = "pending"
    APPROVED = "approved"
    EXECUTING = "executing"
    EXECUTED = "executed"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    STATUS_CHOICES = [
        (s, s)
        for s in (PENDING, APPROVED, EXECUTING, EXECUTED, FAILED, REJECTED, CANCELLED, EXPIRED)
    ]
    # States after which nothing about the proposal changes any more.
    FINAL = (EXECUTED, FAILED, REJECTED, CANCELLED, EXPIRED)

    tool = models.CharField(max_length=64)
    tier = models.CharField(max_length=10, choices=TIER_CHOICES)
    # The confirmation registry's action code of a high-risk tool (e.g. servers.isolate).
    action_code = models.CharField(max_length=80, blank=True)
    arguments = models.JSONField(default=dict)
    arguments_sha256 = models.CharField(max_length=64)
    target_identifier = models.CharField(max_length=255, blank=True)
    impact = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=PENDING, db_index=True)

    # Who asked. Plain ids: the chat models live in another app and may add FKs later.
    connection_id = models.BigIntegerField(null=True, blank=True)
    room_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    message_id = models.BigIntegerField(null=True, blank=True)
    turn_id = models.CharField(max_length=64, blank=True)
    tool_call_id = models.CharField(max_length=128, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    requested_label = models.CharField(max_length=150, blank=True)
    requested_via = models.CharField(max_length=10, blank=True)

    # Who decided, and with which three-step confirmation (high-risk only).
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_label = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.CharField(max_length=500, blank=True)
    confirmation_token = models.CharField(max_length=64, blank=True)

    # The runbook the model said it follows: {"id", "version", "title"} (no FK: hal does
    # not know the runbooks app; the version pins the text the model read).
    runbook = models.JSONField(null=True, blank=True)

    result = models.JSONField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.CharField(max_length=500, blank=True)

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    expires_at = models.DateTimeField()
    executed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"proposal #{self.pk} {self.tool} ({self.status})"

    @property
    def impact_summary(self) -> str:
        """The impact summary in the active language (templates)."""
        from hal.i18n import render

        impact = self.impact or {}
        return render(impact.get("summary_i18n") or impact.get("summary", ""))

    # What the summary view keeps of `impact`: what it is about, not the arguments' content.
    SUMMARY_IMPACT_KEYS = ("summary", "summary_i18n", "subject_type", "subject_id")

    def details_visible_to(self, user: Any) -> bool:
        """May `user` read the arguments, impact details and result?

        Those who may approve this tier, and the operator in whose room it was proposed
        (it is their own conversation); everyone else sees the summary only."""
        if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
            return False
        if self.requested_by_id is not None and self.requested_by_id == user.pk:
            return True
        perm = "hal.operate_high_risk" if self.tier == self.HIGH_RISK else "hal.operate"
        return bool(user.has_perm(perm))

    def as_dict(self, *, details: bool = True) -> dict[str, Any]:
        """The API/WS shape of a proposal (never the confirmation token).

        `details=False` is the summary view for operators who may not approve it: no
        arguments, impact details, result or error message (they can hold room content)."""

        def iso(value: Any) -> str | None:
            return value.isoformat() if value else None

        data: dict[str, Any] = {
            "id": self.pk,
            "tool": self.tool,
            "tier": self.tier,
            "action": self.action_code,
            "arguments": self.arguments,
            "arguments_sha256": self.arguments_sha256,
            "target_identifier": self.target_identifier,
            "impact": self.impact,
            "status": self.status,
            "connection_id": self.connection_id,
            "room_id": self.room_id,
            "message_id": self.message_id,
            "turn_id": self.turn_id or None,
            "tool_call_id": self.tool_call_id or None,
            "requested_by": self.requested_label,
            "requested_via": self.requested_via,
            "decided_by": self.decided_label or None,
            "decided_at": iso(self.decided_at),
            "decision_reason": self.decision_reason,
            "needs_confirmation": self.tier == self.HIGH_RISK,
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
            "executed_at": iso(self.executed_at),
            "result": self.result,
            "error": (
                {"code": self.error_code, "message": self.error_message}
                if self.error_code
                else None
            ),
            "details_visible": details,
            "runbook": self.runbook or None,
        }
        if not details:
            impact = self.impact if isinstance(self.impact, dict) else {}
            data["arguments"] = None
            data["impact"] = {k: impact[k] for k in self.SUMMARY_IMPACT_KEYS if k in impact}
            data["result"] = None
            if data["error"]:
                data["error"] = {"code": self.error_code, "message": ""}
        return data
