"""Three-step confirmation state for high-risk actions (human clicks and AI proposals)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Confirmation(models.Model):
    """One operator's confirmation of one high-risk action with fixed arguments."""

    IMPACT_SHOWN = "impact_shown"
    TARGET_CONFIRMED = "target_confirmed"
    CONSUMED = "consumed"
    CANCELLED = "cancelled"
    STATES = [(s, s) for s in (IMPACT_SHOWN, TARGET_CONFIRMED, CONSUMED, CANCELLED)]

    token = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    operator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    session_key = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=80)
    subject_type = models.CharField(max_length=40)
    subject_id = models.CharField(max_length=64)
    target_identifier = models.CharField(max_length=255)
    params_hash = models.CharField(max_length=64)
    # Set when made for an AI proposal: then it is usable only through that proposal's
    # approve (never the generic execute endpoint, never a direct action call).
    proposal_id = models.BigIntegerField(null=True, blank=True)
    impact = models.JSONField(default=dict)
    state = models.CharField(max_length=20, choices=STATES, default=IMPACT_SHOWN)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    confirmed_at = models.DateTimeField(null=True, blank=True)
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"confirmation {self.action} {self.subject_type}:{self.subject_id} ({self.state})"

    @property
    def impact_summary(self) -> str:
        """The impact summary in the active language (templates)."""
        from hal.i18n import render

        impact = self.impact or {}
        return render(impact.get("summary_i18n") or impact.get("summary", ""))

    @property
    def impact_details(self) -> dict:
        """The impact's details in the active language (templates)."""
        from hal.i18n import localize

        return localize((self.impact or {}).get("details") or {})

    def as_dict(self, *, with_token: bool = True) -> dict:
        """Return the API shape (the identifier to retype is shown with the impact).

        The generic three-step API hands the token to the operator's browser; the proposal
        API never does (`with_token=False`): a proposal's confirmation is spent by its
        approve only."""
        data = {
            "action": self.action,
            "subject_type": self.subject_type,
            "subject_id": self.subject_id,
            "target_identifier": self.target_identifier,
            "impact": self.impact,
            "state": self.state,
            "expires_at": self.expires_at.isoformat(),
        }
        if with_token:
            data["token"] = str(self.token)
        return data
