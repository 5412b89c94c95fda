"""The tool registry: SPEC §4 coverage and tiers, bounded schemas, exporters, open registration."""

from __future__ import annotations

import pytest
from pydantic import Field

from hal.tools import (
    Tool,
    ToolArgs,
    all_tools,
    anthropic_tools,
    get_tool,
    openai_tools,
    register_tool,
    tool_specs,
    unregister_tool,
)
from hal.tools.registry import READ, READS_HAL, Hints

# SPEC §4: every console capability, with its tier.
EXPECTED_TIERS = {
    # read — health, overview, servers, metrics, releases (+ modules), jobs, incidents,
    # audit, mail service, emergency recovery, DR, change history, skill
    "get_health": "read",
    "get_overview": "read",
    "list_servers": "read",
    "get_server": "read",
    "get_metrics": "read",
    "list_modules": "read",
    "list_releases": "read",
    "list_jobs": "read",
    "get_job": "read",
    "list_incidents": "read",
    "get_incident": "read",
    "search_audit": "read",
    "get_mail_status": "read",
    "get_emergency_status": "read",
    "get_dr_status": "read",
    "list_settings": "read",
    "get_change_history": "read",
    "get_skill": "read",
    # write — register/approve server, maintenance, open/close incident,
    # cancel/retry/resume/stop job, module health check, DR snapshot
    "register_server": "write",
    "approve_server": "write",
    "set_server_maintenance": "write",
    "open_incident": "write",
    "close_incident": "write",
    "annotate_incident": "write",
    "reopen_incident": "write",
    "escalate_incident": "write",
    "cancel_job": "write",
    "retry_job": "write",
    "resume_job": "write",
    "stop_job": "write",
    "check_module_health": "write",
    "restart_module": "write",
    "take_dr_snapshot": "write",
    "check_mail_relay": "write",
    "enter_emergency_mode": "write",
    "leave_emergency_mode": "write",
    # high-risk — isolate/delete server, deploy/roll back/reconcile module,
    # approve release, revert job, change settings
    "isolate_server": "high_risk",
    "delete_server": "high_risk",
    "deploy_release": "high_risk",
    "rollback_module": "high_risk",
    "reconcile_module": "high_risk",
    "approve_release": "high_risk",
    "revert_job": "high_risk",
    "change_setting": "high_risk",
}

HIGH_RISK_ACTIONS = {
    "isolate_server": "servers.isolate",
    "delete_server": "servers.delete",
    "deploy_release": "releases.deploy",
    "rollback_module": "modules.rollback",
    "reconcile_module": "modules.reconcile",
    "approve_release": "releases.approve",
    "revert_job": "jobs.revert",
    "change_setting": "settings.change",
}

# Property names that would smell of a shell, a file or a free network target.
FORBIDDEN_PROPERTIES = {
    "command",
    "cmd",
    "shell",
    "script",
    "argv",
    "exec",
    "path",
    "file",
    "filename",
    "directory",
    "dir",
    "url",
    "uri",
    "host",
    "address",
    "port",
    "endpoint",
    "target_url",
}


def builtin_tools():
    return [t for t in all_tools() if t.name in EXPECTED_TIERS]


def test_every_spec_capability_is_a_tool_with_its_tier():
    actual = {t.name: t.tier for t in builtin_tools()}
    assert actual == EXPECTED_TIERS


def test_high_risk_tools_use_the_confirmation_registry():
    from hal.actions.confirm import HIGH_RISK

    for name, code in HIGH_RISK_ACTIONS.items():
        tool = get_tool(name)
        assert tool.action_code == code
        assert code in HIGH_RISK, f"{code} is not registered for the three-step confirmation"


