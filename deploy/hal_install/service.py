"""Running the release's manage.py (as the service user) and restarting the services."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import pwd
import shlex
import subprocess
from pathlib import Path

from .errors import InstallError, say
from .health import alive_check, wait_healthy, wait_worker

UNTRUSTED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PIP_")


class Runner:
    """Runs the release's manage.py (as --user, with the env file) and the restart command."""

    def __init__(self, env_file_values: dict[str, str], user: str | None) -> None:
        # As the systemd units do (Environment=HAL_PRODUCTION=1); hal.env may not unset it.
        # Nothing from the caller's environment decides which code runs: no PYTHONPATH
        # (the venv's own packages only) and no pip settings (the wheelhouse only).
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(UNTRUSTED_ENV)}
        self.env = {**inherited, **env_file_values, "HAL_PRODUCTION": "1"}
        try:
            self.user = pwd.getpwnam(user) if user else None
        except KeyError as exc:
            raise InstallError(f"no such user: {user}") from exc
        self.last_output = ""

    def run(
        self,
        argv: list[str],
        cwd: Path,
        *,
        as_user: bool = True,
        umask: int | None = None,
        quiet: bool = False,
        **extra_env: str,
    ) -> str:
        """Run argv, echo its output (unless quiet), raise InstallError on a non-zero exit."""
        env = {**self.env, **extra_env}
        # The service's steps (migrate, dr_snapshot, check) write the data dir: the units'
        # umask, so the database and snapshots are 0600. Root's own steps build the
        # release, which the service must be able to read.
        if umask is None:
            umask = 0o077 if as_user else 0o022
        kwargs: dict = {"umask": umask}
        if as_user and self.user is not None:
            kwargs.update(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
            env["HOME"] = self.user.pw_dir
        say("$ " + shlex.join(argv))
        try:
            done = subprocess.run(  # noqa: S603 — argv lists, no shell
                argv,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                check=False,
                **kwargs,
            )
        except OSError as exc:  # e.g. the service user cannot execute the interpreter
            raise InstallError(f"{shlex.join(argv[:2])}… could not run: {exc}") from exc
        output = self.last_output = done.stdout.strip()
        if output and not (quiet and done.returncode == 0):
            print("    " + output.replace("\n", "\n    "), flush=True)
        if done.returncode != 0:
            raise InstallError(f"{shlex.join(argv[:4])}… exited {done.returncode}")
        return output

    def manage(
        self,
        release: Path,
        *args: str,
        as_user: bool = True,
        umask: int | None = None,
        **extra_env: str,
    ) -> str:
        """`<release>/.venv/bin/python manage.py …` in the release directory."""
        python = str(release / ".venv" / "bin" / "python")
        argv = [python, "manage.py", *args]
        return self.run(argv, cwd=release, as_user=as_user, umask=umask, **extra_env)

    def restart(self, command: str, timeout: float) -> None:
        """The operator's restart command, split like a shell would, run without one."""
        argv = shlex.split(command)
        say("restart: " + command)
        try:
            done = subprocess.run(  # noqa: S603 — operator-given argv, no shell
                argv, env=dict(os.environ), timeout=timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InstallError(f"restart command failed: {exc}") from exc
        if done.returncode != 0:
            raise InstallError(f"restart command exited {done.returncode}")


def restart_all(
    runner: Runner,
    args: argparse.Namespace,
    version: str,
    *,
    touched: list[str] | None = None,
    only: set[str] | None = None,
) -> None:
    """Restart into the release `current` points at and wait until it answers as `version`.

    With --web-ports (the multi-process layout) the web processes restart one at a time,
    each ready on its own port before the next goes down, so the proxy always has a
    ready upstream; then --restart-cmd (the worker), the read-back of --health-url and
    the restarted worker's own heartbeat. Each unit is added to `touched` before its
    restart (so a rollback restarts only those); `only` limits the restarts to such a list.
    """
    touched = [] if touched is None else touched
    for port in args.web_ports:
        if only is not None and f"web:{port}" not in only:
            continue
        touched.append(f"web:{port}")
        runner.restart(args.restart_web_cmd.format(port=port), args.restart_timeout)
        url = args.web_health_url.format(port=port)
        say(wait_healthy(url, version, args.health_timeout, alive_check(args.alive_cmd, port)))
    worker_since = None
    if args.restart_cmd and (only is None or "restart-cmd" in only):
        touched.append("restart-cmd")
        worker_since = dt.datetime.now(dt.UTC)
        runner.restart(args.restart_cmd, args.restart_timeout)
    alive = None if args.web_ports else alive_check(args.alive_cmd, None)
    say(wait_healthy(args.health_url, version, args.health_timeout, alive))
    if worker_since is not None:
        say(wait_worker(args.health_url, worker_since, args.worker_timeout))
