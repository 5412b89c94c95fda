"""Chat rooms, their messages and the model calls (turns) that answer them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from chatrooms.facts import as_fields
from hal import i18n


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


class Room(models.Model):
    """An operator's room (the pinned unified room, one connection's individual room) or the
    shared room of one incident's investigations (no operator: every viewer reads it)."""

    UNIFIED = "unified"
    INDIVIDUAL = "individual"
    INCIDENT = "incident"
    KIND_CHOICES = [(UNIFIED, "unified"), (INDIVIDUAL, "individual"), (INCIDENT, "incident")]
    UNIFIED_TITLE = "Unified"
    TITLE_MAX = 60

    # Null only for an incident room: it belongs to no operator, so no operator's chats
    # (nor their rooms list, search or archive) ever include it.
    operator = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="chat_rooms",
    )
    # The incident whose investigations this room holds (kind "incident" only).
    incident = models.ForeignKey(
        "hal.Incident",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="rooms",
    )
    kind = models.CharField(max_length=12, choices=KIND_CHOICES)
    connection = models.ForeignKey(
        "providers.AIConnection",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="chat_rooms",
    )
    # Empty: the tab follows the connection's name (renaming the connection renames it).
    title = models.CharField(max_length=TITLE_MAX, blank=True)
    position = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["operator"],
                condition=Q(kind="unified"),
                name="chatrooms_one_unified_room_per_operator",
            ),
            models.UniqueConstraint(
                fields=["operator", "connection"],
                condition=Q(kind="individual"),
                name="chatrooms_one_room_per_operator_connection",
            ),
            models.CheckConstraint(
                condition=(Q(kind="unified") & Q(connection__isnull=True))
                | (Q(kind="individual") & Q(connection__isnull=False))
                | (Q(kind="incident") & Q(connection__isnull=True)),
                name="chatrooms_room_kind_matches_connection",
            ),
            models.CheckConstraint(
                condition=(
                    Q(kind="incident") & Q(incident__isnull=False) & Q(operator__isnull=True)
                )
                | (~Q(kind="incident") & Q(incident__isnull=True) & Q(operator__isnull=False)),
                name="chatrooms_room_incident_has_no_operator",
            ),
            models.UniqueConstraint(
                fields=["incident"],
                condition=Q(kind="incident"),
                name="chatrooms_one_room_per_incident",
            ),
        ]

    def __str__(self) -> str:
        return f"room #{self.pk} {self.display_title()}"

    def display_title(self) -> str:
        if self.title:
            return self.title
        if self.kind == self.UNIFIED:
            return self.UNIFIED_TITLE
        if self.kind == self.INCIDENT:
            return f"Incident #{self.incident_id}"
        if self.connection_id and self.connection is not None:
            return self.connection.name
        return f"room {self.pk}"

    def as_dict(self) -> dict[str, Any]:
        """The API shape (SPEC §10)."""
        return {
            "id": self.pk,
            "kind": self.kind,
            "title": self.display_title(),
            "custom_title": bool(self.title),
            "pinned": self.kind == self.UNIFIED,
            "connection_id": self.connection_id,
            **({"incident_id": self.incident_id} if self.kind == self.INCIDENT else {}),
        }


