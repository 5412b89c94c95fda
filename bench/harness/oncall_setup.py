"""The set-up the on-call benches share (bench/oncall.py, bench/alerts.py): an operator,
a fake Anthropic investigator connected and chosen, the operator's e-mail and webhook
inbox, and the worker's two loops (investigations, notification delivery) in threads.

Imports Django: call after `setup_django`.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Inbox:
    """The operator's ends of the wire: tests/notifications' loopback SMTP sink and webhook
    receiver, and the webhook channel's signing secret."""

    sink: Any
    receiver: Any
    secret: str


def open_inbox(admin: Any) -> Inbox:
    """Start the SMTP sink and the webhook receiver and give the operator a verified e-mail
    and webhook channel (codes read back from them, as a person would)."""
    from django.conf import settings

    from tests.notifications.conftest import (
        Receiver,
        SmtpSink,
        verified_email,
        verified_webhook,
    )

    sink = SmtpSink()
    settings.HAL_SMTP_HOST, settings.HAL_SMTP_PORT = "127.0.0.1", sink.port
    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = True  # the receiver listens on loopback
    receiver = Receiver()
    receiver.start()
    verified_email(admin, sink)
    _, secret = verified_webhook(admin, receiver)
    return Inbox(sink, receiver, secret)


def investigator(bench: str, poll: float) -> tuple[Any, Any]:
    """(the operator's Actor, the started fake) with the fake connected as the incident
    investigator; the worker's loops poll every `poll` seconds."""
    from django.conf import settings

    from bench.harness import create_bench_user
    from hal.actions.base import Actor
    from hal.actions.settings import do_change_setting, get_definition
    from providers.actions import check_create_connection
    from providers.models import AIConnection
    from tests.fakes.anthropic_api import FakeAnthropic

    settings.HAL_INVESTIGATION_POLL_SECONDS = poll
    settings.HAL_NOTIFY_POLL_SECONDS = poll
    user, _ = create_bench_user(bench)
    admin = Actor(user=user, via="web", session_key="bench", reauth_at=time.time())
    fake = FakeAnthropic()
    fake.start()
    key = "sk-bench-" + secrets.token_urlsafe(18)
    fake.accepted_credentials = {key}
    conn = check_create_connection(
        actor=admin,
        data={
            "name": "investigator",
            "provider": "anthropic",
            "auth_method": "api_key",
            "base_url": fake.base_url,
            "api_key": key,
        },
    )
    AIConnection.objects.filter(pk=conn.pk).update(
        model=fake.models[0], models=list(fake.models), status="active"
    )
    do_change_setting(
        admin, get_definition("ai.incident_investigator"), str(conn.pk), reason="bench"
    )
    return admin, fake


def start_workers() -> tuple[threading.Event, list[threading.Thread]]:
    """The worker's two loops as in production, in threads; set the event to stop them."""
    from investigations.runner import worker_loop
    from notifications.worker import run_loop as delivery_loop

    stop = threading.Event()
    workers = [
        threading.Thread(target=loop, args=(stop,), daemon=True)
        for loop in (worker_loop, delivery_loop)
    ]
    for thread in workers:
        thread.start()
    return stop, workers
