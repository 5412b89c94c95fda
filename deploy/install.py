#!/usr/bin/env python3
"""Install or upgrade HAL on the ops host from a release artifact, with automatic rollback.

    install.py --artifact-url https://…/hal-<v>.tar.gz --sha256 <hex>   (or --artifact PATH)
               [--root /srv/hal] [--env-file /etc/hal/hal.env] [--user hal]
               [--health-url https://hal.example.org/api/health]
               [--restart-cmd "systemctl restart hal-web hal-worker"] [--keep 5]
               [--allow-untested] [--allow-downgrade]

Order: verify the sha256 → refuse an artifact whose suite did not run (`release.py build
--skip-tests`, or no build record) and a version older than `current` → back up (the
current release's `manage.py dr_snapshot`) → stage `<root>/releases/<v>` (unpack, venv
with the dependencies, migrate, collectstatic, `check --deploy` with the env file loaded)
→ switch `<root>/current` atomically → restart → read back /api/health until it reports
<v>. A failure after the switch switches back to the previous release and restarts again.
Data, config, vault key file and earlier releases are never touched; the oldest releases
beyond --keep are removed.
Standard library only: it runs with the host's python3 before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import hashlib
import ipaddress
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

CHUNK = 1024 * 1024
RECORD = ".hal-release.json"
BUILD_INFO = ".hal-build.json"  # written into the artifact by release.py build
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

EXIT_FAILED = 1  # nothing switched; current release untouched
EXIT_NO_ROLLBACK = 2  # failed after the switch and there was no previous release
EXIT_ROLLED_BACK = 3  # failed after the switch; the previous release is current and healthy
EXIT_ROLLBACK_UNHEALTHY = 4  # rolled back, but the previous release does not answer either


class InstallError(Exception):
    """A refusal or failure; the message is printed and the install stops."""


def say(message: str) -> None:
    """Progress on stdout (flushed: the operator watches it live)."""
    print(f"install: {message}", flush=True)


def shout(message: str) -> None:
    """A failure or rollback report on stderr."""
    print(f"install: {message}", file=sys.stderr, flush=True)


# --- inputs -----------------------------------------------------------------------------


def is_loopback(host: str | None) -> bool:
    """True for localhost and loopback addresses (127/8, ::1)."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, what: str) -> urllib.parse.SplitResult:
    """HTTPS only; plain http is allowed for loopback (tests, daphne behind the proxy)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return parts
    if parts.scheme == "http" and is_loopback(parts.hostname):
        return parts
    raise InstallError(f"{what} must be https:// (plain http only on loopback): {url}")


def load_env_file(path: Path) -> dict[str, str]:
    """Parse a systemd EnvironmentFile the way systemd does, for the manage.py steps.

    systemd keeps an unquoted `value   # comment` whole, so such a line would give the
    services a different value than the comment suggests: it is refused here.
    """
    env: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise InstallError(f"cannot read the env file {path}: {exc}") from exc
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not ENV_KEY.match(key):
            raise InstallError(f"{path}:{number}: not KEY=VALUE: {raw!r}")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif re.search(r"\s#", value):
            raise InstallError(
                f"{path}:{number}: inline comment after {key}= (systemd would keep it in the "
                "value); move the comment to its own line"
            )
        env[key] = value
    return env


PATH_SETTINGS = ("HAL_DATA_DIR", "HAL_SQLITE_PATH", "HAL_VAULT_KEY_FILE")


def check_env(values: dict[str, str]) -> list[str]:
    """Problems in hal.env that would make a production install misbehave (empty: none)."""
    problems = []
    if not values.get("DJANGO_SECRET_KEY"):
        problems.append(
            "DJANGO_SECRET_KEY must be set (python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(50))')"
        )
    if not values.get("HAL_DATA_DIR"):
        problems.append("HAL_DATA_DIR must be set (e.g. /var/lib/hal)")
    for name in PATH_SETTINGS:
        if name not in values:
            continue  # the default, under HAL_DATA_DIR
        value = values[name]
        # Relative (and empty, which settings read as ".") means the service's working
        # directory: the read-only release.
        if not value.startswith("/"):
            problems.append(f"{name}={value} must be an absolute path (or the line removed)")
    if values.get("HAL_PRODUCTION", "1").lower() not in {"1", "true", "yes", "on"}:
        problems.append("HAL_PRODUCTION must be 1 (or absent: the units set it)")
    if values.get("HAL_WEBFETCH_ALLOW_LOOPBACK", "0").lower() in {"1", "true", "yes", "on"}:
        problems.append("HAL_WEBFETCH_ALLOW_LOOPBACK is for tests only")
    if "HAL_STATIC_ROOT" in values:
        problems.append("HAL_STATIC_ROOT: remove the line; the proxy serves current/staticfiles")
    return problems


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, dest: Path, timeout: float = 60.0) -> None:
    """Stream url to dest (certificates verified by the default context; no http redirects)."""
    check_url(url, "artifact URL")
    opener = urllib.request.build_opener(_NoDowngradeRedirects)
    try:
        with opener.open(url, timeout=timeout) as resp, open(dest, "wb") as out:
            while chunk := resp.read(CHUNK):
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        dest.unlink(missing_ok=True)
        raise InstallError(f"download of {url} failed: {exc}") from exc


class _NoDowngradeRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to another URL that passes check_url (never https → http)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        check_url(newurl, "redirect target")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


# --- the artifact -----------------------------------------------------------------------


def artifact_layout(archive: Path) -> tuple[str, str]:
    """Return (version, prefix) from the pyproject.toml at the top of the artifact."""
    with tarfile.open(archive) as tar:
        for member in tar:
            parts = member.name.strip("/").split("/")
            if parts[-1] == "pyproject.toml" and len(parts) <= 2 and member.isfile():
                prefix = parts[0] + "/" if len(parts) == 2 else ""
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                break
        else:
            raise InstallError(f"{archive}: no pyproject.toml at the top of the archive")
    try:
        version = tomllib.loads(data.decode())["project"]["version"]
    except (KeyError, ValueError) as exc:
        raise InstallError(f"{archive}: pyproject.toml has no [project] version") from exc
    if not isinstance(version, str) or not SAFE_NAME.match(version):
        raise InstallError(f"{archive}: version {version!r} is not a safe directory name")
    return version, prefix


def read_build_info(archive: Path, prefix: str) -> dict | None:
    """The artifact's .hal-build.json (None when it was not built by release.py)."""
    with tarfile.open(archive) as tar:
        try:
            member = tar.getmember(prefix + BUILD_INFO)
        except KeyError:
            return None
        data = tar.extractfile(member).read() if member.isfile() else b""  # type: ignore[union-attr]
    try:
        info = json.loads(data)
    except ValueError as exc:
        raise InstallError(f"{archive}: {BUILD_INFO} is not JSON") from exc
    return info if isinstance(info, dict) else None