def _walk(schema, path="$"):
    yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from _walk(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{path}[]")
    for option in schema.get("anyOf", []):
        yield from _walk(option, path)


@pytest.mark.parametrize("tool", builtin_tools(), ids=lambda t: t.name)
def test_schemas_are_closed_and_bounded(tool):
    schema = tool.input_schema
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert "$defs" not in schema and "$ref" not in str(schema)
    for path, node in _walk(schema):
        kind = node.get("type")
        if kind == "string" and "enum" not in node:
            assert "maxLength" in node, f"{tool.name} {path} is an unbounded string"
        if kind == "array":
            assert "maxItems" in node, f"{tool.name} {path} is an unbounded list"
        if kind == "integer":
            assert "maximum" in node, f"{tool.name} {path} is an unbounded integer"
    names = {p.rsplit(".", 1)[-1].rstrip("[]") for p, _ in _walk(schema)}
    assert not names & FORBIDDEN_PROPERTIES, f"{tool.name} takes {names & FORBIDDEN_PROPERTIES}"


def test_no_schema_has_a_top_level_combinator():
    """The Anthropic Messages API refuses a request whose tools have oneOf/allOf/anyOf at
    the top of input_schema (tests/fakes/anthropic_api.py does the same)."""
    for tool in all_tools():
        assert not {"oneOf", "allOf", "anyOf"} & set(tool.input_schema), tool.name


@pytest.mark.parametrize("tool", builtin_tools(), ids=lambda t: t.name)
def test_descriptions_say_what_happens(tool):
    assert len(tool.description) >= 20
    if tool.tier != "read":
        assert "proposal" in tool.description.lower()


def test_exporters_share_one_definition():
    anthropic = {t["name"]: t for t in anthropic_tools()}
    openai = {t["function"]["name"]: t for t in openai_tools()}
    specs = {s.name: s for s in tool_specs()}
    assert set(anthropic) == set(openai) == set(specs) >= set(EXPECTED_TIERS)
    for name, tool in anthropic.items():
        assert set(tool) == {"name", "description", "input_schema"}
        assert openai[name]["type"] == "function"
        assert openai[name]["function"]["parameters"] == tool["input_schema"]
        assert openai[name]["function"]["description"] == tool["description"]
        assert specs[name].input_schema == tool["input_schema"]
        assert specs[name].to_anthropic() == tool


def test_tier_filter():
    reads = anthropic_tools(tiers=["read"])
    names = {t["name"] for t in reads}
    assert {n for n, t in EXPECTED_TIERS.items() if t == "read"} <= names
    assert not names & {n for n, t in EXPECTED_TIERS.items() if t != "read"}


def test_no_tool_approves_rejects_or_edits_proposals():
    for tool in all_tools():
        assert "proposal" not in tool.name
        for word in ("approve_proposal", "reject_proposal", "edit_proposal"):
            assert word not in tool.name


class EchoArgs(ToolArgs):
    word: str = Field(max_length=10)


def test_registration_is_open_to_other_packages():
    tool = Tool(
        name="echo_word",
        tier="read",
        description="Echo one word back (test tool).",
        args=EchoArgs,
        handler=lambda actor, a, confirmation=None: {"word": a["word"]},
        hints=READS_HAL,
    )
    register_tool(tool)
    try:
        assert get_tool("echo_word") is tool
        assert "echo_word" in {t["name"] for t in anthropic_tools()}
        with pytest.raises(ValueError):
            register_tool(tool)  # no silent replacement
    finally:
        unregister_tool("echo_word")
    assert get_tool("echo_word") is None


def test_registration_refuses_open_argument_models():
    from pydantic import BaseModel

    class Loose(BaseModel):
        word: str = ""

    with pytest.raises(ValueError):
        register_tool(
            Tool(
                name="loose",
                tier="read",
                description="x" * 30,
                args=Loose,
                handler=lambda *a, **k: None,
                hints=READS_HAL,
            )
        )
    with pytest.raises(ValueError):
        register_tool(
            Tool(
                name="risky",
                tier="high_risk",
                description="x" * 30,
                args=EchoArgs,
                handler=lambda *a, **k: None,
                hints=READS_HAL,
            )
        )


def test_a_tool_must_declare_its_hints():
    """Issue 48 item 2: what a tool does (read-only, destructive, idempotent, open world)
    is declared with the tool, never guessed from its tier: a tool without it is refused,
    and every registered tool has it."""
    with pytest.raises(ValueError, match="hints"):
        register_tool(
            Tool(
                name="hintless",
                tier="read",
                description="x" * 30,
                args=EchoArgs,
                handler=lambda *a, **k: None,
            )
        )
    assert get_tool("hintless") is None
    tools = all_tools()
    assert len(tools) > 40
    for tool in tools:
        assert isinstance(tool.hints, Hints), tool.name
        # A read-only tool cannot be destructive; a read tier tool is read-only.
        assert not (tool.hints.read_only and tool.hints.destructive), tool.name
        if tool.tier == READ:
            assert tool.hints.read_only, tool.name
    by_name = {t.name: t.hints for t in tools}
    assert by_name["fetch_url"].open_world and by_name["web_search"].open_world
    assert by_name["fetch_url"].read_only
    assert not by_name["list_servers"].open_world
    assert by_name["delete_server"].destructive and not by_name["approve_release"].destructive
    assert by_name["restart_module"].destructive and not by_name["restart_module"].idempotent
    assert not by_name["open_incident"].idempotent and by_name["close_incident"].idempotent
    assert by_name["cancel_job"].destructive and not by_name["retry_job"].idempotent
    assert by_name["check_mail_relay"].open_world


def test_the_models_see_a_replaced_tool_as_it_is_now():
    """The chat's specs (kept between calls: building them costs ~10 ms) follow every
    change of the registry, a replacement under the same name included."""
    from chatrooms import integration

    def echo(description: str) -> Tool:
        return Tool(
            name="echo_word",
            tier="read",
            description=description,
            args=EchoArgs,
            handler=lambda actor, a, confirmation=None: {"word": a["word"]},
            hints=READS_HAL,
        )

    def described() -> str | None:
        return next(
            (s.description for s in integration.tool_specs() if s.name == "echo_word"), None
        )

    register_tool(echo("Echo one word back (test tool)."))
    try:
        assert described() == "Echo one word back (test tool)."
        register_tool(echo("Echo one word back, in the new wording."), replace=True)
        assert described() == "Echo one word back, in the new wording."
    finally:
        unregister_tool("echo_word")
    assert described() is None


def test_the_models_see_a_proposal_reference_registered_after_their_specs_were_built():
    """A write tool's schema offers the registered proposal references: registering or
    withdrawing one changes what the chat's kept specs say."""
    from chatrooms import integration
    from hal.tools.registry import register_proposal_reference, unregister_proposal_reference

    def offered() -> bool:
        writes = [s for s in integration.tool_specs() if get_tool(s.name).tier != "read"]
        assert writes
        return all("ticket_ref" in s.input_schema["properties"] for s in writes)

    assert not offered()  # built and kept before the reference exists
    register_proposal_reference(
        "ticket_ref", {"type": "string", "maxLength": 40}, lambda actor, value: {"ticket": value}
    )
    try:
        assert offered()
    finally:
        unregister_proposal_reference("ticket_ref")
    assert not offered()