class Message(models.Model):
    """One message in a room: from the operator, a model, or HAL itself (notices)."""

    OPERATOR = "operator"
    MODEL = "model"
    HAL = "hal"
    AUTHOR_CHOICES = [(OPERATOR, "operator"), (MODEL, "model"), (HAL, "hal")]

    STREAMING = "streaming"
    COMPLETE = "complete"
    FAILED = "failed"
    STATUS_CHOICES = [(STREAMING, "streaming"), (COMPLETE, "complete"), (FAILED, "failed")]

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="messages")
    author_kind = models.CharField(max_length=10, choices=AUTHOR_CHOICES)
    author = models.CharField(max_length=150)
    connection = models.ForeignKey(
        "providers.AIConnection",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    text = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=COMPLETE)
    relay_depth = models.PositiveSmallIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.CharField(max_length=500, blank=True)
    # The operator's page and selection when they sent it (data for the system prompt).
    context = models.JSONField(default=dict, blank=True)
    # Connection ids an operator message was addressed to (empty for other authors).
    addressed = models.JSONField(default=list, blank=True)
    # Proposal ids created while writing this reply, and a retryable turn of a failure.
    meta = models.JSONField(default=dict, blank=True)
    reply_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Versions (chatrooms/versions.py, docs/HAL-AI.md): a regenerated reply or an edited
    # operator message shares `version_group` (the first version's id) and `position`
    # (where the group sits in the conversation) with its other versions. A message is
    # shown unless `superseded` in its group or `off_branch` (it answers a version of an
    # edited operator message that is not shown; `branch` names that version).
    version_group = models.BigIntegerField(null=True, blank=True, db_index=True)
    position = models.BigIntegerField(null=True, blank=True)
    superseded = models.BooleanField(default=False)
    off_branch = models.BooleanField(default=False)
    branch = models.BigIntegerField(null=True, blank=True)
    # Nested branches (chatrooms/branches.py): {version group: the version of that edited
    # operator message shown when this message was written}, filled lazily before each
    # edit or switch of the group. `branch` above is its single-group predecessor.
    branch_path = models.JSONField(default=dict, blank=True)
    # Set by "New conversation": the message left the room for the operator's archive
    # (chatrooms/archive.py); the room and the models no longer see it.
    archive = models.ForeignKey(
        "Archive", null=True, blank=True, on_delete=models.CASCADE, related_name="messages"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["room", "id"], name="chatrooms_msg_room_id"),
            # The history query and the listing read only the live conversation: archived
            # rows (up to HAL_CHAT_ARCHIVE_DAYS of them) stay out of their scans.
            models.Index(
                fields=["room", "id"],
                condition=Q(archive__isnull=True),
                name="chatrooms_msg_live",
            ),
        ]

    def __str__(self) -> str:
        return f"message #{self.pk} by {self.author} ({self.status})"

    def as_dict(self) -> dict[str, Any]:
        """The API/WS shape (SPEC §10), plus `error` when failed."""
        data: dict[str, Any] = {
            "id": self.pk,
            "room_id": self.room_id,
            "author_kind": self.author_kind,
            "author": self.author,
            "connection_id": self.connection_id,
            "text": self.text,
            "status": self.status,
            "relay_depth": self.relay_depth,
            "created_at": _iso(self.created_at),
            "reply_to": self.reply_to_id,
        }
        if self.version_group is not None:
            data["version_group"] = self.version_group
            data["position"] = self.position or self.version_group
        if self.author_kind == self.OPERATOR:
            data["addressed"] = list(self.addressed or [])
            data["context"] = self.context or {}
        meta = self.meta or {}
        if self.status == self.FAILED:
            data["error"] = {
                "code": self.error_code,
                "message": self.error_message,
                # Fixed failure reasons are msgids: hal.i18n.localize() translates them
                # for the reader (a provider's own text has no translation and stays).
                "message_i18n": meta.get("error_i18n") or i18n.text(self.error_message),
            }
        if meta.get("text_i18n"):
            # A HAL notice: `text` is English (what models read), this is for operators.
            data["text_i18n"] = meta["text_i18n"]
        if meta.get("attachments"):
            # The files sent with it, by name and hash (chatrooms/files/sending.py).
            data["attachments"] = [
                {**a, "url": f"/api/ai/attachments/{a['id']}"} for a in meta["attachments"]
            ]
        if meta.get("proposals"):
            data["proposal_ids"] = list(meta["proposals"])
        if meta.get("stopped"):
            data["stopped"] = True
        if self.author_kind == self.MODEL:
            data.update(as_fields(meta))
            if meta.get("turn"):
                # Stored when the reply ends; a streaming one gets it from its sender
                # (message.created, chatrooms.stopping.name_turns).
                data["turn_id"] = meta["turn"]
        if meta.get("retry_turn"):
            data["retry_url"] = f"/api/ai/rooms/{self.room_id}/turns/{meta['retry_turn']}/retry"
        return data


