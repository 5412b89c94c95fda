"""list_runbooks / read_runbook through the registry, and a proposal carrying its runbook."""

from __future__ import annotations

import pytest

from hal.actions.base import Actor
from hal.models import AuditEntry, Proposal, Server
from hal.tools import get_tool, run_tool_call
from runbooks import actions

pytestmark = pytest.mark.django_db


@pytest.fixture
def ai_actor(operator) -> Actor:
    return Actor(user=operator, via="ai", label=operator.username)


def test_tools_are_registered_as_reads():
    assert get_tool("list_runbooks").tier == "read"
    assert get_tool("read_runbook").tier == "read"
    assert "runbook" not in get_tool("read_runbook").input_schema["properties"]
    ref = get_tool("approve_server").input_schema["properties"]["runbook"]
    assert ref["required"] == ["id", "version"] and ref["additionalProperties"] is False


def test_read_runbook_schema_says_id_or_title():
    import jsonschema

    schema = get_tool("read_runbook").input_schema
    validator = jsonschema.Draft202012Validator(schema)
    for good in ({"id": 1}, {"title": "Disk full"}, {"id": 1, "version": 2}):
        assert validator.is_valid(good), good
    for bad in ({}, {"version": 2}, {"id": 1, "other": 1}):
        assert not validator.is_valid(bad), bad
    # Not as a top-level combinator: the Anthropic API refuses those (see runbooks/hooks.py).
    assert not {"anyOf", "oneOf", "allOf"} & set(schema)


def test_list_and_read_through_dispatch(disk_runbook, ai_actor):
    listed = run_tool_call("list_runbooks", {"query": "DISK"}, actor=ai_actor)
    assert listed.ok
    assert [r["cite_as"] for r in listed.result["runbooks"]] == ["Disk full on a web server (v1)"]
    assert "body" not in listed.result["runbooks"][0]
    read = run_tool_call("read_runbook", {"id": disk_runbook.pk}, actor=ai_actor)
    assert read.ok and read.result["body"].startswith("1. Read `get_metrics`")
    missing = run_tool_call("read_runbook", {"id": disk_runbook.pk, "version": 9}, actor=ai_actor)
    assert missing.error["code"] == "runbook_version_not_found"
    bad = run_tool_call("read_runbook", {"id": "1"}, actor=ai_actor)
    assert bad.error["code"] == "invalid_arguments"
    rows = AuditEntry.objects.filter(action="tools.call").order_by("id")
    assert list(rows.values_list("target_id", "result")) == [
        ("list_runbooks", "ok"),
        ("read_runbook", "ok"),
        ("read_runbook", "refused"),
        ("read_runbook", "refused"),
    ]


def test_a_proposal_records_the_runbook_it_came_from(disk_runbook, ai_actor, admin_actor):
    Server.objects.create(hostname="new-01")
    actions.check_edit_runbook(
        actor=admin_actor, runbook_id=disk_runbook.pk, title=disk_runbook.title, body="v2"
    )
    outcome = run_tool_call(
        "approve_server",
        {"server": "new-01", "runbook": {"id": disk_runbook.pk, "version": 1}},
        actor=ai_actor,
    )
    assert outcome.ok, outcome.error
    proposal = Proposal.objects.get()
    assert proposal.arguments == {"server": "new-01"}  # the reference is not an argument
    expected = {"id": disk_runbook.pk, "version": 1, "title": "Disk full on a web server"}
    assert proposal.runbook == expected
    assert proposal.as_dict()["runbook"] == expected
    assert outcome.as_payload()["proposal"]["runbook"] == expected
    audit = AuditEntry.objects.get(action="proposals.create")
    assert audit.after["runbook"] == expected


def test_a_proposal_without_runbook_stores_none(ai_actor):
    Server.objects.create(hostname="new-01")
    assert run_tool_call("approve_server", {"server": "new-01"}, actor=ai_actor).ok
    assert Proposal.objects.get().as_dict()["runbook"] is None


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ({"id": 999, "version": 1}, "runbook_not_found"),
        ({"id": "RB", "version": 1}, "invalid_arguments"),
        ({"id": 1}, "invalid_arguments"),
        ("Disk full", "invalid_arguments"),
        ("VERSION", "runbook_version_not_found"),
    ],
)
def test_a_bad_runbook_reference_creates_nothing(disk_runbook, ai_actor, ref, code):
    Server.objects.create(hostname="new-01")
    if ref == "VERSION":
        ref = {"id": disk_runbook.pk, "version": 5}
    outcome = run_tool_call("approve_server", {"server": "new-01", "runbook": ref}, actor=ai_actor)
    assert outcome.error["code"] == code
    assert Proposal.objects.count() == 0
    row = AuditEntry.objects.get(action="tools.call")
    assert (row.result, row.error_code) == ("refused", code)


def test_an_archived_runbook_is_withdrawn_from_models(disk_runbook, ai_actor, admin_actor):
    from runbooks.services import prompt_section

    Server.objects.create(hostname="new-01")
    page = {"page": "servers", "path": "/servers/web-01/"}
    assert disk_runbook.title in prompt_section(page)  # offered while it is live
    actions.check_archive_runbook(actor=admin_actor, runbook_id=disk_runbook.pk)
    # read_runbook says it is archived, by id or by title, and serves no body.
    for arguments in ({"id": disk_runbook.pk}, {"title": disk_runbook.title}):
        read = run_tool_call("read_runbook", arguments, actor=ai_actor)
        assert not read.ok and read.error["code"] == "runbook_archived", read
        assert "archived" in read.error["message"] and disk_runbook.title in read.error["message"]
        assert "body" not in (read.result or {})
    # Not listed, not offered by the page's prompt section.
    listed = run_tool_call("list_runbooks", {"query": "disk"}, actor=ai_actor)
    assert listed.ok and listed.result["runbooks"] == []
    assert prompt_section(page) == ""
    # Refused as a proposal's reference: nothing is proposed.
    outcome = run_tool_call(
        "approve_server",
        {"server": "new-01", "runbook": {"id": disk_runbook.pk, "version": 1}},
        actor=ai_actor,
    )
    assert outcome.error["code"] == "runbook_archived"
    assert Proposal.objects.count() == 0
    # Operators still read it (the runbooks page and API).
    from runbooks.services import read_version

    assert read_version(admin_actor, runbook=disk_runbook.pk)["archived"] is True


def test_a_proposal_made_before_its_runbook_was_archived_says_so(
    disk_runbook, ai_actor, admin_actor
):
    from hal.actions.proposals.reads import proposal_json

    Server.objects.create(hostname="new-01")
    ref = {"id": disk_runbook.pk, "version": 1}
    assert run_tool_call("approve_server", {"server": "new-01", "runbook": ref}, actor=ai_actor).ok
    proposal = Proposal.objects.get()
    assert proposal_json(admin_actor, proposal)["runbook_archived"] is False
    actions.check_archive_runbook(actor=admin_actor, runbook_id=disk_runbook.pk)
    shown = proposal_json(admin_actor, proposal)
    assert shown["runbook_archived"] is True and shown["runbook"]["id"] == disk_runbook.pk
    assert run_tool_call("approve_server", {"server": "new-01"}, actor=ai_actor).ok
    uncited = Proposal.objects.exclude(pk=proposal.pk).get()
    assert "runbook_archived" not in proposal_json(admin_actor, uncited)
