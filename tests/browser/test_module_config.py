"""The module page in a real browser: changing the restart command runs the three-step dialog
(impact with before/after → retype the module name → execute), and a restart asks for the
password when the re-auth is stale, then queues a job bound to the argv that was shown."""

from __future__ import annotations

import pytest

from hal.actions.base import Actor
from hal.actions.servers import check_approve_server, check_register_server
from hal.agent.ops import argv_sha256
from hal.models import AuditEntry, Job, Module
from tests.browser.conftest import login, screenshot
from tests.browser.helpers import expire_reauth

pytestmark = pytest.mark.django_db(transaction=True)

ARGV = ["/bin/systemctl", "restart", "portal"]


def test_configure_through_the_dialog_then_restart_with_reauth(live_asgi, page_factory, operator):
    Module.objects.get_or_create(name="portal", defaults={"description": "Customer portal"})
    system = Actor.for_system("cli", "test")
    server = check_register_server(actor=system, hostname="web-01")
    check_approve_server(actor=system, server=server.pk)

    page = page_factory()
    login(page, live_asgi.url, operator)
    page.goto(live_asgi.url + "/modules/portal/")
    form = page.locator("form[data-hr-form='modules.configure']")
    form.locator("input[name=restart_command]").fill('["/bin/systemctl", "restart", "portal"]')
    form.locator("button[type=submit]").click()
    dialog = page.locator("dialog.hr-dialog")
    dialog.locator("h2").wait_for()  # step 1: the impact, with before/after and the sha256
    assert argv_sha256(ARGV) in dialog.locator(".impact").inner_text()
    assert Module.objects.get(name="portal").restart_command == []  # nothing yet
    dialog.locator("input").first.fill("portal")
    with page.expect_navigation():
        dialog.locator("button.danger").click()
    assert Module.objects.get(name="portal").restart_command == ARGV
    entry = AuditEntry.objects.get(action="modules.configure", result="ok")
    assert entry.before == {"health_check_url": "", "restart_command": []}
    screenshot(page, "module-configured")

    expire_reauth(page)  # the restart must ask for the password again
    page.locator("form[data-reauth-api] button[type=submit]").click()
    dialog = page.locator("dialog.hr-dialog")
    dialog.locator("input[type=password]").fill(operator.raw_password)
    with page.expect_navigation():
        dialog.locator("button[type=submit]").click()
    job = Job.objects.get(kind=Job.RESTART)
    assert job.params["argv"] == ARGV and job.params["argv_sha256"] == argv_sha256(ARGV)
