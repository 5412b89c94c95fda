"""Records of live CLI runs, so a run whose HAL process died can be found and killed.

Each run writes `<runs dir>/<session id>.json` (0600) when it starts and removes it when it
ends: its pid and that process's start time (field 22 of /proc/<pid>/stat, clock ticks
since boot), the boot id, the HAL process that started it (pid + start time), and where
its session files are. `sweep_orphans()` (the worker's sweep and `chat_recover`) kills the
runs whose HAL process is gone — by pid only when the start time still matches, so a
recycled pid is never killed — and the processes carrying the run's marker in their
environment (its MCP server, should the CLI itself be gone), then removes the run's files.

A file, not a database row: a pid means something on one host only, the sweep must run
there anyway, and a run is recorded and removed without a database round trip.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any

from providers.cli_sandbox import cleanup_state

log = logging.getLogger("hal.providers")

# The CLI's environment and its MCP server's carry this, with the run's session id.
MARKER = "HAL_CLI_RUN"


def runs_dir() -> Path:
    """Where this host's run records live (HAL_DATA_DIR/local-cli-runs)."""
    from django.conf import settings

    return Path(settings.DATA_DIR) / "local-cli-runs"


def boot_id() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return ""


def process_start(pid: int) -> int | None:
    """The start time of `pid` (clock ticks after boot), or None when there is no such
    process. Together with the pid it names one process for this boot."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 overall; fields[0] is field 3 (state)
    except (IndexError, ValueError):
        return None


def alive(pid: int, start: int | None) -> bool:
    """Whether the process `pid` that started at `start` still exists (not a zombie)."""
    if start is None or process_start(pid) != start:
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text()
        return state[state.rfind(")") + 2 :][:1] != "Z"
    return False


def record(
    directory: Path, *, session_id: str, pid: int, state_root: str, private: str
) -> Path | None:
    """Write the run's record; None (logged) when the directory cannot be written."""
    me = os.getpid()
    payload = {
        "session_id": session_id,
        "pid": pid,
        "start": process_start(pid),
        "boot_id": boot_id(),
        "host": socket.gethostname(),
        "owner_pid": me,
        "owner_start": process_start(me),
        "state_root": state_root,
        "private": private,
        "created": time.time(),
    }
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = directory / f"{session_id}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh)
        return path
    except OSError:
        log.exception("could not record the claude CLI run %s", session_id)
        return None


def forget(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def _marked(marker: bytes, since: int | None) -> list[int]:
    """Pids whose environment holds `marker` and that started at or after `since`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            start = process_start(pid)
            if start is not None and (since is None or start >= since):
                found.append(pid)
    return found


def kill_run(data: dict[str, Any]) -> int:
    """Kill what is left of one recorded run; the number of processes signalled."""
    killed = 0
    if data.get("boot_id") == boot_id():
        pid, start = int(data.get("pid") or 0), data.get("start")
        if pid > 1 and alive(pid, start):
            # The CLI leads its own process group (start_new_session): its MCP server too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
                killed += 1
        marker = f"{MARKER}={data.get('session_id')}".encode()
        for other in _marked(marker, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(other, signal.SIGKILL)
                killed += 1
    session_id = str(data.get("session_id") or "")
    if session_id and data.get("state_root"):
        cleanup_state(str(data["state_root"]), session_id=session_id, pid=data.get("pid"))
    private = str(data.get("private") or "")
    if private and Path(private).name.startswith("hal-cli-"):
        shutil.rmtree(private, ignore_errors=True)
    return killed


def sweep_orphans(directory: Path | None = None) -> int:
    """Kill and clean up every recorded run whose HAL process is gone; the runs swept."""
    directory = directory or runs_dir()
    swept = 0
    with contextlib.suppress(OSError):
        for path in sorted(directory.glob("*.json")):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(data, dict):
                continue
            if data.get("host", socket.gethostname()) != socket.gethostname():
                continue  # a data directory shared with another host: its runs, not ours
            owner_alive = data.get("boot_id") == boot_id() and alive(
                int(data.get("owner_pid") or 0), data.get("owner_start")
            )
            if owner_alive:
                continue
            killed = kill_run(data)
            forget(path)
            swept += 1
            log.warning(
                "claude CLI run %s outlived its HAL process: %d process(es) killed",
                data.get("session_id"),
                killed,
            )
    return swept
