"""A worker process killed (SIGKILL) while its webhook POST is in flight: after its lease
expires the next worker sends the same message again with the same X-HAL-Delivery key, and
the row is then marked sent once. The receiver saw two copies of one key: exactly once for
a receiver that deduplicates by the key, at least once for one that does not (as
docs/notifications.md says)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from hal.actions.incidents import check_open_incident
from notifications import worker
from notifications.models import Attempt, Delivery
from tests.bounds import SLOW
from tests.notifications.conftest import Receiver, actor_of, verified_webhook

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = settings.BASE_DIR

DOOMED = """
import django
django.setup()
from notifications import worker
worker.deliver_due("doomed-worker")
"""


class StallingReceiver(Receiver):
    """Holds every notification POST (not the verification) until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def handle(self, handler, request):
        if not (request.json or {}).get("verification"):
            self.release.wait(timeout=60)
        super().handle(handler, request)


def _wait_for(predicate, what: str, limit: float = 120.0) -> None:
    # Not a timed assertion: a bound so that a broken run ends, generous for a loaded host.
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_killed_mid_delivery_is_resent_once_with_the_same_key(operator, settings, tmp_path):
    from django.db import connection

    from tests.browser.conftest import _server_env

    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = True
    receiver = StallingReceiver().start()
    try:
        actor = actor_of(operator)
        verified_webhook(actor, receiver)
        check_open_incident(actor=actor, severity="sev3", title="disk")
        delivery = Delivery.objects.get()

        env = _server_env(tmp_path)
        env["HAL_WEBFETCH_ALLOW_LOOPBACK"] = "1"
        env["HAL_VAULT_KEY_FILE"] = str(settings.HAL_VAULT_KEY_FILE)
        env["HAL_NOTIFY_LEASE_SECONDS"] = "120"
        if connection.vendor == "sqlite":
            env["HAL_SQLITE_PATH"] = str(connection.settings_dict["NAME"])
        proc = subprocess.Popen([sys.executable, "-c", DOOMED], cwd=ROOT, env=env)
        try:
            _wait_for(lambda: len(receiver.posts()) == 2, "the doomed worker's POST")
            os.kill(proc.pid, signal.SIGKILL)  # mid-delivery: sent, not yet recorded
            proc.wait(timeout=SLOW)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        receiver.release.set()

        delivery.refresh_from_db()
        assert delivery.status == "pending" and delivery.lease_owner.startswith("doomed-worker")
        assert Attempt.objects.count() == 0  # it died before recording anything
        # While the dead worker's lease lives, nobody sends the row again.
        assert worker.deliver_due("restarted", now=timezone.now()) == 0
        # The restarted worker, once the lease has expired:
        later = delivery.lease_until + timedelta(seconds=1)
        assert worker.deliver_due("restarted", now=later) == 1
        assert worker.deliver_due("restarted", now=later + timedelta(hours=1)) == 0
        delivery.refresh_from_db()
        assert delivery.status == "sent" and delivery.attempts == 1
        posts = receiver.posts()[1:]
        assert len(posts) == 2  # the killed one arrived, so did the re-send
        assert {p.headers["x-hal-delivery"] for p in posts} == {str(delivery.uuid)}
        assert posts[0].raw_body == posts[1].raw_body
    finally:
        receiver.release.set()
        receiver.stop()
