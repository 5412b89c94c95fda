"""The sweep of orphaned CLI runs: by recorded pid + start time only, never a recycled pid."""

from __future__ import annotations

import io
import json
import os
import subprocess
import uuid

import pytest

from providers.local_cli import runs
from tests.bounds import WAIT


def sleeper(**env: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["sleep", "300"], start_new_session=True, env={"PATH": os.environ["PATH"], **env}
    )


def write(directory, *, pid: int, start, owner_pid: int, owner_start, session_id: str = ""):
    directory.mkdir(exist_ok=True)
    sid = session_id or str(uuid.uuid4())
    data = {
        "session_id": sid,
        "pid": pid,
        "start": start,
        "boot_id": runs.boot_id(),
        "owner_pid": owner_pid,
        "owner_start": owner_start,
        "state_root": "",
        "private": "",
    }
    (directory / f"{sid}.json").write_text(json.dumps(data))
    return sid


def gone(process: subprocess.Popen) -> bool:
    try:
        process.wait(WAIT)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_a_dead_owners_run_is_killed_by_pid_and_start_time(tmp_path):
    cli = sleeper()
    try:
        start = runs.process_start(cli.pid)
        assert start is not None
        # The owner's recorded start time is not the live process's: that owner is gone.
        me = os.getpid()
        write(tmp_path, pid=cli.pid, start=start, owner_pid=me, owner_start=-1)
        assert runs.sweep_orphans(tmp_path) == 1
        assert gone(cli)
        assert not list(tmp_path.glob("*.json"))
    finally:
        cli.kill()


def test_a_recycled_pid_is_never_killed(tmp_path):
    other = sleeper()  # holds a pid a dead run once had: its start time differs
    try:
        start = runs.process_start(other.pid)
        write(tmp_path, pid=other.pid, start=start - 1, owner_pid=os.getpid(), owner_start=-1)
        assert runs.sweep_orphans(tmp_path) == 1  # the record is swept ...
        assert other.poll() is None  # ... and the unrelated process lives on
        assert not list(tmp_path.glob("*.json"))
    finally:
        other.kill()


def test_a_leftover_mcp_server_is_found_by_the_runs_marker(tmp_path):
    sid = str(uuid.uuid4())
    mcp = sleeper(**{runs.MARKER: sid})  # the CLI itself is already gone
    unrelated = sleeper(**{runs.MARKER: str(uuid.uuid4())})
    try:
        start = runs.process_start(mcp.pid)
        write(
            tmp_path,
            pid=2**22 + 7,
            start=start,
            owner_pid=os.getpid(),
            owner_start=-1,
            session_id=sid,
        )
        assert runs.sweep_orphans(tmp_path) == 1
        assert gone(mcp)
        assert unrelated.poll() is None
    finally:
        mcp.kill()
        unrelated.kill()


def test_another_hosts_run_is_left_alone(tmp_path):
    cli = sleeper()
    try:
        write(tmp_path, pid=cli.pid, start=runs.process_start(cli.pid), owner_pid=1, owner_start=-1)
        (path,) = tmp_path.glob("*.json")
        path.write_text(json.dumps({**json.loads(path.read_text()), "host": "elsewhere"}))
        assert runs.sweep_orphans(tmp_path) == 0
        assert cli.poll() is None and path.exists()
    finally:
        cli.kill()


def test_a_live_owners_run_is_left_alone(tmp_path):
    cli = sleeper()
    try:
        me = os.getpid()
        write(
            tmp_path,
            pid=cli.pid,
            start=runs.process_start(cli.pid),
            owner_pid=me,
            owner_start=runs.process_start(me),
        )
        assert runs.sweep_orphans(tmp_path) == 0
        assert cli.poll() is None
        assert len(list(tmp_path.glob("*.json"))) == 1
    finally:
        cli.kill()


def test_the_worker_sweeps_orphans():
    from hal.hooks import workers as worker_hooks

    assert "providers.local_cli_orphans" in worker_hooks.sweep_names()


@pytest.mark.django_db
def test_chat_recover_kills_the_runs_of_dead_hal_processes(tmp_path, settings):
    from django.core.management import call_command

    settings.DATA_DIR = tmp_path
    cli = sleeper()
    try:
        write(
            runs.runs_dir(),
            pid=cli.pid,
            start=runs.process_start(cli.pid),
            owner_pid=os.getpid(),
            owner_start=-1,
        )
        out = io.StringIO()
        call_command("chat_recover", stdout=out)
        assert gone(cli)
        assert "1 orphaned Claude Code CLI run(s) killed" in out.getvalue()
    finally:
        cli.kill()
