"""Overview dashboard, metric charts (server-rendered SVG) and the merged change history."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hal.actions import incidents
from hal.models import Server, ServerMetric, Setting
from hal.views.ops import svg_chart

pytestmark = pytest.mark.django_db


def _server_with_metrics(hostname: str = "web-1.example", n: int = 5) -> Server:
    server = Server.objects.create(
        hostname=hostname, status="active", last_heartbeat_at=timezone.now()
    )
    now = timezone.now()
    for i in range(n):
        ServerMetric.objects.create(
            server=server,
            ts=now - timedelta(minutes=n - i),
            cpu_percent=10.0 * i,
            memory_percent=50.0,
            disk_percent=70.0,
            load1=0.5 * i,
        )
    return server


def test_svg_chart_is_a_polyline_per_series():
    svg = str(
        svg_chart(
            [
                {"cpu_percent": 0, "memory_percent": 50, "disk_percent": 100},
                {"cpu_percent": 100, "memory_percent": 50, "disk_percent": 0},
            ],
            width=104,
            height=104,
        )
    )
    assert svg.startswith("<svg") and svg.count("<polyline") == 3
    # x from 4 to 100, y inverted: 0% at the bottom (100), 100% at the top (4).
    assert 'points="4.0,100.0 100.0,4.0"' in svg
    assert "no data" in str(svg_chart([]))


def test_svg_chart_escapes_labels():
    svg = str(svg_chart([{"x": 1}], [("x", "<script>", "c")]))
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_overview_renders_with_data(client_op, op_actor):
    _server_with_metrics()
    Server.objects.create(hostname="new-1.example")  # pending
    incidents.check_open_incident(actor=op_actor, severity="sev1", title="Checkout errors")
    page = client_op.get("/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "Checkout errors" in body
    assert "web-1.example" in body and "<polyline" in body
    assert 'id="card-approvals"' in body
    data = client_op.get("/api/overview").json()
    assert data["fleet"] == {"active": 1, "pending": 1}
    assert data["open_incidents"]["count"] == 1
    assert data["open_incidents"]["by_severity"] == {"sev1": 1}
    assert data["pending_approvals"] == 0
    assert data["recent_audit"][0]["action"] == "incidents.open"
    assert data["running_jobs"]["count"] == 0


def test_silent_server_counts_as_unreachable(client_op):
    Server.objects.create(
        hostname="quiet.example",
        status="active",
        last_heartbeat_at=timezone.now() - timedelta(days=1),
    )
    assert client_op.get("/api/overview").json()["fleet"] == {"unreachable": 1}


def test_metrics_api_and_page(client_op):
    server = _server_with_metrics(n=4)
    data = client_op.get(f"/api/metrics?server={server.pk}&hours=1").json()
    assert [p["cpu_percent"] for p in data["points"]] == [0.0, 10.0, 20.0, 30.0]
    assert client_op.get("/api/metrics?server=999").status_code == 404
    assert client_op.get(f"/api/metrics?server={server.pk}&hours=x").status_code == 400
    page = client_op.get(f"/metrics/?server={server.pk}")
    assert page.status_code == 200 and b'id="metrics-chart"' in page.content


def test_changes_merges_audit_and_setting_changes(client_op, op_actor):
    from hal.actions import settings as s

    inc = incidents.check_open_incident(actor=op_actor, severity="sev3", title="t")
    incidents.check_close_incident(actor=op_actor, incident_id=inc.pk, resolution="r")
    # A setting change as the action writes it (system actor: its gate is elsewhere).
    from hal.actions.base import Actor

    s.check_change_setting(
        actor=Actor.for_system("cli", "test"),
        name="proposals.expiry_minutes",
        value=15,
        reason="tighter",
    )
    items = client_op.get("/api/changes?target_type=incident&target_id=" + str(inc.pk)).json()[
        "changes"
    ]
    assert [i["action"] for i in items] == ["incidents.close", "incidents.open"]
    items = client_op.get(
        "/api/changes?target_type=setting&target_id=proposals.expiry_minutes"
    ).json()["changes"]
    assert len(items) == 1  # the audit row and the SettingChange are one item
    assert items[0]["kind"] == "setting_change"
    assert (items[0]["before"], items[0]["after"], items[0]["reason"]) == (60, 15, "tighter")
    everything = client_op.get("/api/changes").json()["changes"]
    assert [i["action"] for i in everything][:3] == [
        "settings.change",
        "incidents.close",
        "incidents.open",
    ]
    page = client_op.get("/changes/?target_type=setting")
    assert b"tighter" in page.content
    assert Setting.objects.get().value == 15


def test_viewer_sees_overview_and_changes(client, viewer):
    client.force_login(viewer)
    assert client.get("/").status_code == 200
    assert client.get("/api/changes").status_code == 200
    assert client.get("/api/dr").status_code == 200
    assert client.get("/api/mail").status_code == 200


def test_api_needs_login(client):
    for url in (
        "/api/overview",
        "/api/changes",
        "/api/incidents",
        "/api/settings",
        "/api/dr",
        "/api/mail",
        "/api/emergency",
        "/api/metrics",
    ):
        assert client.get(url).status_code == 401, url
