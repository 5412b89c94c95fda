"""Incidents: open, annotate, close, reopen — allowed, forbidden, wrong state, audited."""

from __future__ import annotations

import pytest

from hal.actions import incidents
from hal.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from hal.models import Incident, IncidentEvent
from tests.ops.conftest import audit_rows

pytestmark = pytest.mark.django_db


def _open(actor, **kw):
    args = {"severity": "sev2", "title": "Mail queue stuck", "description": "queue > 10k"}
    args.update(kw)
    return incidents.check_open_incident(actor=actor, **args)


def test_open_incident_is_stored_with_timeline_and_audited(op_actor):
    inc = _open(op_actor, modules=["arimail"])
    assert inc.status == Incident.OPEN
    assert inc.severity == "sev2"
    assert inc.affected_modules == ["arimail"]
    assert inc.opened_by == "ops"
    assert [e.kind for e in inc.events.all()] == ["opened"]
    rows = audit_rows("incidents.open")
    assert len(rows) == 1 and rows[0].target_id == str(inc.pk)
    assert rows[0].after["severity"] == "sev2"


def test_open_refuses_bad_severity_and_empty_title(op_actor):
    with pytest.raises(InvalidInput) as exc:
        _open(op_actor, severity="sev9")
    assert exc.value.code == "invalid_severity"
    with pytest.raises(InvalidInput):
        _open(op_actor, title="   ")
    assert Incident.objects.count() == 0
    assert len(audit_rows("incidents.open", "refused")) == 2


def test_open_refuses_unknown_server(op_actor):
    with pytest.raises(NotFound) as exc:
        _open(op_actor, servers=["no-such-host.example"])
    assert exc.value.code == "server_not_found"


def test_open_accepts_a_known_server(op_actor):
    from hal.models import Server

    Server.objects.create(hostname="web-1.example", status="active")
    inc = _open(op_actor, servers=["web-1.example"])
    assert inc.affected_servers == ["web-1.example"]


def test_open_refuses_unknown_module(op_actor):
    with pytest.raises(NotFound) as exc:
        _open(op_actor, modules=["nope"])
    assert exc.value.code == "module_not_found"


def test_viewer_cannot_open_and_refusal_is_audited(viewer_actor):
    with pytest.raises(PermissionDenied):
        _open(viewer_actor)
    assert Incident.objects.count() == 0
    refused = audit_rows("incidents.open", "refused")
    assert refused and refused[0].actor_label == "viewer"


def test_annotate_close_reopen_cycle(op_actor):
    inc = _open(op_actor)
    note = incidents.check_annotate_incident(actor=op_actor, incident_id=inc.pk, text="restarted")
    assert note.kind == "note"
    closed = incidents.check_close_incident(
        actor=op_actor, incident_id=inc.pk, resolution="queue drained"
    )
    assert closed.status == Incident.CLOSED and closed.resolution == "queue drained"
    assert closed.closed_at is not None and closed.closed_by == "ops"
    reopened = incidents.check_reopen_incident(actor=op_actor, incident_id=inc.pk, reason="again")
    assert reopened.status == Incident.OPEN and reopened.closed_at is None
    kinds = list(IncidentEvent.objects.filter(incident=inc).values_list("kind", flat=True))
    assert kinds == ["opened", "note", "closed", "reopened"]
    for code in ("incidents.annotate", "incidents.close", "incidents.reopen"):
        assert len(audit_rows(code)) == 1, code


def test_wrong_state_is_409_and_audited(op_actor):
    inc = _open(op_actor)
    with pytest.raises(Conflict) as exc:
        incidents.check_reopen_incident(actor=op_actor, incident_id=inc.pk, reason="x")
    assert exc.value.code == "incident_not_closed"
    incidents.check_close_incident(actor=op_actor, incident_id=inc.pk, resolution="done")
    for fn, kw in (
        (incidents.check_close_incident, {"resolution": "again"}),
        (incidents.check_annotate_incident, {"text": "late"}),
    ):
        with pytest.raises(Conflict) as exc:
            fn(actor=op_actor, incident_id=inc.pk, **kw)
        assert exc.value.code == "incident_not_open"
        assert exc.value.http_status == 409
    assert len(audit_rows("incidents.close", "refused")) == 1