VERSION_RE = re.compile(
    r"^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?$", re.IGNORECASE
)


def version_key(version: str) -> tuple | None:
    """A sort key for PEP 440 versions of the form 1.2.3[a|b|rcN][.postN][.devN]; else None."""
    match = VERSION_RE.match(version)
    if not match:
        return None
    release, pre, pre_n, post, dev = match.groups()
    numbers = tuple(int(n) for n in release.split("."))
    numbers += (0,) * (8 - len(numbers))  # 1.2 == 1.2.0
    # A pre-release sorts before its release; a dev release before everything of its kind.
    pre_key = ({"a": 0, "b": 1, "rc": 2}[pre.lower()], int(pre_n)) if pre else (3, 0)
    post_key = int(post) if post is not None else -1
    dev_key = int(dev) if dev is not None else float("inf")
    return (numbers, pre_key, post_key, dev_key)


def check_installable(
    version: str, build: dict | None, previous: str | None, args: argparse.Namespace
) -> None:
    """Refuse an untested artifact and a downgrade, unless the operator said otherwise."""
    if build is None or build.get("tested") is not True:
        why = (
            "was built with --skip-tests (NOT A RELEASE)"
            if build is not None
            else f"has no {BUILD_INFO} (not built by release.py build)"
        )
        if not args.allow_untested:
            raise InstallError(
                f"the artifact {why}: its test suite did not run. Build it with "
                "`release.py build`, or pass --allow-untested for a throwaway host"
            )
        say(f"WARNING: installing an artifact that {why} (--allow-untested)")
    if previous is None:
        return
    new, old = version_key(version), version_key(previous)
    if new is not None and old is not None and new > old:
        return
    if args.allow_downgrade:
        say(f"WARNING: {version} is not newer than {previous} (--allow-downgrade)")
        return
    if new is None or old is None:
        raise InstallError(
            f"cannot tell whether {version} is newer than the current {previous}; "
            "pass --allow-downgrade to install it anyway"
        )
    raise InstallError(
        f"{version} is older than the current release {previous}: a downgrade is refused "
        "(the database may already hold newer migrations); pass --allow-downgrade to force it"
    )


