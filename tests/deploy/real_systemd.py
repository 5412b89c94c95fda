"""A host with the real systemd as PID 1, for the deploy tests (issue 42 item 2).

    with Machine.boot(work) as host:
        host.run("systemctl", "start", "hal-worker")

`Machine.boot` prepares a root under `work` and starts systemd 252 as PID 1 of its own
PID, mount, UTS, IPC, network and cgroup namespaces, chrooted into it:

- the machine's `/usr` read-only, `/etc`, `/var`, `/srv` and `/root` as overlays of the
  machine's (the real ones are never written), tmpfs `/run` and `/tmp`, `/dev` bound;
- the root bound onto itself: a unit's `ProtectSystem=` remounts below `/`, which must
  then be a mount point (else the unit fails 226/NAMESPACE);
- a cgroup2 sub-cgroup of its own under the machine's cgroup2 hierarchy, joined before the
  cgroup namespace is made, so systemd's `/sys/fs/cgroup` is that sub-cgroup;
- a loopback of its own (nothing is reachable from outside, the documented ports are free);
- `binds`: paths of the machine (the repository, the test's files) at the same place
  (`PATH:ro` read-only).

systemd boots `hal-host.target` (journald and the D-Bus system bus, for `systemd-run`;
none of the machine's enabled services). Commands run inside with `Machine.run` (nsenter
into every namespace and the root). `close()` powers it off and kills what is left; the
namespaces, mounts and processes end with PID 1, the sub-cgroup is removed.

Run as a script (`python real_systemd.py stage ROOT WORK BINDS…`) it is the stage between
`unshare` and systemd: it makes the mounts and execs systemd.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

SYSTEMD = Path("/lib/systemd/systemd")
TARGET = "hal-host.target"
HOST_TARGET = """[Unit]
Description=HAL test host (systemd as PID 1, journald, D-Bus)
Wants=systemd-journald.service dbus.service
After=systemd-journald.service dbus.service
AllowIsolate=yes
"""
OVERLAYS = ("etc", "var", "srv", "root")
PR_SET_PDEATHSIG = 1


def cgroup2_mount() -> Path | None:
    """Where the machine's cgroup2 hierarchy is mounted (unified or hybrid), or None."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype == "cgroup2":
            return Path(fields[4])
    return None


