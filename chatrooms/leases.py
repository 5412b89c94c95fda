"""Turn ownership across web processes: each process holds a lease (owner id + heartbeat);
its running turns carry its owner id. A sweep (in every process, and at first use)
interrupts only the turns of owners whose lease expired — a crashed or killed process —
never a live turn of another process, however long its reply takes. The same keeper
listens on the channel layer for control messages (a reset in one process stops the
room's turns running in another).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import socket
import threading
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from chatrooms import liveness
from chatrooms.models import ProcessLease, Turn
from chatrooms.owner import CONTROL_GROUP, OWNER  # re-exported: leases.OWNER is the public name

log = logging.getLogger("hal.chatrooms")

# Set when this process gave its lease up (it is stopping): it is not renewed again.
_released = threading.Event()


def lease_timeout() -> float:
    """Seconds without a heartbeat after which a process counts as dead."""
    return float(getattr(settings, "HAL_CHAT_LEASE_TIMEOUT", 15))


def heartbeat_interval() -> float:
    return float(getattr(settings, "HAL_CHAT_LEASE_HEARTBEAT", lease_timeout() / 3))


def do_heartbeat(owner: str = OWNER) -> None:
    """Renew this process's lease (created on the first beat). After `do_release` (the
    process is stopping) it stays released."""
    if owner == OWNER and _released.is_set():
        return
    now = timezone.now()
    if not ProcessLease.objects.filter(owner=owner).update(heartbeat_at=now):
        ProcessLease.objects.update_or_create(
            owner=owner,
            defaults={
                "host": socket.gethostname()[:255],
                "pid": os.getpid(),
                "pid_space": liveness.pid_space(),
                "pid_start": liveness.own_start(),
                "started_at": now,
                "heartbeat_at": now,
            },
        )


def do_release(owner: str = OWNER) -> bool:
    """A process that stops (SIGTERM) gives its lease up: its turns are any other
    process's — and the next process's, and `chat_recover`'s — at once, not a lease
    timeout later. Its lease is not renewed again."""
    if owner == OWNER:
        _released.set()
    expired = timezone.now() - timedelta(seconds=lease_timeout() + 1)
    return bool(ProcessLease.objects.filter(owner=owner).update(heartbeat_at=expired))


def expired_owners(*, exclude: str = OWNER) -> list[str]:
    """Owners of running turns whose lease expired or who never held one (pre-lease rows
    and processes that died before their first beat are caught by the age rule)."""
    limit = timezone.now() - timedelta(seconds=lease_timeout())
    running = set(
        Turn.objects.filter(status__in=Turn.RUNNING)
        .exclude(owner="")
        .exclude(owner=exclude)
        .values_list("owner", flat=True)
        .distinct()
    )
    if not running:
        return []
    leases = {
        owner: (beat, space, pid, start)
        for owner, beat, space, pid, start in ProcessLease.objects.filter(
            owner__in=running
        ).values_list("owner", "heartbeat_at", "pid_space", "pid", "pid_start")
    }
    dead = {owner for owner, (beat, _space, _pid, _start) in leases.items() if beat < limit}
    # A process of this host's process table that is gone is dead now (a SIGKILL or a
    # crash, then a restart within the lease timeout: chatrooms/liveness.py).
    dead |= {
        owner
        for owner, (_beat, space, pid, start) in leases.items()
        if owner not in dead and liveness.gone(space, pid, start)
    }
    unknown = running - leases.keys()
    if unknown:
        # No lease yet: a process that has just claimed its first turns beats right after;
        # it counts as dead only once its turns are older than the lease timeout.
        recent = set(
            Turn.objects.filter(
                status__in=Turn.RUNNING, owner__in=unknown, updated_at__gte=limit
            ).values_list("owner", flat=True)
        )
        dead |= unknown - recent
    return sorted(dead)


def do_sweep(*, exclude: str = OWNER) -> list[Any]:
    """Interrupt the turns of dead owners (notice + retry each, their turn tokens revoked);
    drop their old leases. A dead owner's queued continuation (a decision recorded, its
    model not called yet) is not interrupted: a live process adopts it (`do_adopt`)."""
    from chatrooms.actions import do_recover_interrupted

    dead = expired_owners(exclude=exclude)
    notices = do_recover_interrupted(owners=dead) if dead else []
    limit = timezone.now() - timedelta(seconds=max(lease_timeout() * 20, 600))
    # A lease whose process still has turns to hand over stays (its owner id must stay
    # known to be judged dead at once; without a lease only the age rule would apply).
    held = Turn.objects.filter(status__in=Turn.RUNNING).values("owner")
    ProcessLease.objects.filter(heartbeat_at__lt=limit).exclude(owner=exclude).exclude(
        owner__in=held
    ).delete()
    return notices


def do_adopt(*, owner: str = OWNER) -> list[int]:
    """The queued continuations of dead owners become `owner`'s; their ids, to start."""
    from chatrooms.actions import do_adopt_continuations

    dead = expired_owners(exclude=owner)
    return do_adopt_continuations(dead, owner=owner) if dead else []


class LeaseKeeper:
    """The process's heartbeat, periodic sweep and control listener (on the loop)."""

    def __init__(self, orchestrator: Any) -> None:
        self.orchestrator = orchestrator
        self.task: asyncio.Task[Any] | None = None
        self.listener: asyncio.Task[Any] | None = None

    def ensure_running(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start (or restart on a new loop: tests run one loop each) both tasks."""
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.task = loop.create_task(self._beat(), context=contextvars.Context())
        if self.listener is None or self.listener.done() or self.listener.get_loop() is not loop:
            self.listener = loop.create_task(self._listen(), context=contextvars.Context())

    async def _beat(self) -> None:
        from hal.db.threads import db

        while True:
            try:
                await db(do_heartbeat)()
                adopted = await db(do_adopt)()
                if adopted:
                    self.orchestrator.start_turns(adopted)
                await db(do_sweep)()
            except Exception:  # a DB hiccup must not end the heartbeat
                log.exception("lease heartbeat failed")
            await asyncio.sleep(heartbeat_interval())

    async def _listen(self) -> None:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is None:
            return
        # The default prefix: channels_redis serves every process-local channel from one
        # receive loop per real channel; a second prefix would starve the consumers.
        channel = await layer.new_channel()
        await layer.group_add(CONTROL_GROUP, channel)
        while True:
            try:
                message = await layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    # The loop is shutting down: redis-py may turn the cancel into a
                    # ConnectionError; listening again would block the shutdown.
                    raise asyncio.CancelledError from None
                log.exception("control channel failed")
                await asyncio.sleep(1)
                continue
            kind = message.get("type")
            if kind == "chat.cancel_room":
                self.orchestrator.cancel_room(int(message["room_id"]))
            elif kind == "chat.snapshot":
                from chatrooms.resume import answer_snapshot

                await answer_snapshot(self.orchestrator, layer, message)


async def broadcast_cancel_room(room_id: int) -> None:
    """Tell every web process (this one included) to stop the room's running turns."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is not None:
        try:
            await layer.group_send(CONTROL_GROUP, {"type": "chat.cancel_room", "room_id": room_id})
        except Exception:
            log.exception("could not broadcast the reset of room %s", room_id)