class Archive(models.Model):
    """A past conversation of a room, kept read-only for its operator ("New conversation")."""

    operator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_archives"
    )
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="archives")
    room_title = models.CharField(max_length=Room.TITLE_MAX)
    participants = models.JSONField(default=list, blank=True)
    first_line = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # Deleted by its operator: hidden at once, restorable for ARCHIVE_UNDO_SECONDS, then
    # purged (chatrooms/archive.py: on the next access and by the worker's sweep).
    deleted_at = models.DateTimeField(null=True, blank=True, db_index=True)

    def __str__(self) -> str:
        return f"archive #{self.pk} of room #{self.room_id}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "room_id": self.room_id,
            "room_title": self.room_title,
            "participants": list(self.participants or []),
            "first_line": self.first_line,
            "started_at": _iso(self.started_at),
            "archived_at": _iso(self.created_at),
            "url": f"/ai/archive/{self.pk}",
        }


class Turn(models.Model):
    """One model's answer to one message: queued → streaming → complete | failed | ...."""

    QUEUED = "queued"
    STREAMING = "streaming"
    COMPLETE = "complete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    WAITING_APPROVAL = "waiting_approval"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    STATUS_CHOICES = [
        (s, s)
        for s in (
            QUEUED,
            STREAMING,
            COMPLETE,
            FAILED,
            INTERRUPTED,
            WAITING_APPROVAL,
            CANCELLED,
            STOPPED,
        )
    ]
    RUNNING = (QUEUED, STREAMING)
    RETRYABLE = (FAILED, INTERRUPTED)

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="turns")
    connection = models.ForeignKey(
        "providers.AIConnection", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    trigger = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")
    reply = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=QUEUED)
    relay_depth = models.PositiveSmallIntegerField(default=0)
    rounds = models.PositiveSmallIntegerField(default=0)
    # The proposal the turn waits for (the first, when a round made several).
    proposal_id = models.BigIntegerField(null=True, blank=True)
    # This turn's own tool rounds (assistant tool calls and results, provider-neutral JSON)
    # so a turn waiting for approval can resume in any process after the decision.
    transcript = models.JSONField(default=list, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    # An operator asked to stop this turn; the process running it notices (at once when it
    # is this process, within a second otherwise) and keeps the partial reply.
    stop_requested = models.BooleanField(default=False)
    retry_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The web process running it (chatrooms.leases.OWNER) while queued/streaming: only a
    # process whose lease expired loses its turns to a sweep.
    owner = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status"], name="chatrooms_turn_status")]

    def __str__(self) -> str:
        return f"turn #{self.pk} ({self.status})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "room_id": self.room_id,
            "connection_id": self.connection_id,
            "trigger_id": self.trigger_id,
            "reply_id": self.reply_id,
            "status": self.status,
            "relay_depth": self.relay_depth,
            "rounds": self.rounds,
            "proposal_id": self.proposal_id,
            "usage": self.usage or {},
            "error_code": self.error_code,
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
        }


def name_turns(messages: list[dict[str, Any]]) -> None:
    """Every model reply's JSON names its `turn_id` (SPEC §10; stop or retry by turn): an
    ended reply carries it in its meta; the others — streaming, or stored before it was
    kept — are looked up here, in one query."""
    missing = [
        m["id"] for m in messages if m.get("author_kind") == Message.MODEL and "turn_id" not in m
    ]
    if not missing:
        return
    found = dict(Turn.objects.filter(reply_id__in=missing).values_list("reply_id", "pk"))
    for m in messages:
        if m["id"] in found and "turn_id" not in m:
            m["turn_id"] = found[m["id"]]


class ProcessLease(models.Model):
    """A web process that runs turns: its owner id and heartbeat (chatrooms.leases)."""

    owner = models.CharField(max_length=64, primary_key=True)
    host = models.CharField(max_length=255, blank=True)
    pid = models.IntegerField(default=0)
    # The process table the pid belongs to (boot id and pid namespace) and the process's
    # start time in it: a process of the same table whose pid no longer names that
    # process is dead at once, without waiting for its lease to expire (chatrooms.liveness).
    pid_space = models.CharField(max_length=100, blank=True, default="")
    pid_start = models.BigIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"lease {self.owner}"


# Attachments live in their own module (size); imported here so Django registers them.
from chatrooms.attachment_models import Attachment, Blob, Share  # noqa: E402, F401