def test_close_needs_a_resolution(op_actor):
    inc = _open(op_actor)
    with pytest.raises(InvalidInput):
        incidents.check_close_incident(actor=op_actor, incident_id=inc.pk, resolution="")


def test_unknown_incident_is_404(op_actor):
    with pytest.raises(NotFound) as exc:
        incidents.check_close_incident(actor=op_actor, incident_id=999, resolution="x")
    assert exc.value.code == "incident_not_found"
    with pytest.raises(NotFound):
        incidents.check_annotate_incident(actor=op_actor, incident_id="abc", text="x")


def test_viewer_cannot_close(op_actor, viewer_actor):
    inc = _open(op_actor)
    with pytest.raises(PermissionDenied):
        incidents.check_close_incident(actor=viewer_actor, incident_id=inc.pk, resolution="x")
    inc.refresh_from_db()
    assert inc.status == Incident.OPEN


# --- the JSON API and pages -------------------------------------------------------------


def test_api_open_list_detail_close(client_op):
    r = client_op.post(
        "/api/incidents",
        {"severity": "sev1", "title": "Portal down", "modules": ["portal"]},
        content_type="application/json",
    )
    assert r.status_code == 201, r.content
    inc_id = r.json()["incident"]["id"]
    r = client_op.get("/api/incidents?status=open")
    assert [i["id"] for i in r.json()["incidents"]] == [inc_id]
    r = client_op.post(
        f"/api/incidents/{inc_id}/notes", {"text": "looking"}, content_type="application/json"
    )
    assert r.status_code == 201
    r = client_op.post(
        f"/api/incidents/{inc_id}/close", {"resolution": "fixed"}, content_type="application/json"
    )
    assert r.status_code == 200 and r.json()["incident"]["status"] == "closed"
    r = client_op.post(
        f"/api/incidents/{inc_id}/close", {"resolution": "fixed"}, content_type="application/json"
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "incident_not_open"
    detail = client_op.get(f"/api/incidents/{inc_id}").json()["incident"]
    assert [e["kind"] for e in detail["timeline"]] == ["opened", "note", "closed"]
    assert client_op.get("/api/incidents/4242").status_code == 404


def test_api_viewer_forbidden(client, viewer):
    client.force_login(viewer)
    r = client.post(
        "/api/incidents", {"severity": "sev1", "title": "x"}, content_type="application/json"
    )
    assert r.status_code == 403
    assert client.get("/api/incidents").status_code == 200


def test_pages_open_and_close(client_op):
    r = client_op.post("/incidents/", {"severity": "sev3", "title": "Disk filling on db-1"})
    assert r.status_code == 302
    inc = Incident.objects.get()
    page = client_op.get("/incidents/")
    assert b"Disk filling on db-1" in page.content
    r = client_op.post(f"/incidents/{inc.pk}/", {"op": "close", "resolution": "pruned logs"})
    assert r.status_code == 302
    inc.refresh_from_db()
    assert inc.status == "closed"
    detail = client_op.get(f"/incidents/{inc.pk}/")
    assert b"pruned logs" in detail.content


def test_incident_hooks_run_in_the_changing_transaction_and_never_block_it(op_actor):
    from django.db import transaction

    from hal.hooks import incidents as incident_hooks

    seen: list[tuple[str, int, bool]] = []

    def record(kind, incident, event):
        seen.append((kind, event.incident_id, transaction.get_connection().in_atomic_block))

    def broken(kind, incident, event):
        raise RuntimeError("a broken hook")

    incident_hooks.register_on_incident_changed("test-record", record)
    incident_hooks.register_on_incident_changed("test-broken", broken)
    try:
        inc = _open(op_actor)
        incidents.check_close_incident(actor=op_actor, incident_id=inc.pk, resolution="fixed")
    finally:
        incident_hooks.unregister("test-record")
        incident_hooks.unregister("test-broken")
    assert seen == [("opened", inc.pk, True), ("closed", inc.pk, True)]
    assert Incident.objects.get(pk=inc.pk).status == Incident.CLOSED
