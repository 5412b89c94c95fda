#!/usr/bin/env python3
"""Just enough systemd for running docs/deploy.md's commands in a test namespace.

Wrapped on PATH as `systemctl`, `systemd-run` and `apt-get` (the name is argv[1]):

- `systemctl daemon-reload | enable [--now] | disable [--now] | start | stop | restart |
  is-active [--quiet] UNIT…` reads /etc/systemd/system/<unit> (templates: `name@.service`
  with %i) and runs Type=simple services the way the unit says: ExecStartPre in the
  foreground, ExecStart in the background, as User/Group, in WorkingDirectory, with
  Environment= then EnvironmentFile= and UMask=. Stop sends SIGTERM and waits.
- `systemctl reload UNIT…` runs the unit's ExecReload (the distribution's units under
  /lib/systemd/system too: `systemctl reload nginx` reloads the system's nginx).
- `systemd-run … -p Key=Value … CMD…` (deploy/hal-manage) runs CMD in the foreground the
  same way.
- `apt-get install PKG…` checks the packages are installed (no network in tests).

PYTHONPATH is passed through when set; the deploy tests' harnesses do not set it (the
release venvs are installed from the artifact's wheelhouse, as on a host).
"""

from __future__ import annotations

import configparser
import os
import pwd
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

UNITS = Path("/etc/systemd/system")
STATE = Path(os.environ.get("FAKE_SYSTEMD_STATE", "/run/fake-systemd"))


def env_file(path: str) -> dict[str, str]:
    optional = path.startswith("-")
    path = path.lstrip("-")
    env = {}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        if optional:
            return {}
        raise
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def run_spec(props: dict[str, str]) -> dict:
    """Popen keyword arguments for a service's properties."""
    user = pwd.getpwnam(props.get("User", "root"))
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "HOME": user.pw_dir,
        "USER": user.pw_name,
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    for item in shlex.split(props.get("Environment", "")):
        key, _, value = item.partition("=")
        env[key] = value
    if "EnvironmentFile" in props:
        env.update(env_file(props["EnvironmentFile"]))
    return {
        "user": user.pw_uid,
        "group": user.pw_gid,
        "extra_groups": [],
        "umask": int(props.get("UMask", "0022"), 8),
        "cwd": props.get("WorkingDirectory", user.pw_dir),
        "env": env,
    }


def unit_file(name: str) -> tuple[Path, str]:
    if "." not in name:
        name += ".service"
    path = UNITS / name
    instance = ""
    if "@" in name and not path.exists():
        prefix, rest = name.split("@", 1)
        instance = rest.rsplit(".", 1)[0]
        path = UNITS / f"{prefix}@.{name.rsplit('.', 1)[1]}"
    return path, instance


def service(name: str) -> tuple[str, dict[str, str]] | None:
    path, instance = unit_file(name)
    if path.suffix != ".service":
        return None  # timers: enabling one is all the docs do
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(path.read_text().replace("%i", instance))
    return path.stem.replace("@", f"@{instance}") if instance else path.stem, dict(
        parser["Service"]
    )


def pidfile(unit: str) -> Path:
    return STATE / f"{unit}.pid"


def running(unit: str) -> int | None:
    try:
        pid = int(pidfile(unit).read_text())
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError):
        return None
    return None if state == "Z" else pid


def start(name: str) -> int:
    found = service(name)
    if found is None:
        return 0
    unit, props = found
    if running(unit):
        return 0
    spec = run_spec(props)
    STATE.mkdir(parents=True, exist_ok=True)
    log = open(STATE / f"{unit}.log", "ab")
    for key in ("ExecStartPre", "ExecStart"):
        if key not in props:
            continue
        argv = shlex.split(props[key])
        if key == "ExecStartPre":
            done = subprocess.run(argv, stdout=log, stderr=log, check=False, **spec)
            if done.returncode != 0:
                print(f"{unit}: ExecStartPre failed ({done.returncode})", file=sys.stderr)
                return 1
        else:
            proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True, **spec)
            pidfile(unit).write_text(str(proc.pid))
    return 0


def stop(name: str) -> int:
    found = service(name)
    if found is None:
        return 0
    unit, props = found
    pid = running(unit)
    if pid is None:
        return 0
    os.kill(pid, signal.SIGTERM)  # KillMode=mixed: the main process first
    started = time.monotonic()
    deadline = started + float(props.get("TimeoutStopSec", "90"))
    while running(unit) and time.monotonic() < deadline:
        time.sleep(0.1)
    killed = running(unit) is not None
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    # Gone before `stop` returns, as systemd waits: a `restart` that found the killed
    # process still in the process table would not start the new one.
    gone_by = time.monotonic() + 30
    while running(unit) and time.monotonic() < gone_by:
        time.sleep(0.05)
    # How long each stop took, and whether it needed the SIGKILL (the deploy tests report it).
    with open(STATE / "stops.log", "a") as log:
        log.write(f"{unit} {time.monotonic() - started:.2f}s{' SIGKILL' if killed else ''}\n")
    return 0


def reload(name: str) -> int:
    """ExecReload of the unit, as root (the distribution's nginx.service: `nginx -s reload`)."""
    if "." not in name:
        name += ".service"
    for directory in (UNITS, Path("/lib/systemd/system")):
        if (directory / name).exists():
            parser = configparser.ConfigParser(strict=False, interpolation=None)
            parser.optionxform = str
            parser.read_string((directory / name).read_text())
            command = parser["Service"].get("ExecReload")
            if command:
                return subprocess.run(shlex.split(command), check=False).returncode
    print(f"fake systemctl: {name} cannot be reloaded", file=sys.stderr)
    return 1


def systemctl(args: list[str]) -> int:
    quiet = "--quiet" in args or "-q" in args
    now = "--now" in args
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return 1
    verb, units = words[0], words[1:]
    if verb == "daemon-reload":
        return 0
    if verb in ("enable", "disable"):
        return max([(start if verb == "enable" else stop)(u) for u in units if now] or [0])
    if verb == "start":
        return max(start(u) for u in units)
    if verb == "stop":
        return max(stop(u) for u in units)
    if verb == "restart":
        for u in units:
            stop(u)
        return max(start(u) for u in units)
    if verb == "reload":
        return max(reload(u) for u in units)
    if verb == "is-active":
        active = all(running(service(u)[0]) for u in units if service(u))
        if not quiet:
            print("active" if active else "inactive")
        return 0 if active else 3
    print(f"fake systemctl: {verb} is not supported", file=sys.stderr)
    return 1


def systemd_run(args: list[str]) -> int:
    props: dict[str, str] = {}
    rest = list(args)
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag == "-p":
            key, _, value = rest.pop(0).partition("=")
            props[key] = value
    return subprocess.run(rest, check=False, **run_spec(props)).returncode


def apt_get(args: list[str]) -> int:
    packages = [a for a in args[1:] if not a.startswith("-")]
    missing = [
        p
        for p in packages
        if subprocess.run(["dpkg", "-s", p], capture_output=True, check=False).returncode
    ]
    if missing:
        print(f"fake apt-get: not installed: {' '.join(missing)}", file=sys.stderr)
        return 100
    return 0


def main() -> int:
    name, args = sys.argv[1], sys.argv[2:]  # PATH wrappers: exec … fake_systemd.py NAME "$@"
    if name == "systemctl":
        return systemctl(args)
    if name == "systemd-run":
        return systemd_run(args)
    if name == "apt-get":
        return apt_get(args)
    print(f"fake_systemd: unknown name {name}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
