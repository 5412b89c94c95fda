"""Reading back /api/health after a restart, and knowing early when it will not come."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from .errors import InstallError
from .inputs import check_url, is_loopback


def read_health(url: str, timeout: float = 5.0) -> tuple[int, dict]:
    """One GET of /api/health: (HTTP status, JSON body). Redirects are not followed."""
    parts = check_url(url, "health URL")
    headers = {"Accept": "application/json", "User-Agent": "hal-install"}
    if parts.scheme == "http":
        # Straight to daphne on loopback: say what the TLS proxy would have said, so a
        # production HAL (SECURE_SSL_REDIRECT) answers instead of redirecting.
        headers["X-Forwarded-Proto"] = "https"
    handlers: list[urllib.request.BaseHandler] = [_NoRedirects()]
    if is_loopback(parts.hostname):
        # This host's own daphne: never through HTTP(S)_PROXY (given for the download, e.g.
        # ship.py --remote-env), which would answer for it or not at all.
        handlers.append(urllib.request.ProxyHandler({}))
    opener = urllib.request.build_opener(*handlers)
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
    """Poll /api/health until this version answers ready (HTTP 200); else raise.

    Ready is the web process's own state (database, migrations, channel layer, vault);
    the task worker is waited for separately (wait_worker). Gives up before the timeout
    as soon as failure is certain: the process exited (the alive check fails) or HAL
    itself answered 5xx `fail_after` times in a row. A 502/504 is the proxy saying
    nothing answers yet, which the timeout covers.
    """
    deadline = time.monotonic() + timeout
    last = "no answer"
    failures = 0
    while True:
        try:
            status, body = read_health(url)
            last = f"HTTP {status}, status {body.get('status')!r}, version {body.get('version')!r}"
            if status == 200 and body.get("version") == version and body.get("ready", True):
                return f"health OK: version {version} ready, status {body.get('status')} ({url})"
            failures = failures + 1 if status >= 500 and status not in (502, 504) else 0
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = f"no answer ({exc})"
            failures = 0
        if failures >= fail_after:
            raise InstallError(f"{url} answered {last} {failures} times in a row")
        if alive is not None and not alive():
            raise InstallError(f"the process exited (alive check failed); last health: {last}")
        if time.monotonic() >= deadline:
            raise InstallError(f"{url} did not report version {version} ready: {last}")
        time.sleep(0.5)


def _when(value: object) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
    return when.replace(tzinfo=dt.UTC) if when and when.tzinfo is None else when


def wait_worker(url: str, since: dt.datetime, timeout: float) -> str:
    """Poll /api/health until a task worker started at or after `since` is beating.

    The worker's own heartbeat (`checks.worker.started_at`, written by the worker on this
    host's clock) is what says the restarted worker runs; web readiness never waits for
    it. When the health says the worker is not required (HAL_HEALTH_REQUIRE_WORKER=0),
    there is nothing to wait for.
    """
    deadline = time.monotonic() + timeout
    last = "no answer"
    # Heartbeat times have microseconds; the restart moment is taken just before it.
    since = since - dt.timedelta(seconds=1)
    while True:
        try:
            _, body = read_health(url)
            worker = (body.get("checks") or {}).get("worker") or {}
            if worker.get("required") is False:
                return "worker: not required by this HAL (HAL_HEALTH_REQUIRE_WORKER=0)"
            started = _when(worker.get("started_at"))
            # An older release's health has no started_at: its last beat must be new.
            started = started or _when(worker.get("last_seen_at"))
            fresh = worker.get("fresh", worker.get("ok"))
            if fresh and started is not None and started >= since:
                return f"worker heartbeat OK: started {started.isoformat()}"
            last = f"worker {worker.get('reason') or 'started ' + str(started)}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = f"no answer ({exc})"
        if time.monotonic() >= deadline:
            raise InstallError(f"no heartbeat from the restarted task worker: {last}")
        time.sleep(0.5)
