"""Fleet pages and JSON API: render, permissions, status codes, three-step over HTTP."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from hal.models import Job, Release, Server
from tests.fleet.conftest import make_artifact

pytestmark = pytest.mark.django_db


def post(client, url, body=None):
    return client.post(url, body or {}, content_type="application/json")


def test_pages_render(client_op, active_server, op):
    from hal.actions import releases

    r = releases.check_register_release(
        actor=op, module="portal", version="1.0", artifact=make_artifact()
    )
    j = Job.objects.create(kind=Job.HEALTH_CHECK, server=active_server)
    for url in [
        "/servers/",
        f"/servers/{active_server.pk}/",
        "/modules/",
        "/modules/portal/",
        "/releases/",
        "/jobs/",
        f"/jobs/{j.pk}/",
    ]:
        response = client_op.get(url)
        assert response.status_code == 200, url
    body = client_op.get("/modules/portal/").content.decode()
    assert r.sha256[:16] in body and 'data-hr-action="releases.approve"' in body
    assert client_op.get("/servers/999999/").status_code == 404


def test_pages_need_login(client):
    assert client.get("/servers/").status_code == 302


def test_api_register_approve_and_wrong_state(client_op):
    r = post(client_op, "/api/servers", {"hostname": "api1.test"})
    assert r.status_code == 201 and r.json()["server"]["status"] == "pending"
    r = post(client_op, "/api/servers/api1.test/approve")
    assert r.status_code == 200 and r.json()["server"]["status"] == "unreachable"
    assert r.json()["server"]["stored_status"] == "active"
    r = post(client_op, "/api/servers/api1.test/approve")
    assert r.status_code == 409 and r.json()["error"]["code"] == "server_not_pending"
    assert client_op.get("/api/servers/nope.test").status_code == 404
    listing = client_op.get("/api/servers").json()["servers"]
    assert [s["hostname"] for s in listing] == ["api1.test"]


def test_api_viewer_is_forbidden_to_write(client, viewer, server):
    client.force_login(viewer)
    assert client.get("/api/servers").status_code == 200
    r = post(client, f"/api/servers/{server.pk}/approve")
    assert r.status_code == 403 and r.json()["error"]["code"] == "permission_denied"
    r = client.patch(
        "/api/modules/portal", {"restart_command": ["/bin/true"]}, content_type="application/json"
    )
    assert r.status_code == 403


def test_api_release_upload_and_three_step_deploy(reauthed, active_server):
    upload = SimpleUploadedFile("portal.tar.gz", make_artifact(), "application/gzip")
    r = reauthed.post("/api/releases", {"module": "portal", "version": "1.2.3", "artifact": upload})
    assert r.status_code == 201, r.content
    rel = r.json()["release"]
    assert rel["status"] == "draft" and len(rel["sha256"]) == 64

    def three_step(action, params):
        c = post(reauthed, "/api/confirmations", {"action": action, "params": params})
        assert c.status_code == 201, c.content
        conf = c.json()["confirmation"]
        t = post(
            reauthed,
            f"/api/confirmations/{conf['token']}/target",
            {"target": conf["target_identifier"]},
        )
        assert t.status_code == 200, t.content
        return post(reauthed, f"/api/confirmations/{conf['token']}/execute")

    # Deploying a draft release: refused with 409 release_not_approved.
    e = three_step("releases.deploy", {"release": "portal@1.2.3", "server": active_server.hostname})
    assert e.status_code == 409 and e.json()["error"]["code"] == "release_not_approved"
    e = three_step("releases.approve", {"release": "portal@1.2.3"})
    assert e.status_code == 200 and Release.objects.get().status == "approved"
    e = three_step("releases.deploy", {"release": "portal@1.2.3", "server": active_server.hostname})
    assert e.status_code == 200, e.content
    job = Job.objects.get(kind=Job.DEPLOY)
    detail = reauthed.get(f"/api/jobs/{job.pk}").json()
    assert detail["job"]["status"] == "queued" and detail["log"]
    r = post(reauthed, f"/api/jobs/{job.pk}/cancel")
    assert r.status_code == 200 and r.json()["job"]["status"] == "cancelled"
    r = post(reauthed, f"/api/jobs/{job.pk}/cancel")
    assert r.status_code == 409 and r.json()["error"]["code"] == "job_not_cancellable"


def test_api_enrolment_token_shown_once(client_op):
    r = post(client_op, "/api/enrolment-tokens", {"note": "rack"})
    assert r.status_code == 201
    raw = r.json()["token"]
    listing = client_op.get("/api/enrolment-tokens").content.decode()
    assert raw not in listing and raw[-4:] in listing


def test_form_post_approve_and_page_shows_message(client_op, server):
    r = client_op.post(f"/servers/{server.pk}/approve", follow=True)
    assert r.status_code == 200 and "approved" in r.content.decode()
    assert Server.objects.get(pk=server.pk).status == Server.ACTIVE
