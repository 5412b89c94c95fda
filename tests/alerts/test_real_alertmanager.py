"""A real Prometheus Alertmanager delivers to a HAL daphne process: firing → one incident and
one investigation, repeats → nothing new, resolved → marked; a wrong token → Alertmanager's
failed attempts in its own metrics, and nothing written in HAL."""

from __future__ import annotations

import os
import secrets

import pytest

from alerts.models import Alert, AlertGroup
from hal.models import AuditEntry, Incident, IncidentEvent
from investigations.models import Investigation
from investigations.runner import run_pending_once
from tests.alerts.alertmanager import BINARY, Alertmanager, now
from tests.alerts.conftest import make_source
from tests.investigations.conftest import script_investigation
from tests.webprocs import wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.access(BINARY, os.X_OK), reason="make test installs it"),
]


@pytest.fixture
def manager(tmp_path):
    started: list[Alertmanager] = []

    def start(hal_url: str, token: str) -> Alertmanager:
        am = Alertmanager(tmp_path / f"am{len(started)}", hal_url, token)
        started.append(am)
        am.wait_ready()
        return am

    yield start
    for am in started:
        am.stop()


def prom_alert(name: str, **extra) -> dict:
    return {
        "labels": {"alertname": name, "severity": "critical", "job": "portal"},
        "annotations": {"summary": f"{name} on the portal"},
        "generatorURL": f"http://prometheus.example.test/graph?g0.expr=up%3D%3D0&{name}",
        **extra,
    }


def test_alertmanager_delivers_firing_repeats_and_resolved(web, manager, investigator, operator):
    _row, token, _key = make_source(operator)
    hal = web("hal")
    am = manager(hal.url, token)
    script_investigation(investigator.fake)

    am.post_alerts([prom_alert("PortalDown")])
    incident = wait_for(lambda: Incident.objects.first(), "the incident")
    assert incident.severity == "sev1" and incident.title.startswith("PortalDown")
    assert Investigation.objects.filter(incident=incident).count() == 1

    # repeat_interval 3 s: Alertmanager sends the group again; nothing new in HAL
    wait_for(lambda: AlertGroup.objects.get().notifications >= 3, "two repeat notifications")
    assert Incident.objects.count() == 1
    assert Investigation.objects.filter(incident=incident).count() == 1
    assert Alert.objects.get().seen >= 3

    [(_inv, status)] = run_pending_once()
    assert status == Investigation.DONE
    summary = IncidentEvent.objects.get(incident=incident, kind="investigation")
    assert "- PortalDown [firing] http://prometheus.example.test/graph" in summary.text

    # resolved in Alertmanager (endsAt now): the resolved notification marks it
    am.post_alerts([prom_alert("PortalDown", endsAt=now())])
    wait_for(lambda: AlertGroup.objects.get().status == "resolved", "resolved at the source")
    assert Alert.objects.get().status == "resolved"
    assert IncidentEvent.objects.filter(
        incident=incident, kind="alert", text__startswith="Resolved at the source."
    ).exists()
    assert Incident.objects.get().status == Incident.OPEN


def test_a_wrong_token_shows_in_alertmanagers_metrics_and_writes_nothing(web, manager, operator):
    make_source(operator)
    hal = web("hal")
    audit = AuditEntry.objects.count()
    am = manager(hal.url, "hal-alerts-" + secrets.token_urlsafe(32))
    am.post_alerts([prom_alert("Unheard")])
    # A 401 is not retried within one flush (Alertmanager retries 5xx); each group_interval
    # flush tries again, since none succeeded: two failed requests, counted by Alertmanager.
    wait_for(
        lambda: (
            am.metric("alertmanager_notification_requests_failed_total", integration="webhook") >= 2
        ),
        "Alertmanager's failed attempts",
    )
    assert am.metric("alertmanager_notifications_failed_total", integration="webhook") >= 1
    assert "401" in am.log_text()
    assert Incident.objects.count() == 0
    assert AlertGroup.objects.count() == 0
    assert AuditEntry.objects.count() == audit
