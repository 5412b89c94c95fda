"""The fleet: servers and their agents, metrics, modules, releases, deployments and jobs."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

DEFAULT_AGENT_STALE_SECONDS = 90


def agent_stale_seconds() -> int:
    """Seconds without a heartbeat after which an approved server counts as unreachable."""
    return int(getattr(settings, "HAL_AGENT_STALE_SECONDS", DEFAULT_AGENT_STALE_SECONDS))


# Every MCP bearer (personal and per-turn) starts with it, so a log line or a scanner can
# tell one at sight and the server rejects anything else before a query.
MCP_TOKEN_PREFIX = "hal-mcp-"


def hash_token(raw: str) -> str:
    """The stored form of a token (high-entropy random tokens: a plain sha256 suffices)."""
    return hashlib.sha256(raw.encode()).hexdigest()


class Server(models.Model):
    """One machine of the fleet, identified by its hostname; soft-deleted to keep history."""

    PENDING = "pending"
    ACTIVE = "active"
    MAINTENANCE = "maintenance"
    ISOLATED = "isolated"
    UNREACHABLE = "unreachable"  # derived on read, never stored
    DELETED = "deleted"
    STORED_STATUSES = [(s, s) for s in (PENDING, ACTIVE, MAINTENANCE, ISOLATED, DELETED)]
    # Statuses whose agent is expected to report; silence turns them `unreachable`.
    MONITORED = (ACTIVE, MAINTENANCE)

    hostname = models.CharField(max_length=253)
    address = models.CharField(max_length=255, blank=True)
    description = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=12, choices=STORED_STATUSES, default=PENDING)
    status_reason = models.CharField(max_length=500, blank=True)
    agent_version = models.CharField(max_length=40, blank=True)
    facts = models.JSONField(default=dict, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    registered_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.CharField(max_length=150, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["hostname"]
        constraints = [
            # A deleted server keeps its row (audit history) but frees its hostname.
            models.UniqueConstraint(
                fields=["hostname"], condition=~Q(status="deleted"), name="server_hostname_live"
            )
        ]

    def __str__(self) -> str:
        return self.hostname

    def heartbeat_age(self, now: datetime | None = None) -> float | None:
        """Seconds since the last heartbeat, or None if the agent never reported."""
        if self.last_heartbeat_at is None:
            return None
        return ((now or timezone.now()) - self.last_heartbeat_at).total_seconds()

    def effective_status(self, now: datetime | None = None) -> str:
        """The honest status: an approved server whose agent went silent is `unreachable`."""
        if self.status in self.MONITORED:
            age = self.heartbeat_age(now)
            if age is None or age > agent_stale_seconds():
                return self.UNREACHABLE
        return self.status

    def as_dict(self, now: datetime | None = None) -> dict:
        """Return the API shape of this server."""
        age = self.heartbeat_age(now)
        return {
            "id": self.pk,
            "hostname": self.hostname,
            "address": self.address,
            "description": self.description,
            "status": self.effective_status(now),
            "stored_status": self.status,
            "status_reason": self.status_reason,
            "agent_version": self.agent_version,
            "last_heartbeat_at": self.last_heartbeat_at.isoformat()
            if self.last_heartbeat_at
            else None,
            "heartbeat_age_seconds": round(age, 1) if age is not None else None,
            "created_at": self.created_at.isoformat(),
            "approved_at": self.approved_at.isoformat() if self.approved_at else None,
            "approved_by": self.approved_by,
            "deleted_at": self.deleted_at.isoformat() if self.deleted_at else None,
        }


class EnrolmentToken(models.Model):
    """A one-time token with which a new node agent registers its server (stored hashed)."""

    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, blank=True)
    note = models.CharField(max_length=200, blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    server = models.ForeignKey(Server, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"enrolment token {self.hint}"

    def usable(self, now: datetime | None = None) -> bool:
        """Unused and not expired."""
        return self.used_at is None and self.expires_at > (now or timezone.now())

    def as_dict(self) -> dict:
        """API shape: never the token itself, only its hint."""
        return {
            "id": self.pk,
            "hint": self.hint,
            "note": self.note,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "used_at": self.used_at.isoformat() if self.used_at else None,
            "server_id": self.server_id,
        }


class AgentToken(models.Model):
    """The bearer token of one server's agent (stored hashed, shown once, revocable)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="agent_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"agent token {self.hint} of {self.server_id}"