def own_cgroup() -> str:
    """This process's cgroup2 path ("0::/…")."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return "/"


def unavailable() -> str | None:
    """Why systemd cannot run as PID 1 here (kernel, container, privileges), or None."""
    if os.geteuid() != 0:
        return "needs root (namespaces, mounts, a cgroup of its own)"
    if not SYSTEMD.exists() or not shutil.which("systemctl"):
        return f"{SYSTEMD} is missing (Debian's systemd package)"
    if not shutil.which("nsenter") or not shutil.which("unshare"):
        return "nsenter/unshare (util-linux) are missing"
    mount = cgroup2_mount()
    if mount is None:
        return "no cgroup2 hierarchy mounted: systemd 252 needs one for its own cgroup"
    probe = mount / own_cgroup().lstrip("/") / f"hal-probe-{secrets.token_hex(4)}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return f"cannot make a cgroup2 sub-cgroup ({exc}): the container does not delegate one"
    flags = ["--pid", "--fork", "--mount", "--uts", "--ipc", "--net", "--cgroup"]
    done = subprocess.run(["unshare", *flags, "true"], capture_output=True, text=True)
    if done.returncode != 0:
        return f"the kernel/container refuses new namespaces: {done.stderr.strip()}"
    return None


def sh(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")


def stage(root: Path, work: Path, binds: Sequence[str]) -> None:
    """Inside the new namespaces (PID 1 until the exec): the root's mounts, then systemd."""
    sh("mount", "--make-rprivate", "/")
    root.mkdir(parents=True, exist_ok=True)
    sh("mount", "--bind", str(root), str(root))  # a mount point: ProtectSystem= needs it
    for name in ("bin", "sbin", "lib", "lib64"):
        if Path(f"/{name}").is_symlink():
            (root / name).symlink_to(os.readlink(f"/{name}"))
    for name in ("usr", "proc", "sys", "dev", "run", "tmp", "mnt", "opt", "home"):
        (root / name).mkdir(exist_ok=True)
    sh("mount", "--bind", "/usr", str(root / "usr"))
    sh("mount", "-o", "remount,bind,ro", str(root / "usr"))
    for top in OVERLAYS:
        upper, scratch = work / "overlay" / top / "up", work / "overlay" / top / "work"
        upper.mkdir(parents=True, exist_ok=True)
        scratch.mkdir(parents=True, exist_ok=True)
        (root / top).mkdir(exist_ok=True)
        sh("mount", "-t", "overlay", "overlay", "-o",
           f"lowerdir=/{top},upperdir={upper},workdir={scratch}", str(root / top))  # fmt: skip
    for name in ("opt", "home"):
        sh("mount", "--bind", f"/{name}", str(root / name))
        sh("mount", "-o", "remount,bind,ro", str(root / name))
    sh("mount", "-t", "proc", "proc", str(root / "proc"))
    sh("mount", "-t", "sysfs", "-o", "ro,nosuid,nodev,noexec", "sysfs", str(root / "sys"))
    sh("mount", "-t", "cgroup2", "-o", "nosuid,nodev,noexec", "cgroup2",
       str(root / "sys/fs/cgroup"))  # fmt: skip
    sh("mount", "--rbind", "/dev", str(root / "dev"))
    sh("mount", "-t", "tmpfs", "-o", "mode=0755,nosuid,nodev", "tmpfs", str(root / "run"))
    sh("mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", str(root / "tmp"))
    for bind in binds:
        path, _, mode = bind.partition(":")
        inside = root / path.lstrip("/")
        inside.mkdir(parents=True, exist_ok=True)
        sh("mount", "--bind", path, str(inside))
        if mode == "ro":
            sh("mount", "-o", "remount,bind,ro", str(inside))
    sh("ip", "link", "set", "lo", "up")
    units = root / "etc/systemd/system"
    (units / TARGET).write_text(HOST_TARGET)
    # The machine's /etc/machine-id may be empty in a container: systemd wants one.
    (root / "etc/machine-id").write_text(secrets.token_hex(16) + "\n")
    os.chroot(root)
    os.chdir("/")
    env = {"container": "hal-test", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    os.execve(
        str(SYSTEMD),
        # Its own lines ("Stopping …", "State 'stop-sigterm' timed out") into the journal,
        # where the tests read them.
        [str(SYSTEMD), f"--unit={TARGET}", "--log-target=journal", "--show-status=no"],
        env,
    )


class Machine:
    """systemd as PID 1 in namespaces of its own, booted from a prepared root."""

    def __init__(self, work: Path, proc: subprocess.Popen, cgroup: Path, log: Path) -> None:
        self.work, self.proc, self.cgroup, self.log = work, proc, cgroup, log
        self.root = work / "root"

    @classmethod
    def boot(cls, work: Path, binds: Sequence[str] = (), timeout: float = 120) -> Machine:
        """Prepare the root, start systemd, wait for hal-host.target to be reached."""
        work.mkdir(parents=True, exist_ok=True)
        mount = cgroup2_mount()
        assert mount is not None
        cgroup = mount / own_cgroup().lstrip("/") / f"hal-systemd-{secrets.token_hex(4)}"
        cgroup.mkdir()
        log = work / "systemd.log"

        def join_cgroup() -> None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
            # If the test process dies, unshare dies, and its --kill-child takes systemd
            # (PID 1 of the namespace: every process in it) along.
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

        proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts", "--ipc",
             "--net", "--cgroup", sys.executable, __file__, "stage", str(work / "root"),
             str(work), *binds],
            stdin=subprocess.DEVNULL, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
            preexec_fn=join_cgroup, start_new_session=True,
        )  # fmt: skip
        machine = cls(work, proc, cgroup, log)
        try:
            machine.wait_booted(timeout)
        except BaseException:
            machine.close()
            raise
        return machine

    def pid1(self) -> int | None:
        """systemd's PID as the machine sees it (unshare's child), or None."""
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return None
        pids = children.split()
        return int(pids[0]) if pids else None

    def wait_booted(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"systemd exited {self.proc.returncode}: {self.log_tail()}")
            pid = self.pid1()
            if pid and Path(f"/proc/{pid}/comm").read_text().strip() == "systemd":
                done = self.run("systemctl", "is-active", "--quiet", TARGET, check=False)
                if done.returncode == 0:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{TARGET} not reached within {timeout}s: {self.log_tail()}")

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def nsenter(self) -> list[str]:
        pid = self.pid1()
        if pid is None:
            raise RuntimeError(f"systemd is not running: {self.log_tail()}")
        # `--wd` bare: systemd's own working directory, inside the root (`--wd=/` would be
        # opened before entering it: a directory outside, os.getcwd() fails).
        return ["nsenter", f"--target={pid}", "--mount", "--uts", "--ipc", "--net", "--pid",
                "--cgroup", "--root", "--wd"]  # fmt: skip

    def run(
        self, *argv: str, check: bool = True, timeout: float = 120, **kw
    ) -> subprocess.CompletedProcess:
        """A command inside the machine (root, its root directory, a login's PATH).

        Its output goes through files, not pipes: a daemon it starts (sshd, PostgreSQL)
        keeps its descriptors until the machine stops, and a pipe would wait for that."""
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "LANG": "C.UTF-8", "HOME": "/root", **kw.pop("env", {})}  # fmt: skip
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            code = subprocess.run(
                [*self.nsenter(), *argv], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                timeout=timeout, env=env, check=False, **kw,
            ).returncode  # fmt: skip
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
        done = subprocess.CompletedProcess(argv, code, stdout, stderr)
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
        return done

    def close(self, timeout: float = 60) -> None:
        """Power off (bounded), then kill PID 1 (every process of the namespace goes)."""
        if self.proc.poll() is None and self.pid1():
            try:
                self.run("systemctl", "poweroff", "--no-block", check=False, timeout=timeout)
                self.proc.wait(timeout=timeout)
            except (subprocess.TimeoutExpired, RuntimeError):
                pass
        if self.proc.poll() is None:
            pid = self.pid1()
            if pid:
                os.kill(pid, signal.SIGKILL)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.remove_cgroup()

    def remove_cgroup(self) -> None:
        """The sub-cgroup and what systemd made under it, deepest first (all empty now)."""
        if not self.cgroup.exists():
            return
        for directory, _subdirs, _files in sorted(
            os.walk(self.cgroup), key=lambda entry: -entry[0].count("/")
        ):
            try:
                os.rmdir(directory)
            except OSError:
                pass

    def __enter__(self) -> Machine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__" and sys.argv[1:2] == ["stage"]:
    stage(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])
