"""From alerts to incidents: one per group, fingerprints deduplicated, repeats counted only,
resolutions on the timeline, severity mapping, server links, storms folded, Grafana's example."""

from __future__ import annotations

import pytest

from alerts.models import Alert, AlertGroup, AlertStorm
from hal.models import Incident, IncidentEvent
from tests.alerts.conftest import alert, make_source, notification, post

pytestmark = pytest.mark.django_db


def test_one_group_one_incident_repeats_only_counted_and_resolution_marked(client, am_source):
    _source, token = am_source
    a = alert("DiskFull", fingerprint="aaaa000000000001", labels={"severity": "critical"})
    b = alert("DiskFull", fingerprint="aaaa000000000002")
    first = post(client, token, notification("g1", [a]))
    assert first.status_code == 200 and first.json()["result"] == "opened"
    incident = Incident.objects.get()
    assert incident.severity == "sev1" and "DiskFull" in incident.title
    assert "http://prometheus.example.test/graph" in incident.description
    rows = IncidentEvent.objects.filter(incident=incident).count()
    for _ in range(3):  # group_interval repeats: nothing new
        assert post(client, token, notification("g1", [a])).json()["result"] == "repeat"
    assert IncidentEvent.objects.filter(incident=incident).count() == rows
    assert Alert.objects.get(fingerprint=a["fingerprint"]).seen == 4
    # a second alert joins the group: a timeline entry, the same incident
    assert post(client, token, notification("g1", [a, b])).json()["result"] == "updated"
    assert Incident.objects.count() == 1 and Alert.objects.count() == 2
    # one resolves, then both
    one = {**a, "status": "resolved", "endsAt": "2026-12-06T08:10:00Z"}
    assert post(client, token, notification("g1", [one, b])).json()["result"] == "updated"
    both = [one, {**b, "status": "resolved", "endsAt": "2026-12-06T08:11:00Z"}]
    assert post(client, token, notification("g1", both)).json()["result"] == "resolved"
    kinds = list(incident.events.values_list("kind", "text"))
    assert [k for k, _t in kinds].count("alert") == 4  # joined, resolved, resolved, source
    assert "Resolved at the source." in kinds[-1][1]
    incident.refresh_from_db()
    assert incident.status == Incident.OPEN  # closing stays a human act (or the setting)
    group = AlertGroup.objects.get()
    assert group.status == "resolved" and group.resolved_at is not None
    # a new episode on the open incident: the same incident, a "firing again" entry
    assert post(client, token, notification("g1", [a])).json()["result"] == "refiring"
    assert Incident.objects.count() == 1
    assert AlertGroup.objects.get().episode == 2


def test_the_incident_page_shows_resolved_at_the_source(reauthed, client, am_source):
    _source, token = am_source
    a = alert("Down", fingerprint="bbbb000000000001")
    post(client, token, notification("g2", [a]))
    post(client, token, notification("g2", [{**a, "status": "resolved"}]))
    incident = Incident.objects.get()
    page = reauthed.get(f"/incidents/{incident.pk}/")
    assert page.status_code == 200
    assert b'id="resolved-at-source"' in page.content
    assert a["generatorURL"].encode() in page.content


def test_a_group_resolved_closes_the_incident_when_the_setting_says_so(client, am_source):
    from tests.investigations.conftest import change_setting

    source, token = am_source
    change_setting(source and _admin_user(), "alerts.close_when_resolved", True)
    a = alert("Flap", fingerprint="cccc000000000001")
    post(client, token, notification("g3", [a]))
    post(client, token, notification("g3", [{**a, "status": "resolved"}]))
    assert Incident.objects.get().status == Incident.CLOSED
    # firing again after a close: a new incident for the new episode
    assert post(client, token, notification("g3", [a])).json()["result"] == "refiring"
    assert Incident.objects.filter(status=Incident.OPEN).count() == 1
    assert Incident.objects.count() == 2


def _admin_user():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="ops")


def test_severity_map_and_server_link(client, operator, active_server):
    _row, token, _k = make_source(operator, severity_label="priority", severity_map={"P2": "sev2"})
    labels = {"priority": "P2", "instance": f"{active_server.hostname}:9100"}
    post(client, token, notification("g4", [alert("CPU", labels=labels)]))
    incident = Incident.objects.get()
    assert incident.severity == "sev2"
    assert incident.affected_servers == [active_server.hostname]
    post(client, token, notification("g5", [alert("CPU", labels={"instance": "nowhere:1"})]))
    assert Incident.objects.get(pk__gt=incident.pk).affected_servers == []


