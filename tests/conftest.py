"""Shared fixtures: operators with per-run generated passwords, logged-in clients."""

from __future__ import annotations

import asyncio

# pytest-asyncio closes each test's loop through asyncio.Runner, which cancels the tasks
# left and waits for them without a bound: one task that ignores its cancel hung a test's
# teardown until pytest-timeout failed it (seen on PostgreSQL + Redis; see the issue 29
# note). The wait here is bounded and names the task instead, so the suite reports it.
import asyncio.runners as _runners
import os
import re
import secrets
import sys as _sys
from pathlib import Path

import pytest

from tests.ordering import file_order


def _cancel_all_tasks_bounded(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    done, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=20))
    for task in pending:
        print(f"\nA task did not end when cancelled: {task!r}", file=_sys.stderr)
        task.print_stack(file=_sys.stderr)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception during asyncio.run() shutdown",
                    "exception": task.exception(),
                    "task": task,
                }
            )


_runners._cancel_all_tasks = _cancel_all_tasks_bounded


def _generous_communicator_bounds() -> None:
    """channels' and asgiref's test communicators wait 1 s by default (connect, receive,
    disconnect, an application's end): a hidden clock on a busy machine (issue 43). Their
    default becomes the suite's bound (tests/bounds.py): a wait fails only for a hang. An
    explicit timeout= still wins; receive_nothing keeps its short look (waiting longer
    there could only make a test pass later, never fail)."""
    from asgiref.testing import ApplicationCommunicator
    from channels.testing import HttpCommunicator, WebsocketCommunicator

    from tests import bounds
    from tests.bounds import WAIT

    stock_wait = ApplicationCommunicator.wait

    async def wait(self, timeout=None):
        # Stock wait() swallows its own timeout: it cancels the application and returns, so
        # a consumer that never ends (no websocket.disconnect sent) cost a test the whole
        # bound in silence (120 s, issue 43). With the suite's bound it is a failure; an
        # explicit timeout= keeps the stock "cancel and return".
        if timeout is not None:
            return await stock_wait(self, timeout)
        bound = bounds.WAIT  # read at call time: tests/test_conftest_wait.py shortens it
        await stock_wait(self, bound)
        if self.future.cancelled():
            raise AssertionError(
                f"the application did not end within {bound:.0f} s: send it "
                "websocket.disconnect (or http.disconnect) before wait()"
            )

    ApplicationCommunicator.wait = wait
    ApplicationCommunicator.receive_output.__defaults__ = (WAIT,)
    WebsocketCommunicator.connect.__defaults__ = (WAIT,)
    WebsocketCommunicator.receive_from.__defaults__ = (WAIT,)
    WebsocketCommunicator.receive_json_from.__defaults__ = (WAIT,)
    WebsocketCommunicator.disconnect.__defaults__ = (1000, WAIT)
    HttpCommunicator.get_response.__defaults__ = (WAIT,)


_generous_communicator_bounds()

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Under pytest-xdist each worker has its own test database (pytest-django) and its own
# Redis channel-layer prefix (here, also for the daphne processes tests start), so two
# workers never see each other's groups.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    os.environ["HAL_REDIS_PREFIX"] = f"{os.environ.get('HAL_REDIS_PREFIX', 'hal')}-{_WORKER}"
    from django.conf import settings as _settings

    _layer = _settings.CHANNEL_LAYERS.get("default", {}).get("CONFIG", {})
    if "prefix" in _layer:
        _layer["prefix"] = os.environ["HAL_REDIS_PREFIX"]

# Wire-true fake providers, OAuth server and claude CLI, for every test package.
pytest_plugins = ["tests.fakes.fixtures"]

# CI runs the suite twice (.ci/run): on SQLite + the in-memory channel layer, then on
# PostgreSQL + Redis with HAL_TEST_PASS=second. The second pass repeats what the backend can
# change (issue 43): tests that use the database, and modules that start HAL processes or
# open sockets and channel layers on the configured backend. Browser tests drive the same
# HTTP and WebSocket API whose backend behaviour the API tests cover on both; the few that
# cross processes through the channel layer are marked `both_passes`. Everything else —
# pure functions, static files, packaging, the architecture — runs once, in the first pass.
SECOND_PASS = os.environ.get("HAL_TEST_PASS") == "second"
_DB_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
}
_BACKEND_WORDS = re.compile(
    r"subprocess|Popen|daphne|LiveServer|Communicator|channel_layer|get_channel_layer|REDIS"
)
_module_uses_backend: dict[str, bool] = {}
# The deploy tests build, sign, ship and install releases into hosts of their own, from a
# clean environment (tests/deploy/install_host.py clean_env: no DATABASE_URL or REDIS_URL
# from the outer run), or run the shipped proxies in front of an echo upstream: on the
# second pass they would only repeat the first — the §6 layout test too (it brings
# PostgreSQL and Redis servers of its own).


