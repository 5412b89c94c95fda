"""Whether a lease's process is gone, seen from the process table it ran in.

A process's lease (chatrooms.leases) names its pid, the pid's process table (the boot id
and the pid namespace: two containers on one host share the boot but not the table) and
the process's start time in that table. A process reading the same table knows for sure
that a leased process is dead when its pid no longer names a process that started at that
time — a SIGKILL, a crash, a restart within the lease timeout — without waiting for the
lease to expire. A lease from another table (another host, another container) is judged
by its heartbeat alone.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from chatrooms import integration


@functools.cache
def pid_space() -> str:
    """This process's table: boot id and pid namespace ('' when /proc does not say)."""
    boot = ""
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    namespace = ""
    with contextlib.suppress(OSError):
        namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    return f"{boot}:{namespace}" if boot and namespace else ""


def own_start() -> int | None:
    """This process's start time in its table (clock ticks after boot)."""
    return integration.process_start(os.getpid())


def gone(space: str, pid: int, start: int | None) -> bool:
    """True only when certain: the lease's process ran in this table and is not there."""
    if not space or space != pid_space() or pid <= 0 or start is None:
        return False
    return not integration.process_alive(pid, start)
