"""Alert sources (a bearer token each), alert groups (one incident each) and their alerts."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class AlertSource(models.Model):
    """An Alertmanager or Grafana that may post alerts (sha256 of its token at rest)."""

    ALERTMANAGER = "alertmanager"
    GRAFANA = "grafana"
    KINDS = [ALERTMANAGER, GRAFANA]
    KIND_CHOICES = [(k, k) for k in KINDS]

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, blank=True)
    # The HMAC key (when the source signs its bodies) lives in the vault, owner alertsource:id.
    hmac_required = models.BooleanField(default=False)
    # label value → sev1..sev4, of the label named `severity_label` (empty: the defaults).
    severity_label = models.CharField(max_length=100, default="severity")
    severity_map = models.JSONField(default=dict, blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"alert source {self.name} (…{self.hint})"

    def as_dict(self) -> dict[str, Any]:
        """The API shape (never the hash)."""
        return {
            "id": self.pk,
            "name": self.name,
            "kind": self.kind,
            "hint": self.hint,
            "hmac_required": self.hmac_required,
            "severity_label": self.severity_label,
            "severity_map": dict(self.severity_map or {}),
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "state": "revoked" if self.revoked_at else "active",
        }


class AlertGroup(models.Model):
    """One alert group of a source (Alertmanager's groupKey) and the incident it opened."""

    FIRING = "firing"
    RESOLVED = "resolved"
    STATUS_CHOICES = [(FIRING, FIRING), (RESOLVED, RESOLVED)]

    source = models.ForeignKey(AlertSource, on_delete=models.CASCADE, related_name="groups")
    group_key = models.CharField(max_length=1000)
    # A hash of the key: the unique index (a groupKey may be long; index sizes are bounded).
    key_hash = models.CharField(max_length=64)
    incident = models.ForeignKey(
        "hal.Incident", on_delete=models.SET_NULL, null=True, related_name="alert_groups"
    )
    status = models.CharField(max_length=8, choices=STATUS_CHOICES, default=FIRING)
    # A firing episode: from the first firing notification to "all resolved at the source".
    episode = models.PositiveIntegerField(default=1)
    notifications = models.PositiveIntegerField(default=0)
    # True when this group was folded into a storm incident (not its own).
    folded = models.BooleanField(default=False)
    truncated_alerts = models.PositiveIntegerField(default=0)
    first_seen_at = models.DateTimeField(auto_now_add=True, db_index=True)
    last_seen_at = models.DateTimeField(auto_now=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "key_hash"], name="alerts_group_key_once")
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.group_key[:60]}"


class Alert(models.Model):
    """One alert of a group, by fingerprint: its labels, annotations, state and times."""

    FIRING = "firing"
    RESOLVED = "resolved"
    STATUS_CHOICES = [(FIRING, FIRING), (RESOLVED, RESOLVED)]

    group = models.ForeignKey(AlertGroup, on_delete=models.CASCADE, related_name="alerts")
    fingerprint = models.CharField(max_length=64)
    status = models.CharField(max_length=8, choices=STATUS_CHOICES)
    name = models.CharField(max_length=200, blank=True)  # the alertname label
    labels = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict)
    generator_url = models.CharField(max_length=2000, blank=True)
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    seen = models.PositiveIntegerField(default=1)  # notifications that carried it
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["group", "fingerprint"], name="alerts_fingerprint_once")
        ]

    def __str__(self) -> str:
        return f"{self.name or self.fingerprint} ({self.status})"

    def as_dict(self) -> dict[str, Any]:
        """The API shape of one alert."""
        return {
            "fingerprint": self.fingerprint,
            "name": self.name,
            "status": self.status,
            "labels": dict(self.labels or {}),
            "annotations": dict(self.annotations or {}),
            "generator_url": self.generator_url,
            "starts_at": self.starts_at.isoformat() if self.starts_at else None,
            "ends_at": self.ends_at.isoformat() if self.ends_at else None,
            "seen": self.seen,
        }


class AlertStorm(models.Model):
    """A flood of new groups from one source within the storm window: one incident, a count."""

    source = models.ForeignKey(AlertSource, on_delete=models.CASCADE, related_name="storms")
    incident = models.ForeignKey(
        "hal.Incident", on_delete=models.SET_NULL, null=True, related_name="alert_storms"
    )
    groups = models.PositiveIntegerField(default=0)  # groups folded into it
    alerts = models.PositiveIntegerField(default=0)  # alerts those groups carried
    started_at = models.DateTimeField(auto_now_add=True)
    last_at = models.DateTimeField()

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"storm {self.pk} of {self.source_id}: {self.groups} groups"


class IncidentLook(models.Model):
    """When an operator last caught up on an incident ("Catch me up" starts from there)."""

    incident = models.ForeignKey("hal.Incident", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    looked_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["incident", "user"], name="alerts_look_once")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} looked at {self.incident_id}"


class Postmortem(models.Model):
    """A closed incident's postmortem: drafted by a model, edited and published by people."""

    QUEUED = "queued"
    DRAFTING = "drafting"
    DRAFT = "draft"
    PUBLISHED = "published"
    FAILED = "failed"
    STATUSES = [QUEUED, DRAFTING, DRAFT, PUBLISHED, FAILED]
    STATUS_CHOICES = [(s, s) for s in STATUSES]

    incident = models.OneToOneField(
        "hal.Incident", on_delete=models.CASCADE, related_name="postmortem"
    )
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=QUEUED)
    reason = models.CharField(max_length=500, blank=True)  # why the model's part is missing
    published_version = models.PositiveIntegerField(null=True, blank=True)
    published_by = models.CharField(max_length=150, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"postmortem of {self.incident_id} ({self.status})"

    def latest(self) -> PostmortemVersion | None:
        """The newest version (None while the draft is queued)."""
        return self.versions.order_by("-number").first()


class PostmortemVersion(models.Model):
    """One version of a postmortem's Markdown (the model's draft is version 1); kept forever."""

    MODEL = "model"
    EDIT = "edit"
    KIND_CHOICES = [(MODEL, MODEL), (EDIT, EDIT)]

    postmortem = models.ForeignKey(Postmortem, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=KIND_CHOICES)
    markdown = models.TextField()
    author = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["number"]
        constraints = [
            models.UniqueConstraint(fields=["postmortem", "number"], name="alerts_pm_version_once")
        ]

    def __str__(self) -> str:
        return f"postmortem {self.postmortem_id} v{self.number}"