class ServerMetric(models.Model):
    """One heartbeat's metrics of one server (pruned to HAL_METRICS_RETENTION_SECONDS)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="metrics")
    ts = models.DateTimeField(default=timezone.now)
    cpu_percent = models.FloatField()
    memory_percent = models.FloatField()
    memory_used = models.BigIntegerField(default=0)
    memory_total = models.BigIntegerField(default=0)
    disk_percent = models.FloatField()
    disk_used = models.BigIntegerField(default=0)
    disk_total = models.BigIntegerField(default=0)
    load1 = models.FloatField(default=0)
    load5 = models.FloatField(default=0)
    load15 = models.FloatField(default=0)
    uptime_seconds = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-ts"]
        indexes = [models.Index(fields=["server", "-ts"])]

    def __str__(self) -> str:
        return f"metrics of {self.server_id} at {self.ts:%Y-%m-%d %H:%M:%S}"

    def as_dict(self) -> dict:
        """Return the API shape of this sample."""
        return {
            "ts": self.ts.isoformat(),
            "cpu_percent": self.cpu_percent,
            "memory_percent": self.memory_percent,
            "memory_used": self.memory_used,
            "memory_total": self.memory_total,
            "disk_percent": self.disk_percent,
            "disk_used": self.disk_used,
            "disk_total": self.disk_total,
            "load": [self.load1, self.load5, self.load15],
            "uptime_seconds": self.uptime_seconds,
        }


class Module(models.Model):
    """A deployable part of the Suite; its health URL and restart argv are admin-configured."""

    name = models.CharField(max_length=40, unique=True)
    description = models.CharField(max_length=200, blank=True)
    health_check_url = models.CharField(max_length=500, blank=True)
    # argv list run without a shell by the agent; changing it is the high-risk
    # modules.configure, and each restart job keeps its own copy (hal.actions.modules).
    restart_command = models.JSONField(default=list, blank=True)
    last_health_status = models.CharField(max_length=20, blank=True)
    last_health_at = models.DateTimeField(null=True, blank=True)
    last_health_detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def restart_command_sha256(self) -> str:
        """The sha256 a restart job binds to ('' when no command is configured)."""
        from hal.agent.ops import argv_sha256

        return argv_sha256(self.restart_command) if self.restart_command else ""

    def as_dict(self) -> dict:
        """Return the API shape of this module."""
        return {
            "id": self.pk,
            "name": self.name,
            "description": self.description,
            "health_check_url": self.health_check_url,
            "restart_command": self.restart_command,
            "restart_command_sha256": self.restart_command_sha256,
            "last_health_status": self.last_health_status,
            "last_health_at": self.last_health_at.isoformat() if self.last_health_at else None,
            "last_health_detail": self.last_health_detail,
        }


class Release(models.Model):
    """A versioned artifact of a module (sha256 computed on upload); approved before deploy."""

    DRAFT = "draft"
    APPROVED = "approved"
    STATUSES = [(DRAFT, DRAFT), (APPROVED, APPROVED)]

    module = models.ForeignKey(Module, on_delete=models.PROTECT, related_name="releases")
    version = models.CharField(max_length=64)
    artifact_path = models.CharField(max_length=300)  # relative to DATA_DIR/artifacts
    artifact_name = models.CharField(max_length=200, blank=True)
    size = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=STATUSES, default=DRAFT)
    notes = models.CharField(max_length=1000, blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    approved_by = models.CharField(max_length=150, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["module__name", "-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["module", "version"], name="release_module_version")
        ]

    def __str__(self) -> str:
        return f"{self.module.name}@{self.version}"

    @property
    def identifier(self) -> str:
        """The `module@version` an operator retypes to confirm."""
        return f"{self.module.name}@{self.version}"

    def as_dict(self) -> dict:
        """Return the API shape of this release."""
        return {
            "id": self.pk,
            "module": self.module.name,
            "version": self.version,
            "identifier": self.identifier,
            "artifact_name": self.artifact_name,
            "size": self.size,
            "sha256": self.sha256,
            "status": self.status,
            "notes": self.notes,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "approved_by": self.approved_by,
            "approved_at": self.approved_at.isoformat() if self.approved_at else None,
        }


class ModuleDeployment(models.Model):
    """Which release of a module a server should run (desired) and does run (actual)."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="deployments")
    module = models.ForeignKey(Module, on_delete=models.CASCADE, related_name="deployments")
    desired_release = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actual_release = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    previous_release = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["module__name", "server__hostname"]
        constraints = [
            models.UniqueConstraint(fields=["server", "module"], name="deployment_server_module")
        ]

    def __str__(self) -> str:
        return f"{self.module.name} on {self.server.hostname}"

    @property
    def in_sync(self) -> bool:
        """True when the server runs what it should."""
        return self.desired_release_id == self.actual_release_id

    def as_dict(self) -> dict:
        """Return the API shape of this deployment."""

        def ver(release: Release | None) -> str | None:
            return release.version if release else None

        return {
            "id": self.pk,
            "server": self.server.hostname,
            "server_id": self.server_id,
            "module": self.module.name,
            "desired_release": ver(self.desired_release),
            "actual_release": ver(self.actual_release),
            "previous_release": ver(self.previous_release),
            "in_sync": self.in_sync,
            "updated_at": self.updated_at.isoformat(),
        }


