"""Browser tests: a real daphne process on the test database, driven by Playwright + chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests import ports
from tests.bounds import WAIT_MS

# Playwright's expect waits 5 s by default: a hidden clock on a busy machine (issue 43).
expect.set_options(timeout=WAIT_MS)

CHROMIUM = os.environ.get("HAL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    return ports.free_port()  # tests/ports.py: outside the ephemeral range


def _server_env(tmp_dir: Path) -> dict[str, str]:
    from django.conf import settings
    from django.db import connection

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(
        # The suite's settings (cheap password hashing): logins and re-auths cost ~0.2-0.5 s
        # of CPU each on Django's default rounds.
        DJANGO_SETTINGS_MODULE="tests.settings",
        DJANGO_SECRET_KEY=settings.SECRET_KEY,
        HAL_DATA_DIR=str(tmp_dir),
        HAL_HEALTH_REQUIRE_WORKER="0",
        HAL_SERVE_STATIC="1",
        PYTHONUNBUFFERED="1",
    )
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        env["HAL_SQLITE_PATH"] = db["NAME"]
        env.pop("DATABASE_URL", None)
    else:
        host = db.get("HOST") or "127.0.0.1"
        port = db.get("PORT") or 5432
        user = db.get("USER") or "postgres"
        env["DATABASE_URL"] = f"postgres://{user}@{host}:{port}/{db['NAME']}"
    return env


class LiveServer:
    """A daphne subprocess serving hal.asgi on a free loopback port."""

    def __init__(self, tmp_dir: Path, extra_env: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = _server_env(tmp_dir)
        env.update(extra_env or {})
        self.log_path = tmp_dir / "daphne.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "hal.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        # Generous: a loaded 2-core machine can take tens of seconds to import Django.
        deadline = time.monotonic() + 90
        last: object = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.log_path.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.url + "/api/health", timeout=1)
                return
            except urllib.error.HTTPError as exc:  # up, but not ready (503 names why)
                last = f"{exc.code} {exc.read()[:500]!r}"
            except Exception as exc:
                last = exc
            time.sleep(0.2)
        # Never leave it running: a daphne that did not get ready is still a process.
        self.proc.kill()
        self.proc.wait()
        raise RuntimeError(f"daphne did not start (last health answer: {last})")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()


@pytest.fixture(scope="package")
def live_asgi(django_db_setup, django_db_blocker, tmp_path_factory):
    """A daphne process over the test database (tests using it need transactional_db).

    Package-scoped: once it has run a turn, the process keeps its lease heartbeat and
    sweep going (chatrooms/leases.py); outliving the browser tests, it would sweep the
    turns of the tests that follow (their owner, the pytest process, beats only while a
    test runs) and write lease rows into their database."""
    with django_db_blocker.unblock():
        server = LiveServer(tmp_path_factory.mktemp("live"))
    yield server
    server.stop()


LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

# The errors of a browser harness that went away under a test (the Playwright driver or
# chromium itself ended), not of anything the test checks: such a test runs once more, in
# a browser started again (pytest-rerunfailures, `pytest_collection_modifyitems` below).
HARNESS_GONE = [
    "Playwright connection closed",
    "Connection closed while reading from the driver",
    "Target page, context or browser has been closed",
]


def _driver_pids() -> list[int]:
    """This process's Playwright driver processes (children running `run-driver`)."""
    me, found = os.getpid(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if int(stat[1]) == me and b"run-driver" in cmdline:
            found.append(int(entry.name))
    return found


class Chromium:
    """Debian's chromium under Playwright, started again when the driver or the browser is gone.

    One per test package and worker; every test asks `get()`, which checks the browser with
    a round trip first. A harness that died under one test (seen once in CI: every later
    browser test of that worker failed with "Playwright connection closed") then costs that
    test a rerun, not the rest of the package."""

    def __init__(self) -> None:
        self.restarts = 0
        self._playwright = None
        self._browser = None

    def get(self):
        if self._browser is not None:
            if self._alive():
                return self._browser
            self.restarts += 1
            sys.stderr.write(
                f"\nbrowser harness gone (driver pids now {_driver_pids()}): "
                f"starting Playwright and chromium again (restart {self.restarts})\n"
            )
            self.stop()
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS
        )
        return self._browser

    def _alive(self) -> bool:
        try:
            self._browser.new_context().close()
            return True
        except Exception:
            return False

    def stop(self) -> None:
        for close in (
            self._browser and self._browser.close,
            self._playwright and self._playwright.stop,
        ):
            if close:
                try:
                    close()
                except Exception:
                    pass  # already gone: nothing left to close
        self._browser = self._playwright = None


