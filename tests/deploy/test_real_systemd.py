"""The shipped unit files under the real systemd as PID 1 (issue 42 item 2).

tests/deploy/real_systemd.py boots systemd 252 in namespaces of its own (journald, the
D-Bus system bus), with deploy/systemd/'s console units installed as docs/deploy.md §6
installs them. The release behind /srv/hal/current is a probe (tests/deploy/
sandbox_probe.py, on a venv of the host's /usr/bin/python3) that reports what it got, so
these seconds-long tests show systemd applying each unit's lines for real: User=, the
EnvironmentFile, ExecStartPre, the whole hardening block (read-only /etc /usr /srv,
private /tmp and /dev, no capabilities, no new privileges, the seccomp filter, the
address families), KillMode=mixed on stop, Restart=on-failure, the snapshot timer and
deploy/hal-manage through systemd-run. HAL itself under these units is
tests/deploy/test_layout_e2e.py's (the §6 layout, same machine). Skips, saying why, only
where systemd cannot run as PID 1 (no root, no namespaces, no cgroup2 to delegate).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.bounds import WAIT
from tests.deploy.real_systemd import Machine, unavailable

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("sandbox_probe.py")
UNITS = ("hal-web@.service", "hal-worker.service", "hal-snapshot.service", "hal-snapshot.timer")
PORT = 8001

if reason := unavailable():
    pytestmark = pytest.mark.skip(reason=f"systemd cannot run as PID 1 here: {reason}")

DAPHNE = """import sys
from sandbox_probe import main
sys.exit(main(["daphne", *sys.argv[1:]]))
"""
MANAGE = """import sys
from sandbox_probe import main
sys.exit(main(sys.argv))
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """The machine, with the `hal` user, hal.env, the probe release and the units."""
    work = tmp_path_factory.mktemp("systemd")
    share = work / "share"
    (share / "daphne").mkdir(parents=True)
    (share / "daphne" / "__main__.py").write_text(DAPHNE)
    (share / "manage.py").write_text(MANAGE)
    (share / "sandbox_probe.py").write_text(PROBE.read_text())
    (share / "hal.env").write_text("PROBE_FROM_ENV_FILE=yes\n")
    machine = Machine.boot(work, binds=[f"{REPO}:ro", f"{share}:ro"])
    try:
        script = f"""set -eu
useradd --system --home-dir /var/lib/hal --shell /usr/sbin/nologin hal
install -d -o hal -g hal -m 0700 /var/lib/hal
install -d -m 0755 /srv/hal /etc/hal /srv/hal/releases/probe
install -m 0640 -g hal {share}/hal.env /etc/hal/hal.env
cp -r {share}/daphne {share}/manage.py {share}/sandbox_probe.py /srv/hal/releases/probe/
/usr/bin/python3 -m venv --without-pip /srv/hal/releases/probe/.venv
ln -sfn releases/probe /srv/hal/current
for unit in {" ".join(UNITS)}; do
  install -m 0644 {REPO}/deploy/systemd/$unit /etc/systemd/system/
done
systemctl daemon-reload
echo planted > /tmp/machine-tmp-marker
"""
        machine.run("bash", "-c", script)
        yield machine
    finally:
        machine.close()


