"""Daphne web processes over the test database, and operators logged in to them through
the real login form: the multi-process tests' harness (budgets across processes, turns
across restarts)."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bounds import WAIT

BOUND = 900.0  # a generous bound for anything a busy machine does


def wait_for(check: Callable[[], Any], what: str, bound: float = BOUND) -> Any:
    """Poll `check` until it answers something true (returned); fail after `bound`."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Session:
    """One operator logged in through the real login form of one web process."""

    def __init__(self, base: str, user: Any) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        page = self.opener.open(base + "/login/", timeout=WAIT).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, "no CSRF token on the login page"
        form = urllib.parse.urlencode(
            {
                "username": user.username,
                "password": user.raw_password,
                "csrfmiddlewaretoken": token.group(1),
            }
        ).encode()
        request = urllib.request.Request(base + "/login/", data=form, headers={"Referer": base})
        self.opener.open(request, timeout=WAIT).read()

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        csrf = next((c.value for c in self.jar if c.name == "csrftoken"), "")
        request = urllib.request.Request(
            self.base + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json", "X-CSRFToken": csrf, "Referer": self.base},
        )
        try:
            with self.opener.open(request, timeout=WAIT) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


APP = "hal.asgi:application"


class WebProcess:
    """A daphne web process on the test database (as tests/browser/conftest.LiveServer,
    with a longer start-up wait: the shared two-core machine may be busy)."""

    START_SECONDS = 180

    def __init__(self, folder: Path, extra_env: dict[str, str]) -> None:
        from tests.browser.conftest import ROOT, _free_port, _server_env

        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**_server_env(folder), **extra_env}
        self.folder = folder
        self.log = open(folder / "daphne.log", "wb")  # closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), APP],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("daphne exited: see its daphne.log")
            try:
                urllib.request.urlopen(self.url + "/api/health", timeout=2)
                return
            except Exception:
                time.sleep(0.3)
        raise RuntimeError("daphne did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()

    def signal(self, sig: int, *, wait: float = 900) -> None:
        """Send `sig` (SIGTERM: a clean stop; SIGKILL: a crash) and wait for the exit."""
        os.kill(self.proc.pid, sig)
        self.proc.wait(wait)
        self.log.close()

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def log_text(self) -> str:
        return (self.folder / "daphne.log").read_text(errors="replace")