@pytest.fixture(scope="package")
def chromium():
    """The package's browser keeper.

    Package-scoped on purpose: Playwright's sync API keeps an asyncio loop running in the
    main thread while it is open, which would break every async test that runs after it.
    """
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make test` (it installs Debian chromium)")
    keeper = Chromium()
    yield keeper
    keeper.stop()


@pytest.fixture
def browser(chromium):
    """Debian's chromium, headless, driven by Playwright: alive when the test starts."""
    return chromium.get()


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=HARNESS_GONE))


class _InFlight:
    """Counts a browser context's requests that have not finished yet."""

    def __init__(self, context) -> None:
        self.pending: set = set()
        # Playwright wants Python functions as handlers, not built-in methods.
        context.on("request", lambda r: self.pending.add(r))
        context.on("requestfinished", lambda r: self.pending.discard(r))
        context.on("requestfailed", lambda r: self.pending.discard(r))

    def http(self) -> list:
        # WebSocket upgrades never "finish"; they end with the page.
        return [r for r in self.pending if r.resource_type != "websocket"]


def _wait_for_db_quiet(timeout: float = 5.0) -> None:
    """On PostgreSQL, wait until no other session of the test database is inside a
    transaction, so the flush's TRUNCATE cannot deadlock with a request the server is
    still finishing (a `pagehide` keepalive save, a reply completing)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return  # SQLite serialises writers; the flush simply waits for the lock
    quiet, deadline = 0, time.monotonic() + timeout
    with connection.cursor() as cursor:
        while quiet < 4 and time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
            )
            quiet = quiet + 1 if cursor.fetchone()[0] == 0 else 0
            time.sleep(0.05)


@pytest.fixture
def page_factory(browser, request, transactional_db):
    """New browser contexts (like separate browsers); screenshots saved on failure.

    Requests `transactional_db` so that this teardown runs before the database flush:
    pages are left first (their `pagehide` saves are sent and awaited), then the server's
    database sessions must be idle, and only then are the tables truncated.
    """
    contexts = []

    def make(viewport=(1440, 900), locale="en-US", **options):
        # options: further browser-context settings (has_touch, is_mobile for a phone).
        context = browser.new_context(
            viewport={"width": viewport[0], "height": viewport[1]}, locale=locale, **options
        )
        contexts.append((context, _InFlight(context)))
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)  # a bound for a hang: a busy machine is slow
        return page

    yield make
    ARTIFACTS.mkdir(exist_ok=True)
    failed = getattr(request.node, "rep_call", None) and request.node.rep_call.failed
    for i, (context, _) in enumerate(contexts):
        for j, pg in enumerate(context.pages):
            if failed:
                try:
                    pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{i}-{j}-failed.png"))
                except Exception as exc:  # the harness is gone: the failure says so already
                    sys.stderr.write(f"no screenshot of {request.node.name}: {exc}\n")
    for context, inflight in contexts:
        try:
            _leave(context, inflight)
        except Exception as exc:
            if not any(text in str(exc) for text in HARNESS_GONE):
                raise
    _wait_for_db_quiet()


def _leave(context, inflight: _InFlight) -> None:
    """Leave every page (its `pagehide` saves go out), wait for them, close the context."""
    for pg in context.pages:
        try:
            pg.goto("about:blank", timeout=5_000)
        except Exception:
            pass  # a page that cannot leave cleanly is closed below anyway
    deadline = time.monotonic() + 5
    while inflight.http() and time.monotonic() < deadline:
        context.pages[0].wait_for_timeout(50) if context.pages else time.sleep(0.05)
    context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)


def login(page, base_url: str, user) -> None:
    """Log in through the real login form."""
    page.goto(base_url + "/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", user.raw_password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def screenshot(page, name: str) -> Path:
    """Save a screenshot of a main state as a test artifact (not committed)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


__all__ = ["login", "screenshot", "shutil"]