def read_dependencies(pyproject: Path) -> list[str]:
    """The [project] dependencies of the release (what its venv needs)."""
    deps = tomllib.loads(pyproject.read_text()).get("project", {}).get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise InstallError(f"{pyproject}: [project] dependencies is not a list of strings")
    return deps


def unpack(archive: Path, prefix: str, dest: Path) -> int:
    """Extract the archive's prefix/ into dest, refusing anything that escapes it."""
    count = 0
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name.lstrip("./") if member.name.startswith("./") else member.name
            if prefix:
                if not name.startswith(prefix):
                    continue
                name = name[len(prefix) :]
            if not name or name == ".":
                continue
            parts = Path(name).parts
            if Path(name).is_absolute() or ".." in parts:
                raise InstallError(f"unsafe path in the artifact: {member.name}")
            if not (member.isfile() or member.isdir() or member.issym()):
                raise InstallError(f"unsupported entry in the artifact: {member.name}")
            if member.issym():
                target = (dest / name).parent / member.linkname
                if Path(member.linkname).is_absolute() or not os.path.normpath(target).startswith(
                    str(dest)
                ):
                    raise InstallError(f"symlink escapes the release: {member.name}")
            member.name = name
            # Whatever the archive says: root-owned, 0755 dirs and executables, 0644 files
            # (tarfile applies the owner only when running as root, as install.py does).
            member.uid = member.gid = 0
            member.uname = member.gname = "root"
            if not member.issym():
                member.mode = 0o755 if member.isdir() or member.mode & 0o111 else 0o644
            if hasattr(tarfile, "data_filter"):
                tar.extract(member, dest, filter="data")
            else:  # an unpatched Python 3.11: the checks above are the filter
                tar.extract(member, dest)
            count += 1
    return count


# --- releases and the current link ------------------------------------------------------


def current_release(root: Path) -> str | None:
    """The version `<root>/current` points at, or None."""
    link = root / "current"
    if not link.is_symlink():
        return None
    return Path(os.readlink(link)).name


def switch_current(root: Path, version: str) -> None:
    """Point `<root>/current` at releases/<version>: a temp symlink renamed over it (atomic)."""
    tmp = root / f".current.{secrets.token_hex(4)}"
    os.symlink(f"releases/{version}", tmp)
    try:
        os.replace(tmp, root / "current")
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _installed_at(release: Path) -> float:
    record = release / RECORD
    return (record if record.exists() else release).stat().st_mtime


def prune_releases(root: Path, keep: int, protect: set[str]) -> list[str]:
    """Remove the oldest releases beyond `keep`; never the current one or those in protect."""
    releases_dir = root / "releases"
    if not releases_dir.is_dir():
        return []
    keep_names = set(protect)
    if current := current_release(root):
        keep_names.add(current)
    releases = sorted(
        (p for p in releases_dir.iterdir() if p.is_dir() and not p.is_symlink()),
        key=_installed_at,
        reverse=True,
    )
    budget = max(keep - len(keep_names), 0)
    removed = []
    for release in releases:
        if release.name in keep_names:
            continue
        if budget > 0:
            budget -= 1
            continue
        shutil.rmtree(release)
        removed.append(release.name)
    return removed


