"""The operator's deploy story in a real browser: upload a release, approve it and deploy it
through the three-step dialog, a real node agent runs the job, the job page shows success."""

from __future__ import annotations

import io
import tarfile

import pytest

from hal.actions.base import Actor
from hal.actions.servers import check_approve_server, check_create_enrolment_token
from hal.agent.runner import HalClient, enrol, run_once
from hal.models import AuditEntry, Job, Module, Server
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import expire_reauth

pytestmark = pytest.mark.django_db(transaction=True)


def _artifact(path, version: str) -> None:
    payload = f"portal {version}\n".encode()
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("VERSION")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))


def _three_steps(page, button_text: str, target: str) -> None:
    page.get_by_role("button", name=button_text).first.click()
    dialog = page.locator("dialog.hr-dialog")
    dialog.locator("h2").wait_for()  # step 1: the impact is shown
    field = dialog.locator("input").first
    field.fill(target + "x")  # a wrong identifier is refused, nothing runs
    dialog.locator("button.danger").click()
    dialog.locator("p.error[data-code=confirmation_mismatch]").wait_for()
    field.fill(target)  # step 2: retype exactly; step 3 runs on submit
    dialog.locator("button.danger").click()


def test_upload_approve_deploy_and_watch_the_job(live_asgi, page_factory, operator, tmp_path):
    # The data migration seeds the modules, but a transactional test's flush removes them.
    Module.objects.get_or_create(name="portal", defaults={"description": "Customer portal"})
    system = Actor.for_system("cli", "test")
    _, raw = check_create_enrolment_token(actor=system)
    agent = HalClient(live_asgi.url)
    enrol(agent, raw, "web-01", tmp_path / "agent.token")
    check_approve_server(actor=system, server=Server.objects.get(hostname="web-01"))
    root = tmp_path / "agent-root"
    root.mkdir()
    artifact = tmp_path / "portal-1.4.0.tar.gz"
    _artifact(artifact, "1.4.0")

    page = page_factory()
    login(page, live_asgi.url, operator)
    page.goto(live_asgi.url + "/releases/")
    page.select_option("select[name=module]", "portal")
    page.fill("input[name=version]", "1.4.0")
    page.set_input_files("input[name=artifact]", str(artifact))
    page.locator("form[enctype='multipart/form-data'] button[type=submit]").click()
    page.wait_for_load_state("networkidle")

    page.goto(live_asgi.url + "/modules/portal/")
    with page.expect_navigation():
        _three_steps(page, "Approve", "portal@1.4.0")
    page.get_by_role("button", name="Deploy to web-01").wait_for()

    expire_reauth(page)  # the deploy must ask for the password again
    page.get_by_role("button", name="Deploy to web-01").click()
    dialog = page.locator("dialog.hr-dialog")
    dialog.locator("h2").wait_for()
    dialog.locator("input").first.fill("portal@1.4.0")
    dialog.locator("button.danger").click()
    dialog.locator("input[type=password]").fill(operator.raw_password)
    with page.expect_navigation():  # re-auth, then execute, then the page reloads
        dialog.locator("button[type=submit]").click()

    job = Job.objects.get(kind="deploy")
    assert job.status == "queued"
    assert run_once(agent, root)["jobs"] == 1  # the node agent claims and runs it
    assert (root / "portal" / "current").resolve().name == "1.4.0"

    page.goto(f"{live_asgi.url}/jobs/{job.pk}/")
    assert "succeeded" in page.locator("main").inner_text()
    # High-risk buttons stay legible (a page stylesheet once painted red text on red).
    revert = page.locator("main button[data-hr-action]").first
    color, background = revert.evaluate(
        "b => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]"
    )
    assert revert.inner_text().strip() and color != background
    screenshot(page, "deploy-job-succeeded")
    rows = list(
        AuditEntry.objects.filter(action__in=["releases.approve", "releases.deploy"])
        .order_by("id")
        .values_list("action", "result", "error_code")
    )
    assert rows == [
        ("releases.approve", "ok", ""),
        ("releases.deploy", "refused", "reauth_required"),  # before the password dialog
        ("releases.deploy", "ok", ""),
    ]