def test_a_storm_folds_into_one_incident_with_a_count(client, operator, am_source):
    from tests.investigations.conftest import change_setting

    _source, token = am_source
    change_setting(operator, "alerts.storm_groups", 3)
    for n in range(40):
        response = post(client, token, notification(f"storm-{n}", [alert(f"A{n}")]))
        assert response.status_code == 200
    # 3 groups of their own, then one storm incident for the other 37
    assert Incident.objects.count() == 4
    storm = AlertStorm.objects.get()
    assert storm.groups == 37 and storm.alerts == 37
    assert AlertGroup.objects.filter(folded=True, incident=storm.incident).count() == 37
    # a folded group's repeats write no timeline rows
    events = IncidentEvent.objects.count()
    post(client, token, notification("storm-39", [alert("A39")]))
    assert IncidentEvent.objects.count() == events


GRAFANA_EXAMPLE = {  # Grafana's documented webhook payload (alerting/configure-notifications)
    "receiver": "My Super Webhook",
    "status": "firing",
    "orgId": 1,
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "High memory usage", "team": "blue", "zone": "us-1"},
            "annotations": {
                "description": "The system has high memory usage",
                "runbook_url": "https://myrunbook.com/runbook/1234",
                "summary": "This alert was triggered for zone us-1",
            },
            "startsAt": "2021-10-12T09:51:03.157076+02:00",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "https://play.grafana.org/alerting/1afz29v7z/edit",
            "fingerprint": "c6eadffa33fcdf37",
            "silenceURL": "https://play.grafana.org/alerting/silence/new?alertmanager=grafana",
            "dashboardURL": "",
            "panelURL": "",
            "values": {"B": 44.23943737541908, "C": 1},
            "valueString": "[ var='B' labels={instance=localhost:9090} value=44.2 ]",
        }
    ],
    "groupLabels": {},
    "commonLabels": {"team": "blue", "zone": "us-1"},
    "commonAnnotations": {},
    "externalURL": "https://play.grafana.org/",
    "version": "1",
    "groupKey": "{}:{}",
    "truncatedAlerts": 0,
    "title": "[FIRING:1]  (blue us-1)",
    "state": "alerting",
    "message": "**Firing**\n\nLabels:\n - alertname = High memory usage\n",
}


def test_grafanas_documented_payload_opens_an_incident(client, operator):
    _row, token, _k = make_source(operator, kind="grafana")
    response = post(client, token, GRAFANA_EXAMPLE, path="/api/alerts/grafana")
    assert response.status_code == 200, response.content
    incident = Incident.objects.get()
    assert incident.title.startswith("High memory usage")
    assert "https://play.grafana.org/alerting/1afz29v7z/edit" in incident.description
    resolved = {
        **GRAFANA_EXAMPLE,
        "status": "resolved",
        "alerts": [{**GRAFANA_EXAMPLE["alerts"][0], "status": "resolved"}],
    }
    assert post(client, token, resolved, path="/api/alerts/grafana").json()["result"] == "resolved"
    # Alertmanager's token is not Grafana's door, and Grafana's shape is not Alertmanager's
    assert post(client, token, GRAFANA_EXAMPLE).status_code == 401


def test_grafanas_newer_fields_and_null_maps_are_read(client, operator):
    """Fields of grafana/alerting's webhookMessage/ExtendedAlert beyond the documented
    example (appVersion, ruleUID, embeddedImage, enrichments), and Go's null maps."""
    _row, token, _k = make_source(operator, kind="grafana")
    first = GRAFANA_EXAMPLE["alerts"][0]
    payload = {
        **GRAFANA_EXAMPLE,
        "groupKey": '{}:{alertname="Newer"}',
        "appVersion": "12.3.0",
        "commonAnnotations": None,
        "alerts": [
            {
                **first,
                "annotations": None,
                "values": None,
                "ruleUID": "ddx0v9",
                "embeddedImage": "",
                "enrichments": {"k": [1, 2]},
            }
        ],
    }
    response = post(client, token, payload, path="/api/alerts/grafana")
    assert response.status_code == 200, response.content
    assert (
        post(client, token, {**payload, "surprise": 1}, path="/api/alerts/grafana").json()["error"][
            "code"
        ]
        == "invalid_payload"
    )