@contextlib.contextmanager
def install_lock(root: Path) -> Iterator[None]:
    """One install at a time per root."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise InstallError(f"another install is running in {root}") from exc
        yield


# --- running things ---------------------------------------------------------------------


class Runner:
    """Runs the release's manage.py (as --user, with the env file) and the restart command."""

    def __init__(self, env_file_values: dict[str, str], user: str | None) -> None:
        # As the systemd units do (Environment=HAL_PRODUCTION=1); hal.env may not unset it.
        self.env = {**os.environ, **env_file_values, "HAL_PRODUCTION": "1"}
        try:
            self.user = pwd.getpwnam(user) if user else None
        except KeyError as exc:
            raise InstallError(f"no such user: {user}") from exc
        self.last_output = ""

    def run(self, argv: list[str], cwd: Path, *, as_user: bool = True, **extra_env: str) -> str:
        """Run argv, echo its output, raise InstallError on a non-zero exit."""
        env = {**self.env, **extra_env}
        # The service's steps (migrate, dr_snapshot, check) write the data dir: the units'
        # umask, so the database and snapshots are 0600. Root's own steps build the
        # release, which the service must be able to read.
        kwargs: dict = {"umask": 0o077 if as_user else 0o022}
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
        if output:
            print("    " + output.replace("\n", "\n    "), flush=True)
        if done.returncode != 0:
            raise InstallError(f"{shlex.join(argv[:4])}… exited {done.returncode}")
        return output

    def manage(self, release: Path, *args: str, as_user: bool = True, **extra_env: str) -> str:
        """`<release>/.venv/bin/python manage.py …` in the release directory."""
        python = str(release / ".venv" / "bin" / "python")
        return self.run([python, "manage.py", *args], cwd=release, as_user=as_user, **extra_env)

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


def read_health(url: str, timeout: float = 5.0) -> tuple[int, dict]:
    """One GET of /api/health: (HTTP status, JSON body). Redirects are not followed."""
    parts = check_url(url, "health URL")
    headers = {"Accept": "application/json", "User-Agent": "hal-install"}
    if parts.scheme == "http":
        # Straight to daphne on loopback: say what the TLS proxy would have said, so a
        # production HAL (SECURE_SSL_REDIRECT) answers instead of redirecting.
        headers["X-Forwarded-Proto"] = "https"
    opener = urllib.request.build_opener(_NoRedirects)
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 — checked above
    try:
        with opener.open(request, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read() or b"{}")
        except ValueError:
            body = {}
        return exc.code, body


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


FAIL_AFTER = 5  # health answered 5xx by HAL this many times in a row: certainly failing