def runs_in_second_pass(item: pytest.Item) -> bool:
    """Whether the PostgreSQL + Redis pass runs this test (see SECOND_PASS)."""
    if item.get_closest_marker("both_passes"):
        return True
    path = item.nodeid.split("::", 1)[0]
    if path.startswith("tests/browser/"):
        return False
    if path.startswith("tests/deploy/"):
        return False
    if item.get_closest_marker("django_db") or _DB_FIXTURES & set(item.fixturenames):
        return True
    if path not in _module_uses_backend:
        text = Path(str(item.path)).read_text(encoding="utf-8")
        _module_uses_backend[path] = bool(_BACKEND_WORDS.search(text))
    return _module_uses_backend[path]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "both_passes: run in CI's PostgreSQL + Redis pass too (a browser test that crosses "
        "processes through the channel layer)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The second pass keeps what the backend can change; then the files in the order
    tests/ordering.py gives (the long ones first, the browser files as one block)."""
    if SECOND_PASS:
        once = [item for item in items if not runs_in_second_pass(item)]
        if once:
            config.hook.pytest_deselected(items=once)
            items[:] = [item for item in items if runs_in_second_pass(item)]
            print(f"\nsecond pass: {len(once)} tests the backend cannot change ran in the first")
    # Each xdist worker collects and orders; the controller hands out files in that order.
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    order = file_order([item.nodeid.split("::", 1)[0] for item in items], workers)
    items[:] = [items[i] for i in order]


class Hops(list):
    """Hop names in order; `tasks` pairs each with the task that made it, so a test can
    count only the path under test (a background heartbeat's sweep is not a socket's)."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[tuple[str, object]] = []

    def clear(self) -> None:
        super().clear()
        self.tasks.clear()

    def made_by(self, *tasks: object) -> list[str]:
        """The hops made by these tasks (e.g. a communicator's `future`: its consumer)."""
        return [name for name, task in self.tasks if task in tasks]


@pytest.fixture
def hops(monkeypatch):
    """The sync functions sync_to_async sends to a thread while the test runs, in order
    (the hot paths' thread-hop counts; tests may append markers of their own)."""
    from asgiref.sync import SyncToAsync

    seen = Hops()
    original = SyncToAsync.__call__

    async def counting(self, *args, **kwargs):
        name = getattr(self.func, "__qualname__", repr(self.func))
        if name == "_db_call" and len(args) > 1:  # a trip to HAL's DB threads: its function
            name += ":" + getattr(args[1], "__qualname__", repr(args[1]))
        seen.append(name)
        seen.tasks.append((name, asyncio.current_task()))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counting)
    return seen


@pytest.fixture(autouse=True)
def _fresh_process_caches():
    """Caches of rows kept in process memory start empty: a test's rolled-back rows must
    not reach the next test through them."""
    from providers import redaction
    from runbooks import active

    active.forget_now()
    redaction.forget_now()
    yield
    active.forget_now()
    redaction.forget_now()


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path, settings):
    """Each test gets its own data directory (vault key file, snapshots, scratch)."""
    data = tmp_path / "data"
    data.mkdir()
    settings.DATA_DIR = data
    settings.HAL_VAULT_KEY_FILE = str(data / "vault.keys")
    settings.HAL_HEALTH_REQUIRE_WORKER = False
    return data


def make_user(django_user_model, username: str, *, superuser: bool = False, perms=()):
    password = secrets.token_urlsafe(16)
    if superuser:
        user = django_user_model.objects.create_superuser(
            username, f"{username}@example.test", password
        )
    else:
        user = django_user_model.objects.create_user(username, f"{username}@example.test", password)
    if perms:
        from django.contrib.auth.models import Permission

        for codename in perms:
            user.user_permissions.add(Permission.objects.get(codename=codename))
    user.raw_password = password
    return user


@pytest.fixture
def operator(db, django_user_model):
    """A superuser operator; its generated password is on `.raw_password`."""
    return make_user(django_user_model, "ops", superuser=True)


@pytest.fixture
def viewer(db, django_user_model):
    """An operator without any console permission (read-only)."""
    return make_user(django_user_model, "viewer")


@pytest.fixture
def client_op(client, operator):
    """A Django test client logged in as `operator` (no recent re-auth)."""
    client.force_login(operator)
    return client


@pytest.fixture
def reauthed(client_op, operator):
    """`client_op` after a successful re-authentication."""
    response = client_op.post(
        "/api/auth/reauth", {"password": operator.raw_password}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return client_op


@pytest.fixture(scope="session", autouse=True)
def _drop_leftover_db_sessions(django_db_setup, django_db_blocker):
    """Let the test database be dropped at the end: on PostgreSQL, end any session a
    worker thread left open (the DB cannot be dropped while someone is connected)."""
    yield
    from django.db import OperationalError, connection, connections

    with django_db_blocker.unblock():
        connections.close_all()
        if connection.vendor == "postgresql":
            try:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
            except OperationalError:
                pass  # no database to connect to (no test used it): no session to end
            connection.close()


@pytest.fixture(autouse=True)
def _seeded_modules(request):
    """Every database test sees the seeded modules, as a fresh install does: a transactional
    test's flush removes the data migration's rows, and which tests ran before in a worker
    depends on how pytest-xdist shares the files out."""
    names = request.fixturenames
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in names or bool(
        marker and (marker.kwargs.get("transaction") or (marker.args and marker.args[0]))
    )
    if transactional:
        request.getfixturevalue("transactional_db")
    elif "db" in names or marker:
        request.getfixturevalue("db")
    else:
        return
    from tests.fleet.conftest import seed_modules

    seed_modules()
