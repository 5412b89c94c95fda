"""Operations models: incidents and their timeline, settings, DR snapshots, mail, emergency."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Incident(models.Model):
    """An operational incident: severity, what it affects, open → closed (→ reopened)."""

    SEVERITIES = ["sev1", "sev2", "sev3", "sev4"]
    SEVERITY_CHOICES = [(s, s) for s in SEVERITIES]
    OPEN = "open"
    CLOSED = "closed"
    STATUS_CHOICES = [(OPEN, OPEN), (CLOSED, CLOSED)]

    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    severity = models.CharField(max_length=4, choices=SEVERITY_CHOICES)
    status = models.CharField(max_length=8, choices=STATUS_CHOICES, default=OPEN, db_index=True)
    # Identifiers (server hostnames, module names), not foreign keys: an incident is a
    # historical record and must keep naming what it affected after a server is deleted.
    affected_servers = models.JSONField(default=list, blank=True)
    affected_modules = models.JSONField(default=list, blank=True)
    opened_at = models.DateTimeField(auto_now_add=True, db_index=True)
    opened_by = models.CharField(max_length=150, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.CharField(max_length=150, blank=True)
    resolution = models.TextField(blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"INC-{self.pk} {self.title}"

    @property
    def identifier(self) -> str:
        return f"INC-{self.pk}"

    def as_dict(self, *, timeline: bool = False) -> dict[str, Any]:
        """Return the API shape of this incident (optionally with its timeline)."""
        data: dict[str, Any] = {
            "id": self.pk,
            "identifier": self.identifier,
            "title": self.title,
            "description": self.description,
            "severity": self.severity,
            "status": self.status,
            "affected_servers": list(self.affected_servers or []),
            "affected_modules": list(self.affected_modules or []),
            "opened_at": self.opened_at.isoformat() if self.opened_at else None,
            "opened_by": self.opened_by,
            "closed_at": self.closed_at.isoformat() if self.closed_at else None,
            "closed_by": self.closed_by,
            "resolution": self.resolution,
        }
        if timeline:
            data["timeline"] = [e.as_dict() for e in self.events.order_by("id")]
        return data


class IncidentEvent(models.Model):
    """One entry of an incident's timeline (opened, note, closed, reopened, investigation)."""

    # "investigation": a model's first look at the incident (the investigations app);
    # "alert": what an alert source said about the incident's alerts (the alerts app).
    KINDS = ["opened", "note", "closed", "reopened", "investigation", "alert"]
    KIND_CHOICES = [(k, k) for k in KINDS]

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=KIND_CHOICES)
    text = models.TextField(blank=True)
    # Structured extras of an entry (an investigation's links to the tool results it cites).
    data = models.JSONField(default=dict, blank=True)
    actor_label = models.CharField(max_length=150, blank=True)
    via = models.CharField(max_length=10, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.incident_id}:{self.kind}"

    def as_dict(self) -> dict[str, Any]:
        """The API shape — English, without the stored translations (models read it too)."""
        from hal.i18n import strip

        return {
            "id": self.pk,
            "kind": self.kind,
            "text": self.text,
            "actor": self.actor_label,
            "via": self.via,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            **({"data": strip(self.data)} if self.data else {}),
        }

    @property
    def shown_text(self) -> str:
        """The entry's text for a page, in the active language: HAL's own words translated
        (`data["text_i18n"]`), what an operator or a model wrote kept as written."""
        from django.template.defaultfilters import linebreaksbr
        from django.utils.html import format_html

        from hal.i18n import render_html

        if (self.data or {}).get("text_i18n"):
            return render_html(self.data["text_i18n"])
        return format_html(
            '<span translate="no">{}</span>', linebreaksbr(self.text, autoescape=True)
        )

    @property
    def shown_links(self) -> list[dict[str, Any]]:
        """The entry's links for a page: {url, label} with the label in the active language."""
        from django.utils.html import format_html

        from hal.i18n import render_html

        return [
            {
                "url": link.get("url", ""),
                "label": render_html(link["label_i18n"])
                if link.get("label_i18n")
                else format_html('<span translate="no">{}</span>', link.get("label", "")),
            }
            for link in (self.data or {}).get("links") or []
        ]


class Setting(models.Model):
    """The stored value of one registered setting (absent row → the registry default)."""

    name = models.CharField(max_length=100, unique=True)
    value = models.JSONField(null=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True)

    def __str__(self) -> str:
        return self.name

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            "updated_by": self.updated_by,
        }


class SettingChange(models.Model):
    """One change of a setting: who, when, before/after, why (and its audit row)."""

    name = models.CharField(max_length=100, db_index=True)
    before = models.JSONField(null=True)
    after = models.JSONField(null=True)
    reason = models.CharField(max_length=500, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor_label = models.CharField(max_length=150, blank=True)
    via = models.CharField(max_length=10, blank=True)
    audit = models.ForeignKey(
        "hal.AuditEntry", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.name}: {self.before!r} → {self.after!r}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "name": self.name,
            "before": self.before,
            "after": self.after,
            "reason": self.reason,
            "actor": self.actor_label,
            "via": self.via,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


class Snapshot(models.Model):
    """One DR snapshot: a directory with the database backup and a checksum manifest."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    # Its process stopped before an outcome: past its timeout, or a restore rewound it.
    INTERRUPTED = "interrupted"
    STATUS_CHOICES = [(s, s) for s in (RUNNING, SUCCEEDED, FAILED, INTERRUPTED)]

    name = models.CharField(max_length=64, unique=True)
    status = models.CharField(max_length=16, choices=STATUS_CHOICES, default=RUNNING)
    path = models.CharField(max_length=500)
    method = models.CharField(max_length=30, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    includes_keys = models.BooleanField(default=False)
    error = models.CharField(max_length=500, blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    started_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"snapshot {self.name}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "name": self.name,
            "status": self.status,
            "location": self.path,
            "method": self.method,
            "size_bytes": self.size_bytes,
            "checksum": self.manifest_sha256,
            "includes_keys": self.includes_keys,
            "error": self.error,
            "created_by": self.created_by,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }


class MailCheck(models.Model):
    """One reachability check of the configured SMTP relay (TCP connect, banner, EHLO)."""

    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField()
    ok = models.BooleanField(default=False)
    banner = models.CharField(max_length=500, blank=True)
    ehlo = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    checked_by = models.CharField(max_length=150, blank=True)
    checked_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"mail check {self.host}:{self.port} {'ok' if self.ok else 'failed'}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "host": self.host,
            "port": self.port,
            "ok": self.ok,
            "banner": self.banner,
            "ehlo": self.ehlo,
            "latency_ms": self.latency_ms,
            "error": self.error,
            "checked_by": self.checked_by,
            "checked_at": self.checked_at.isoformat() if self.checked_at else None,
        }


class EmergencyState(models.Model):
    """The emergency-recovery mode flag (a single row, pk=1) with reason and who/when."""

    active = models.BooleanField(default=False)
    reason = models.CharField(max_length=500, blank=True)
    changed_by = models.CharField(max_length=150, blank=True)
    changed_at = models.DateTimeField(null=True, blank=True)
    entered_at = models.DateTimeField(null=True, blank=True)
    entered_by = models.CharField(max_length=150, blank=True)

    def __str__(self) -> str:
        return "emergency: active" if self.active else "emergency: inactive"

    def as_dict(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "reason": self.reason,
            "changed_by": self.changed_by,
            "changed_at": self.changed_at.isoformat() if self.changed_at else None,
            "entered_at": self.entered_at.isoformat() if self.entered_at else None,
            "entered_by": self.entered_by,
        }
