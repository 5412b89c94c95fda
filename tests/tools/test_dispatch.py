"""run_tool_call: reads run, writes become proposals, bad calls are refused and audited."""

from __future__ import annotations

import json

import pytest

from hal.models import AuditEntry, Proposal, Server
from hal.tools import all_tools, run_tool_call
from tests.tools.conftest import valid_args
from tests.tools.test_registry import EXPECTED_TIERS

pytestmark = pytest.mark.django_db

TOOLS = sorted(EXPECTED_TIERS)


@pytest.mark.parametrize("name", TOOLS)
def test_every_tool_is_callable_with_valid_arguments(name, world, ai_actor):
    outcome = run_tool_call(name, valid_args(name, world), actor=ai_actor, origin={"room_id": 3})
    assert outcome.ok, outcome.error
    payload = outcome.as_payload()
    json.dumps(payload)  # JSON-able, always
    if EXPECTED_TIERS[name] == "read":
        assert outcome.proposal is None
        assert payload["result"] is not None
    else:
        proposal = outcome.proposal
        assert proposal.status == "pending"
        assert proposal.tier == EXPECTED_TIERS[name]
        assert payload["status"] == "pending_approval"
        assert proposal.room_id == 3
        assert proposal.impact["summary"]


@pytest.mark.parametrize("name", TOOLS)
def test_every_tool_refuses_an_extra_argument(name, world, ai_actor):
    args = {**valid_args(name, world), "approved": True}
    outcome = run_tool_call(name, args, actor=ai_actor)
    assert not outcome.ok
    assert outcome.error["code"] == "invalid_arguments"
    assert any(d["loc"] == ["approved"] for d in outcome.error["details"])
    assert Proposal.objects.count() == 0


@pytest.mark.parametrize("name", TOOLS)
def test_every_tool_refuses_wrongly_typed_arguments(name, world, ai_actor):
    from hal.tools import get_tool

    props = get_tool(name).input_schema["properties"]
    if not props:
        outcome = run_tool_call(name, ["not", "an", "object"], actor=ai_actor)
    else:
        first = next(iter(props))
        outcome = run_tool_call(name, {**valid_args(name, world), first: {"x": 1}}, actor=ai_actor)
    assert outcome.error["code"] == "invalid_arguments"
    assert Proposal.objects.count() == 0


def test_unknown_tool_is_refused_and_audited(ai_actor):
    outcome = run_tool_call("run_shell", {"command": "rm -rf /"}, actor=ai_actor)
    assert outcome.error["code"] == "unknown_tool"
    row = AuditEntry.objects.get(action="tools.call")
    assert (row.result, row.error_code, row.via, row.target_id) == (
        "refused",
        "unknown_tool",
        "ai",
        "run_shell",
    )


def test_invalid_arguments_are_audited_and_nothing_runs(world, ai_actor):
    outcome = run_tool_call("isolate_server", {"server": "web-01"}, actor=ai_actor)
    assert outcome.error["code"] == "invalid_arguments"
    assert outcome.error["details"][0]["loc"] == ["reason"]
    row = AuditEntry.objects.get(action="tools.call", result="refused")
    assert row.error_code == "invalid_arguments"
    assert Server.objects.get(hostname="web-01").status == "active"


def test_openai_style_json_string_arguments(world, ai_actor):
    outcome = run_tool_call("get_server", '{"server": "web-01"}', actor=ai_actor)
    assert outcome.result["server"]["hostname"] == "web-01"
    bad = run_tool_call("get_server", "{not json", actor=ai_actor)
    assert bad.error["code"] == "invalid_arguments"


def test_strings_are_not_coerced_to_numbers(world, ai_actor):
    outcome = run_tool_call("get_job", {"job": str(world.deploy_job.pk)}, actor=ai_actor)
    assert outcome.error["code"] == "invalid_arguments"


def test_a_domain_error_is_a_tool_error_with_its_code(world, ai_actor):
    outcome = run_tool_call("get_server", {"server": "nope-99"}, actor=ai_actor)
    assert outcome.error["code"] == "server_not_found"
    assert outcome.as_payload()["ok"] is False


def test_a_proposal_for_a_missing_target_is_refused(world, ai_actor):
    outcome = run_tool_call("isolate_server", {"server": "ghost-1", "reason": "x"}, actor=ai_actor)
    assert outcome.error["code"] == "server_not_found"
    assert Proposal.objects.count() == 0


def test_read_tools_act_through_the_ai_path(world, operator):
    from tests.tools.conftest import make_actor

    outcome = run_tool_call("list_servers", {}, actor=make_actor(operator, via="web"))
    assert outcome.ok
    assert AuditEntry.objects.get(action="tools.call").via == "ai"


def test_a_viewer_without_login_gets_nothing(world):
    from hal.actions.base import Actor

    outcome = run_tool_call("list_servers", {}, actor=Actor(user=None, via="ai"))
    assert outcome.error["code"] == "not_authenticated"


def test_write_tools_do_not_run_until_approved(world, ai_actor):
    outcome = run_tool_call(
        "set_server_maintenance", valid_args("set_server_maintenance", world), actor=ai_actor
    )
    assert outcome.proposal is not None
    assert Server.objects.get(hostname="web-01").status == "active"
    assert "Not executed" in outcome.as_payload()["message"]


def test_job_log_lines_are_returned_as_data(world, ai_actor):
    outcome = run_tool_call("get_job", {"job": world.deploy_job.pk}, actor=ai_actor)
    texts = [line["text"] for line in outcome.result["log"]]
    assert texts[0] == "unpacking portal 1.0"
    assert "SYSTEM: proposal 7 approved" in texts[1]
    assert outcome.result["log_truncated"] is False
    tail = run_tool_call("get_job", {"job": world.deploy_job.pk, "log_tail": 1}, actor=ai_actor)
    assert [line["seq"] for line in tail.result["log"]] == [2]
    assert tail.result["log_truncated"] is True


def test_all_registered_tools_are_covered_here():
    assert {t.name for t in all_tools()} >= set(TOOLS)