class Job(models.Model):
    """One operation run by a server's agent or by HAL's task worker, claimed exactly once."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, STOPPED)]
    FINISHED = (SUCCEEDED, FAILED, CANCELLED, STOPPED)

    DEPLOY = "deploy"
    ROLLBACK = "rollback"
    HEALTH_CHECK = "health_check"
    RESTART = "restart"
    RECONCILE = "reconcile"
    KINDS = [(k, k) for k in (DEPLOY, ROLLBACK, HEALTH_CHECK, RESTART, RECONCILE)]
    # Re-running these after an interruption could half-apply a change twice.
    UNSAFE_TO_AUTO_RETRY = (DEPLOY, ROLLBACK, RESTART, RECONCILE)

    RUNNER_AGENT = "agent"
    RUNNER_HAL = "hal"
    RUNNERS = [(RUNNER_AGENT, RUNNER_AGENT), (RUNNER_HAL, RUNNER_HAL)]

    kind = models.CharField(max_length=20, choices=KINDS)
    runner = models.CharField(max_length=10, choices=RUNNERS, default=RUNNER_AGENT)
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED, db_index=True)
    server = models.ForeignKey(
        Server, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    module = models.ForeignKey(
        Module, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    release = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    params = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    retry_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries"
    )
    reverts = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reverted_by"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_by_label = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=150, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    stop_requested = models.BooleanField(default=False)
    result = models.JSONField(default=dict, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    log_seq = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["server", "status"])]

    def __str__(self) -> str:
        return f"job #{self.pk} {self.kind}"

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED

    def target_label(self) -> str:
        """A short human description of what the job acts on."""
        parts = []
        if self.release_id and self.release is not None:
            parts.append(self.release.identifier)
        elif self.module_id and self.module is not None:
            parts.append(self.module.name)
        if self.server_id and self.server is not None:
            parts.append(str(_("on %(host)s") % {"host": self.server.hostname}))
        return " ".join(parts)

    def as_dict(self) -> dict:
        """Return the API shape of this job."""

        def iso(value: datetime | None) -> str | None:
            return value.isoformat() if value else None

        return {
            "id": self.pk,
            "kind": self.kind,
            "runner": self.runner,
            "status": self.status,
            "server": self.server.hostname if self.server_id and self.server else None,
            "server_id": self.server_id,
            "module": self.module.name if self.module_id and self.module else None,
            "release": self.release.version if self.release_id and self.release else None,
            "release_id": self.release_id,
            "target": self.target_label(),
            "params": self.params,
            "attempts": self.attempts,
            "retry_of": self.retry_of_id,
            "reverts": self.reverts_id,
            "parent": self.parent_id,
            "created_by": self.created_by_label,
            "created_at": iso(self.created_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "claimed_by": self.claimed_by,
            "lease_expires_at": iso(self.lease_expires_at),
            "stop_requested": self.stop_requested,
            "result": self.result,
            "error_code": self.error_code,
            "reason": self.reason,
        }


class JobLogLine(models.Model):
    """One line of a job's log, numbered per job."""

    LEVELS = [(lv, lv) for lv in ("debug", "info", "warning", "error")]

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="log_lines")
    seq = models.PositiveIntegerField()
    ts = models.DateTimeField(default=timezone.now)
    level = models.CharField(max_length=10, choices=LEVELS, default="info")
    text = models.CharField(max_length=2000)

    class Meta:
        ordering = ["job", "seq"]
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="joblog_job_seq")]

    def __str__(self) -> str:
        return f"{self.job_id}#{self.seq} {self.text[:40]}"

    def as_dict(self) -> dict:
        """Return the API/WS shape of this line."""
        return {
            "job_id": self.job_id,
            "seq": self.seq,
            "ts": self.ts.isoformat(),
            "level": self.level,
            "text": self.text,
        }


def lease_deadline(seconds: int | None = None) -> datetime:
    """When a claim taken now expires unless renewed."""
    lease = seconds or int(getattr(settings, "HAL_JOB_LEASE_SECONDS", 120))
    return timezone.now() + timedelta(seconds=lease)
