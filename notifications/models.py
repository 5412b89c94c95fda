"""Notification channels, preferences, events and the delivery outbox with its attempts."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models

# Event kinds an operator can switch off one by one (preferences).
PROPOSAL_PENDING = "proposal_pending"
PROPOSAL_EXPIRING = "proposal_expiring"
INCIDENT_OPENED = "incident_opened"
INCIDENT_ESCALATED = "incident_escalated"
INCIDENT_SUMMARY = "incident_summary"
CONNECTION_PAUSED = "connection_paused"
CONNECTION_FAILED = "connection_failed"
REPLY_FAILED = "reply_failed"
EVENT_KINDS = (
    PROPOSAL_PENDING,
    PROPOSAL_EXPIRING,
    INCIDENT_OPENED,
    INCIDENT_ESCALATED,
    INCIDENT_SUMMARY,
    CONNECTION_PAUSED,
    CONNECTION_FAILED,
    REPLY_FAILED,
)


class Channel(models.Model):
    """One operator's way to be reached: an e-mail address or a webhook URL."""

    EMAIL = "email"
    WEBHOOK = "webhook"
    KIND_CHOICES = [(EMAIL, "e-mail"), (WEBHOOK, "webhook")]
    JSON = "json"
    SLACK = "slack"  # Slack/Mattermost-compatible incoming webhook: {"text": …}
    FORMAT_CHOICES = [(JSON, "HAL JSON"), (SLACK, "Slack/Mattermost")]

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_channels"
    )
    kind = models.CharField(max_length=10, choices=KIND_CHOICES)
    name = models.CharField(max_length=60)
    address = models.CharField(max_length=500)  # e-mail address or https URL
    body_format = models.CharField(max_length=10, choices=FORMAT_CHOICES, default=JSON)
    # A digest channel sends at most one message per this many minutes (0: each event).
    digest_minutes = models.PositiveIntegerField(default=0)
    # Verification: only the code's SHA-256 is kept; the code itself went to the address.
    verify_code_sha256 = models.CharField(max_length=64, blank=True)
    verify_sent_at = models.DateTimeField(null=True, blank=True)
    verify_failures = models.PositiveIntegerField(default=0)
    verified_at = models.DateTimeField(null=True, blank=True)
    # The webhook's HMAC key is a vault secret (owner notify_channel:<id>); this is its id.
    secret_id = models.UUIDField(null=True, blank=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner_id", "id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"

    @property
    def verified(self) -> bool:
        return self.verified_at is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "kind": self.kind,
            "name": self.name,
            "address": self.address,
            "format": self.body_format,
            "digest_minutes": self.digest_minutes,
            "verified": self.verified,
            "verified_at": self.verified_at.isoformat() if self.verified_at else None,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


class Preferences(models.Model):
    """An operator's notification preferences: kinds switched off, quiet hours, time zone."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_preferences"
    )
    disabled_kinds = models.JSONField(default=list, blank=True)
    time_zone = models.CharField(max_length=64, default="UTC")
    quiet_start = models.TimeField(null=True, blank=True)  # local time; both or neither
    quiet_end = models.TimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"notification preferences of user {self.user_id}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "disabled_kinds": list(self.disabled_kinds or []),
            "time_zone": self.time_zone,
            "quiet_start": self.quiet_start.strftime("%H:%M") if self.quiet_start else None,
            "quiet_end": self.quiet_end.strftime("%H:%M") if self.quiet_end else None,
        }


class Event(models.Model):
    """Something an operator may need to hear about; written with the event's own rows."""

    kind = models.CharField(max_length=30)
    key = models.CharField(max_length=120, unique=True)  # at most one event per occurrence
    urgent = models.BooleanField(default=False)  # high-risk / sev1-2: through quiet hours
    title = models.CharField(max_length=300)
    text = models.TextField(blank=True)  # nothing secret: an impact line, a status, a reason
    link = models.CharField(max_length=300, blank=True)  # a console path
    # The same title and text as translatable texts (hal.i18n.text: msgid + params), rendered
    # in each recipient's language when sent; `title`/`text` are their English rendering.
    title_i18n = models.JSONField(null=True, blank=True)
    text_i18n = models.JSONField(default=list, blank=True)  # lines: text() dicts or strings
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"

    def title_in(self, lang: str | None = None) -> str:
        """The title in `lang` (None: the active language); English rows stay as written."""
        from hal.i18n import render

        # strip: a proposal with no target leaves a trailing space after its tool's name
        return render(self.title_i18n, lang).strip() if self.title_i18n else self.title

    def text_in(self, lang: str | None = None) -> str:
        """The text in `lang` (None: the active language), line by line."""
        from hal.i18n import render

        if not self.text_i18n:
            return self.text
        return "\n".join(render(line, lang) for line in self.text_i18n)[:2000]


class Delivery(models.Model):
    """The outbox: one event to one channel, sent by the worker exactly once if it can."""

    PENDING = "pending"
    HELD = "held"  # quiet hours or a digest window: waits until next_attempt_at
    SENT = "sent"
    FAILED = "failed"  # gave up after the last retry
    STATUS_CHOICES = [(s, s) for s in (PENDING, HELD, SENT, FAILED)]
    OPEN = (PENDING, HELD)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(db_index=True)
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["event", "channel"], name="notifications_one_delivery_per_event_channel"
            )
        ]

    def __str__(self) -> str:
        return f"delivery {self.uuid} ({self.status})"


class Attempt(models.Model):
    """One try at sending a message (one delivery, or a digest of several)."""

    deliveries = models.ManyToManyField(Delivery, related_name="attempt_rows")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="attempts")
    message_key = models.UUIDField()  # X-HAL-Delivery / Message-ID: the same on every retry
    worker = models.CharField(max_length=64)
    ok = models.BooleanField(default=False)
    detail = models.CharField(max_length=500, blank=True)  # "250 OK", "HTTP 500", an error
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"attempt {self.pk} ({'ok' if self.ok else 'failed'})"
