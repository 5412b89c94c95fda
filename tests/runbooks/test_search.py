"""Search and reads: title/tags/body, case-insensitive; versions by number; scopes."""

from __future__ import annotations

import pytest

from hal.errors import HalError
from runbooks import actions, services

pytestmark = pytest.mark.django_db


@pytest.fixture
def many(admin_actor, disk_runbook):
    actions.check_create_runbook(
        actor=admin_actor, title="Mail relay down", body="Check SMTP greeting.", tags=["mail"]
    )
    actions.check_create_runbook(
        actor=admin_actor,
        title="Portal deploy",
        body="Use deploy_release; watch the HEALTH check.",
        tags=["deploy"],
        scopes={"modules": ["portal"]},
    )
    return disk_runbook


@pytest.mark.parametrize(
    ("query", "titles"),
    [
        ("disk", ["Disk full on a web server"]),  # title, other case
        ("MAIL", ["Mail relay down"]),  # title
        ("smtp", ["Mail relay down"]),  # body, other case
        ("health", ["Portal deploy"]),  # body
        ("deploy", ["Portal deploy"]),  # title + tag
        ("", ["Disk full on a web server", "Mail relay down", "Portal deploy"]),
        ("nothing-like-this", []),
    ],
)
def test_search_title_tags_body_case_insensitive(many, admin_actor, query, titles):
    found = services.search_runbooks(admin_actor, query=query)
    assert [r.title for r in found] == titles


def test_tag_and_scope_filters(many, plain_actor):
    assert [r.title for r in services.search_runbooks(plain_actor, tag="WEB")] == [
        "Disk full on a web server"
    ]
    assert [r.title for r in services.search_runbooks(plain_actor, scope="portal")] == [
        "Portal deploy"
    ]
    assert [r.title for r in services.search_runbooks(plain_actor, scope="web-01")] == [
        "Disk full on a web server"
    ]


def test_archived_runbooks_are_not_listed(many, admin_actor):
    actions.check_archive_runbook(actor=admin_actor, runbook_id=many.pk)
    assert "Disk full on a web server" not in [
        r.title for r in services.search_runbooks(admin_actor)
    ]
    assert services.search_runbooks(admin_actor, query="disk", include_archived=True)


def test_read_a_version_by_id_or_title(disk_runbook, admin_actor):
    actions.check_edit_runbook(
        actor=admin_actor, runbook_id=disk_runbook.pk, title=disk_runbook.title, body="v2 body"
    )
    current = services.read_version(admin_actor, title="disk full ON a web server")
    assert (current["version"], current["body"], current["cite_as"]) == (
        2,
        "v2 body",
        "Disk full on a web server (v2)",
    )
    old = services.read_version(admin_actor, runbook=disk_runbook.pk, version=1)
    assert old["version"] == 1 and old["latest_version"] == 2
    with pytest.raises(HalError) as err:
        services.read_version(admin_actor, runbook=disk_runbook.pk, version=3)
    assert err.value.code == "runbook_version_not_found"
    with pytest.raises(HalError) as err:
        services.read_version(admin_actor, title="nope")
    assert err.value.code == "runbook_not_found"