def show(host: Machine, unit: str, *props: str) -> dict[str, str]:
    out = host.run("systemctl", "show", unit, *(f"--property={p}" for p in props)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def wait_for(check, what: str):
    """check() until it answers something true; fail after the suite's bound."""
    deadline = time.monotonic() + WAIT
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return value


def web_report(host: Machine, port: int = PORT) -> dict | None:
    done = host.run("curl", "-fsS", f"http://127.0.0.1:{port}/", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def probe_log(host: Machine) -> list[str]:
    done = host.run("cat", "/var/lib/hal/probe.log", check=False)
    return done.stdout.splitlines()


def pid_alive(host: Machine, pid: int) -> bool:
    return host.run("kill", "-0", str(pid), check=False).returncode == 0


def assert_sandboxed(report: dict, host: Machine) -> None:
    """The hardening block of the units, as the process sees it."""
    hal_uid = int(host.run("id", "-u", "hal").stdout)
    assert report["uid"] == hal_uid
    status = report["status"]
    assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0, status
    assert status["NoNewPrivs"] == "1", status
    assert status["Seccomp"] == "2", status  # a filter is installed
    # ProtectSystem=strict + ReadWritePaths=/var/lib/hal; PrivateTmp gives a writable /tmp.
    assert report["write"] == {
        "/etc": "EROFS",
        "/usr": "EROFS",
        "/srv/hal": "EROFS",
        "/var/lib/hal": "ok",
        "/tmp": "ok",
    }, report["write"]
    assert "machine-tmp-marker" not in report["tmp"]  # PrivateTmp=yes
    assert report["root_home"] in {"EACCES", "empty"}  # ProtectHome=yes
    # PrivateDevices=yes: only the pseudo devices, not the machine's /dev.
    machine_dev = set(host.run("ls", "/dev").stdout.split())
    assert set(report["dev"]) < machine_dev or set(report["dev"]) != machine_dev
    assert not {"mem", "kmsg", "loop-control"} & set(report["dev"]), report["dev"]
    # SystemCallFilter=@system-service: swapoff(2) kills the caller (SIGSYS = 31); without
    # the filter it would fail with EPERM (no capability).
    assert report["swapoff"] == -31, report["swapoff"]
    # RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6.
    assert report["AF_NETLINK"] == "EAFNOSUPPORT" and report["AF_PACKET"] == "EAFNOSUPPORT"
    assert report["env"] == {"HAL_PRODUCTION": "1", "PROBE_FROM_ENV_FILE": "yes"}
    assert report["umask"] == "0o77"  # UMask=0077


def test_the_units_load_as_written(host):
    """systemd reads the shipped lines without a warning and with the values they say."""
    verify = host.run("systemd-analyze", "verify", *(f"/etc/systemd/system/{u}" for u in UNITS),
                      check=False)  # fmt: skip
    assert "hal-" not in verify.stderr, verify.stderr
    web = show(host, f"hal-web@{PORT}", "KillMode", "Restart", "RestartUSec", "TimeoutStopUSec",
               "User", "ProtectSystem", "PrivateTmp", "ExecStart")  # fmt: skip
    assert web["KillMode"] == "mixed" and web["Restart"] == "on-failure", web
    assert web["RestartUSec"] == "2s" and web["TimeoutStopUSec"] == "20s", web
    assert web["User"] == "hal" and web["ProtectSystem"] == "strict", web
    assert f"-p {PORT} hal.asgi:application" in web["ExecStart"], web
    worker = show(host, "hal-worker", "KillMode", "Restart", "TimeoutStopUSec")
    assert worker == {"KillMode": "mixed", "Restart": "on-failure", "TimeoutStopUSec": "1min"}


def test_web_unit_runs_in_its_sandbox_and_stops_by_killmode_mixed(host):
    host.run("systemctl", "start", f"hal-web@{PORT}")
    report = wait_for(lambda: web_report(host), f"hal-web@{PORT} to answer")
    assert_sandboxed(report, host)
    assert "manage chat_recover" in " ".join(probe_log(host))  # ExecStartPre ran first
    main_pid = int(show(host, f"hal-web@{PORT}", "MainPID")["MainPID"])
    child = report["child"]
    assert pid_alive(host, child)
    host.run("systemctl", "stop", f"hal-web@{PORT}")
    # KillMode=mixed: SIGTERM to the main process only; the child, still there when the
    # main process exited, got the SIGKILL (it never saw a SIGTERM).
    log = probe_log(host)
    assert f"web@{PORT} {main_pid} SIGTERM" in log, log
    assert f"child {child} SIGTERM" not in log, log
    assert not pid_alive(host, child)
    assert show(host, f"hal-web@{PORT}", "ActiveState")["ActiveState"] == "inactive"
    journal = host.run("journalctl", "--no-pager", "-u", f"hal-web@{PORT}").stdout
    assert f"probe: web on 127.0.0.1:{PORT}" in journal, journal  # stdout into journald
    # systemd's own lines too: the SIGKILL went to the child, after the main process left.
    assert f"Killing process {child} (python) with signal SIGKILL" in journal, journal
    assert f"Stopped hal-web@{PORT}.service" in journal, journal


def test_worker_is_restarted_on_failure_not_on_stop(host):
    host.run("systemctl", "start", "hal-worker")

    def worker_pid() -> int:
        return int(show(host, "hal-worker", "MainPID")["MainPID"])

    first = wait_for(lambda: worker_pid() and host.run(
        "test", "-e", "/var/lib/hal/worker.json", check=False).returncode == 0 and worker_pid(),
        "the worker to start")  # fmt: skip
    report = json.loads(host.run("cat", "/var/lib/hal/worker.json").stdout)
    assert_sandboxed(report, host)
    # A crash (SIGKILL of the main process): Restart=on-failure starts it again.
    host.run("systemctl", "kill", "--kill-whom=main", "--signal=KILL", "hal-worker")
    second = wait_for(
        lambda: (pid := worker_pid()) not in (0, first) and pid,
        "the worker to be restarted",
    )
    assert show(host, "hal-worker", "NRestarts")["NRestarts"] == "1"
    assert second != first
    # The crashed process's child went with its cgroup before the restart.
    assert not pid_alive(host, report["child"])
    host.run("systemctl", "stop", "hal-worker")
    # A stop is no failure: dead, not waiting in auto-restart for RestartSec.
    state = show(host, "hal-worker", "ActiveState", "SubState", "Result")
    assert state == {"ActiveState": "inactive", "SubState": "dead", "Result": "success"}, state


def test_failing_exec_start_pre_keeps_the_web_unit_down(host):
    host.run("touch", "/var/lib/hal/fail-start")
    try:
        done = host.run("systemctl", "start", "hal-web@8002", check=False)
        assert done.returncode != 0
        state = show(host, "hal-web@8002", "ActiveState", "Result")
        assert state["Result"] == "exit-code", state
        assert web_report(host, 8002) is None
    finally:
        host.run("rm", "-f", "/var/lib/hal/fail-start")
        host.run("systemctl", "reset-failed", "hal-web@8002", check=False)


def test_snapshot_timer_is_scheduled_and_starts_the_snapshot(host):
    host.run("systemctl", "enable", "--now", "hal-snapshot.timer")
    timers = host.run("systemctl", "list-timers", "--all", "--no-pager").stdout
    assert "hal-snapshot.timer" in timers and "hal-snapshot.service" in timers, timers
    # OnCalendar=*-*-* 03:15:00 with RandomizedDelaySec=15min (the machine's zone is UTC).
    nxt = show(host, "hal-snapshot.timer", "NextElapseUSecRealtime")["NextElapseUSecRealtime"]
    when = re.search(r"(\d\d):(\d\d):\d\d", nxt)
    assert when and (int(when[1]), int(when[2])) >= (3, 15) and int(when[1]) == 3, nxt
    assert (int(when[1]), int(when[2])) <= (3, 30), nxt
    # The timer starts the shipped oneshot: fire it now through a drop-in (the schedule
    # itself is the unit's; its random delay applies to every trigger, so it goes too), and
    # the snapshot is written under the service's sandbox.
    dropin = "/etc/systemd/system/hal-snapshot.timer.d"
    # (AccuracySec: systemd may otherwise coalesce the wake-up anywhere within a minute.)
    now = "[Timer]\\nOnActiveSec=1\\nRandomizedDelaySec=0\\nAccuracySec=1us\\n"
    host.run("bash", "-c", f"mkdir -p {dropin} && printf '{now}' "
             f"> {dropin}/now.conf && systemctl daemon-reload && systemctl restart "
             "hal-snapshot.timer")  # fmt: skip

    def finished() -> dict[str, str] | None:
        props = ("ActiveState", "Result", "ExecMainExitTimestampMonotonic")
        state = show(host, "hal-snapshot.service", *props)
        done = state["ActiveState"] == "inactive" and state[props[2]] != "0"
        return state if done else None

    result = wait_for(finished, "the timer to run hal-snapshot.service to its end")
    assert result["Result"] == "success", result
    found = host.run("bash", "-c", "ls /var/lib/hal/snapshots/*/report.json").stdout.split()
    assert_sandboxed(json.loads(host.run("cat", found[0]).stdout), host)
    host.run("bash", "-c", f"rm -r {dropin} && systemctl daemon-reload")


def test_hal_manage_runs_through_systemd_run_in_the_same_sandbox(host):
    """deploy/hal-manage as written: systemd-run over D-Bus, --pipe --wait."""
    done = host.run(f"{REPO}/deploy/hal-manage", "report")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert_sandboxed(report, host)
    assert "run-u" in report["cgroup"]  # a transient unit of its own


def test_commands_run_inside_the_root(host):
    """`Machine.run` enters the root and its working directory (ship.py calls getcwd)."""
    done = host.run("/usr/bin/python3", "-c", "import os; print(os.getcwd())")
    assert done.stdout == "/\n"
