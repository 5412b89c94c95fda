"""Liveness of background workers, for /api/health."""

from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """The last sign of life of one task-worker process."""

    worker_id = models.CharField(max_length=100, unique=True)
    hostname = models.CharField(max_length=255, blank=True)
    pid = models.IntegerField(default=0)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"worker {self.worker_id}"
