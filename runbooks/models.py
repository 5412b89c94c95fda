"""Runbooks and their immutable versions (title, Markdown body, tags, scopes)."""

from __future__ import annotations

from typing import Any

from django.db import models

SCOPE_KINDS = ("pages", "servers", "modules")


class Runbook(models.Model):
    """A runbook: its current version's fields, copied here for listing and search."""

    title = models.CharField(max_length=200, unique=True)
    body = models.TextField(blank=True)
    tags = models.JSONField(default=list)
    # " tag1 tag2 " lower-cased: a tag filter is a plain LIKE on SQLite and PostgreSQL.
    tags_text = models.CharField(max_length=2000, blank=True)
    scopes = models.JSONField(default=dict)
    version = models.PositiveIntegerField(default=1)
    archived = models.BooleanField(default=False, db_index=True)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title", "id"]

    def __str__(self) -> str:
        return self.title

    @property
    def cite_as(self) -> str:
        """How a model cites this runbook: "title (vN)"."""
        return f"{self.title} (v{self.version})"

    def summary(self) -> dict[str, Any]:
        """The listing shape (no body)."""
        return {
            "id": self.pk,
            "title": self.title,
            "version": self.version,
            "tags": list(self.tags or []),
            "scopes": dict(self.scopes or {}),
            "archived": self.archived,
            "cite_as": self.cite_as,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


class RunbookVersion(models.Model):
    """One immutable version of a runbook; every change adds a new one."""

    runbook = models.ForeignKey(Runbook, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    tags = models.JSONField(default=list)
    scopes = models.JSONField(default=dict)
    author = models.CharField(max_length=150, blank=True)
    note = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["runbook_id", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["runbook", "version"], name="runbook_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.title} (v{self.version})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Versions are history: a model follows "title (vN)" and a proposal cites it.
        if not self._state.adding:
            raise ValueError("runbook versions are immutable")
        super().save(*args, **kwargs)

    def as_dict(self, *, latest_version: int | None = None, archived: bool = False) -> dict:
        """The read shape of one version (API and read_runbook)."""
        return {
            "id": self.runbook_id,
            "title": self.title,
            "version": self.version,
            "latest_version": latest_version if latest_version is not None else self.version,
            "body": self.body,
            "tags": list(self.tags or []),
            "scopes": dict(self.scopes or {}),
            "archived": archived,
            "author": self.author,
            "note": self.note,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "cite_as": f"{self.title} (v{self.version})",
        }