def alive_check(command: str | None, port: int | None) -> Callable[[], bool] | None:
    """The operator's --alive-cmd as a callable (True while the process runs), or None."""
    if not command:
        return None
    argv = shlex.split(command.format(port=port or ""))

    def check() -> bool:
        done = subprocess.run(  # noqa: S603 — operator-given argv, no shell
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
        return done.returncode == 0

    return check


def wait_healthy(
    url: str,
    version: str,
    timeout: float,
    alive: Callable[[], bool] | None = None,
    fail_after: int = FAIL_AFTER,
) -> str:
    """Poll /api/health until it answers 200, status ok and this version; else raise.

    Gives up before the timeout as soon as failure is certain: the process exited (the
    alive check fails) or HAL itself answered 5xx `fail_after` times in a row. A 502/504
    is the proxy saying nothing answers yet, which the timeout covers.
    """
    deadline = time.monotonic() + timeout
    last = "no answer"
    failures = 0
    while True:
        try:
            status, body = read_health(url)
            last = f"HTTP {status}, status {body.get('status')!r}, version {body.get('version')!r}"
            if status == 200 and body.get("status") == "ok" and body.get("version") == version:
                return f"health OK: version {version} ({url})"
            failures = failures + 1 if status >= 500 and status not in (502, 504) else 0
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = f"no answer ({exc})"
            failures = 0
        if failures >= fail_after:
            raise InstallError(f"{url} answered {last} {failures} times in a row")
        if alive is not None and not alive():
            raise InstallError(f"the process exited (alive check failed); last health: {last}")
        if time.monotonic() >= deadline:
            raise InstallError(f"{url} did not report version {version} healthy: {last}")
        time.sleep(0.5)


def restart_all(runner: Runner, args: argparse.Namespace, version: str) -> None:
    """Restart into the release `current` points at and wait until it answers as `version`.

    With --web-ports (the multi-process layout) the web processes restart one at a time,
    each waited for on its own port before the next goes down, so the proxy always has a
    healthy upstream; then --restart-cmd (the worker) and the read-back of --health-url.
    """
    for port in args.web_ports:
        runner.restart(args.restart_web_cmd.format(port=port), args.restart_timeout)
        url = args.web_health_url.format(port=port)
        say(wait_healthy(url, version, args.health_timeout, alive_check(args.alive_cmd, port)))
    if args.restart_cmd:
        runner.restart(args.restart_cmd, args.restart_timeout)
    alive = None if args.web_ports else alive_check(args.alive_cmd, None)
    say(wait_healthy(args.health_url, version, args.health_timeout, alive))


# --- the procedure ----------------------------------------------------------------------


def obtain_artifact(args: argparse.Namespace, incoming: Path) -> Path:
    """The local artifact path, downloaded into <root>/.incoming/ when given a URL."""
    if args.artifact:
        return Path(args.artifact).resolve()
    name = Path(urllib.parse.urlsplit(args.artifact_url).path).name or "hal.tar.gz"
    if not SAFE_NAME.match(name):
        raise InstallError(f"unexpected artifact file name: {name!r}")
    incoming.mkdir(parents=True, exist_ok=True)
    dest = incoming / name
    say(f"downloading {args.artifact_url}")
    download(args.artifact_url, dest)
    return dest


def stage(
    runner: Runner, args: argparse.Namespace, artifact: Path, version: str, prefix: str
) -> Path:
    """Unpack, venv + dependencies, migrate, collectstatic, check --deploy. Return the release."""
    release = args.root / "releases" / version
    if release.exists():
        say(f"replacing an earlier, non-current {release}")
        shutil.rmtree(release)
    release.mkdir(parents=True)
    say(f"unpacked {unpack(artifact, prefix, release)} entries into {release}")
    runner.run([args.python, "-m", "venv", str(release / ".venv")], cwd=release, as_user=False)
    # HAL runs from the release directory (templates, static and locale sit beside the
    # code), so the venv holds the dependencies only: no build backend on the ops host,
    # and no second copy of HAL in site-packages that nothing imports.
    requirements = release / ".hal-requirements.txt"
    requirements.write_text("\n".join(read_dependencies(release / "pyproject.toml")) + "\n")
    pip = [str(release / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    # The release's requirements.lock pins the versions its tests passed with.
    lock = release / "requirements.lock"
    constraints = ["-c", lock.name] if lock.is_file() else []
    runner.run(
        [*pip, *shlex.split(args.pip_args), *constraints, "-r", requirements.name],
        cwd=release,
        as_user=False,
    )
    runner.manage(release, "migrate", "--noinput")
    # Static files belong to the release (the proxy serves current/staticfiles); written
    # by the installer because the release tree is not the service user's to change.
    runner.manage(
        release,
        "collectstatic",
        "--noinput",
        as_user=False,
        HAL_STATIC_ROOT=str(release / "staticfiles"),
    )
    deploy_check(runner, release, set(args.allow_check))
    return release


def deploy_check(runner: Runner, release: Path, allowed: set[str]) -> None:
    """`check --deploy` fails on warnings, except the check IDs the operator accepted."""
    try:
        runner.manage(release, "check", "--deploy", "--fail-level", "WARNING")
        return
    except InstallError as exc:
        issues = set(re.findall(r"\(([a-z_]+\.[EWC]\d+)\)", runner.last_output))
        if not issues or not issues <= allowed:
            raise InstallError(f"check --deploy: {', '.join(sorted(issues - allowed))}") from exc
    say(f"check --deploy: accepted {', '.join(sorted(issues))} (--allow-check)")


def install(args: argparse.Namespace) -> int:
    """The whole procedure; returns the exit status."""
    if args.artifact_url:
        check_url(args.artifact_url, "artifact URL")
    check_url(args.health_url, "health URL")
    sha = args.sha256.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise InstallError("--sha256 must be 64 hex digits")
    env_values = load_env_file(args.env_file)
    if problems := check_env(env_values):
        raise InstallError(f"{args.env_file}:\n  " + "\n  ".join(problems))
    runner = Runner(env_values, args.user)
    root: Path = args.root
    with install_lock(root):
        incoming = root / ".incoming"
        artifact = obtain_artifact(args, incoming)
        try:
            return install_artifact(runner, args, artifact, sha)
        finally:
            # Installed, refused, failed or rolled back: a downloaded artifact never stays
            # behind (the release record keeps its sha256 and source).
            if artifact.parent == incoming:
                artifact.unlink(missing_ok=True)


def install_artifact(runner: Runner, args: argparse.Namespace, artifact: Path, sha: str) -> int:
    """Verify, back up, stage, switch, restart, read back (roll back on failure)."""
    root: Path = args.root
    actual = sha256_file(artifact)
    if actual != sha:
        raise InstallError(f"sha256 mismatch for {artifact.name}: expected {sha}, got {actual}")
    say(f"sha256 verified: {actual}")
    version, prefix = artifact_layout(artifact)
    build = read_build_info(artifact, prefix)
    previous = current_release(root)
    if previous == version:
        raise InstallError(f"{version} is already the current release; nothing to do")
    check_installable(version, build, previous, args)
    say(f"installing {version} (current: {previous or 'none, first install'})")

    snapshot = None
    if previous:
        # Back up first, with the code that owns the current schema.
        snapshot = runner.manage(root / "current", "dr_snapshot")
        if not snapshot:
            raise InstallError("dr_snapshot printed no snapshot path; not installing")
        snapshot = snapshot.splitlines()[-1]
        say(f"backup taken: {snapshot.split()[0]}")
    try:
        release = stage(runner, args, artifact, version, prefix)
    except InstallError:
        shutil.rmtree(root / "releases" / version, ignore_errors=True)
        shout(f"FAILED while staging {version}; `current` was not switched.")
        if snapshot:
            shout(
                "Migrations may have run: if the current release misbehaves, restore the "
                f"pre-install snapshot with manage.py dr_restore ({snapshot.split()[0]})."
            )
        raise
    record = {
        "version": version,
        "sha256": actual,
        "source": args.artifact_url or str(artifact),
        "build": build,
        "installed_at": dt.datetime.now(dt.UTC).isoformat(),
        "previous": previous,
        "snapshot": snapshot.split()[0] if snapshot else None,
    }
    (release / RECORD).write_text(json.dumps(record, indent=2) + "\n")

    switch_current(root, version)
    say(f"switched current -> releases/{version}")
    try:
        restart_all(runner, args, version)
    except InstallError as exc:
        return roll_back(runner, args, version, previous, str(exc), snapshot)
    removed = prune_releases(root, args.keep, protect={previous} if previous else set())
    if removed:
        say(f"removed old releases: {', '.join(sorted(removed))}")
    say(f"done: HAL {version} is current (previous: {previous or 'none'})")
    return 0


def roll_back(
    runner: Runner,
    args: argparse.Namespace,
    version: str,
    previous: str | None,
    reason: str,
    snapshot: str | None,
) -> int:
    """Switch back to the previous release after a failed restart or read-back."""
    if not previous:
        shout(f"FAILED after the switch to {version}: {reason}")
        shout("There is no previous release to roll back to; `current` stays on it.")
        return EXIT_NO_ROLLBACK
    switch_current(args.root, previous)
    shout(f"ROLLED BACK to {previous}: {version} failed: {reason}")
    if snapshot:
        shout(
            f"The database was migrated for {version}; if {previous} misbehaves, restore the "
            f"pre-install snapshot: manage.py dr_restore {snapshot.split()[0]}"
        )
    try:
        restart_all(
            runner,
            argparse.Namespace(**{**vars(args), "health_timeout": args.rollback_timeout}),
            previous,
        )
        shout(f"health OK: version {previous} after the rollback")
    except InstallError as exc:
        shout(f"ROLLBACK UNHEALTHY: {previous} does not answer either: {exc}")
        return EXIT_ROLLBACK_UNHEALTHY
    return EXIT_ROLLED_BACK


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="install.py", description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--artifact-url", help="https:// URL of hal-<version>.tar.gz")
    source.add_argument("--artifact", help="a local hal-<version>.tar.gz")
    parser.add_argument("--sha256", required=True, help="the artifact's expected sha256 (hex)")
    parser.add_argument("--root", type=Path, default=Path("/srv/hal"))
    parser.add_argument("--env-file", type=Path, default=Path("/etc/hal/hal.env"))
    parser.add_argument(
        "--user", default=None, help="run migrate/check/dr_snapshot as this user (e.g. hal)"
    )
    parser.add_argument("--health-url", default="http://127.0.0.1:8000/api/health")
    parser.add_argument("--health-timeout", type=float, default=90.0, help="seconds")
    parser.add_argument(
        "--rollback-timeout",
        type=float,
        default=90.0,
        help="seconds to wait for the previous release to answer healthy after a rollback",
    )
    parser.add_argument(
        "--restart-cmd",
        default="systemctl restart hal-web hal-worker",
        help="restarts the service(s); with --web-ports: what else to restart (the worker)",
    )
    parser.add_argument(
        "--web-ports",
        default="",
        help="multi-process layout: the hal-web@<port> ports (e.g. 8001,8002,8003,8004), "
        "restarted one at a time, each healthy before the next",
    )
    parser.add_argument("--restart-web-cmd", default="systemctl restart hal-web@{port}")
    parser.add_argument("--web-health-url", default="http://127.0.0.1:{port}/api/health")
    parser.add_argument(
        "--alive-cmd",
        default="",
        help="exits 0 while the restarted process runs ({port} substituted), e.g. "
        "'systemctl is-active --quiet hal-web@{port}': an exit means roll back at once",
    )
    parser.add_argument("--restart-timeout", type=float, default=120.0, help="seconds")
    parser.add_argument("--keep", type=int, default=5, help="releases to keep (default 5)")
    parser.add_argument(
        "--allow-check",
        action="append",
        default=["security.W021"],
        metavar="ID",
        help="a check --deploy warning to accept (default: security.W021, HSTS preload)",
    )
    parser.add_argument(
        "--allow-untested",
        action="store_true",
        help="install an artifact whose suite did not run (release.py build --skip-tests)",
    )
    parser.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="install a version that is not newer than the current one",
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter for the venv")
    parser.add_argument(
        "--pip-args",
        default="",
        help="extra pip install arguments, e.g. '--no-index --find-links /srv/wheels'",
    )
    args = parser.parse_args(argv)
    args.root = args.root.resolve()
    try:
        args.web_ports = [int(p) for p in args.web_ports.split(",") if p.strip()]
    except ValueError:
        parser.error("--web-ports takes comma-separated port numbers")
    if args.keep < 2:
        parser.error("--keep must be at least 2 (the current release and a rollback target)")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the install, print a refusal as one line."""
    os.umask(0o022)  # the service user must read the release (root installs it)
    args = parse_args(argv)
    try:
        return install(args)
    except InstallError as exc:
        shout(f"error: {exc}")
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
