"""Issue 41 item 8 (a): a control character in a one-line field is refused AT THE ACTION.

An outside red team put a CR/LF into an incident title through `POST /api/incidents`
(which only stripped the ends): the title reached an e-mail subject, Python's `email`
refused the header and the outbox stalled. Every one-line field of the actions layer —
names, titles, labels, addresses, identifiers — goes through one helper
(`hal.actions.oneline`), so every path (web, API, AI tools, MCP, commands, admin) gets the
same refusal: 400 `invalid_text` naming the field, and nothing changed.

Each case below drives one field of one `check_*` with a bad value and compares a
snapshot of what that action would change, before and after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from hal.actions.base import Actor
from hal.errors import HalError

pytestmark = pytest.mark.django_db

# CR/LF (the header injection), an escape sequence (a terminal's colours in a log), the
# Unicode line separator, a right-to-left override (a label that reads backwards), DEL.
BAD = ["db-1\r\nBcc: someone@example.test", "db\x1b[31m-1", "db\u2028-1", "db\u202e-1", "db\x7f"]


def _actor(user) -> Actor:
    return Actor(user=user, via="api", label=user.username, reauth_at=time.time())


def _incident_title(actor, bad):
    from hal.actions.incidents import check_open_incident

    check_open_incident(actor=actor, severity="sev3", title=bad)


def _server_address(actor, bad):
    from hal.actions.servers import check_register_server

    check_register_server(actor=actor, hostname="web-9.example.test", address=bad)


def _server_description(actor, bad):
    from hal.actions.servers import check_register_server

    check_register_server(actor=actor, hostname="web-9.example.test", description=bad)


def _enrolment_note(actor, bad):
    from hal.actions.servers import check_create_enrolment_token

    check_create_enrolment_token(actor=actor, note=bad)


def _module_description(actor, bad):
    from hal.actions.modules import check_configure_module

    check_configure_module(actor=actor, module="portal", description=bad)


def _release_version(actor, bad):
    from hal.actions.releases import check_register_release
    from tests.fleet.conftest import make_artifact

    # A trailing "\n" is what a `$`-anchored pattern let through.
    version = "1.0\n" if "\n" in bad else "1.0" + next(ch for ch in bad if not ch.isprintable())
    check_register_release(actor=actor, module="portal", version=version, artifact=make_artifact())


def _release_artifact_name(actor, bad):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from hal.actions.releases import check_register_release
    from tests.fleet.conftest import make_artifact

    upload = SimpleUploadedFile(f"{bad}.tar.gz", make_artifact())
    check_register_release(actor=actor, module="portal", version="1.0", artifact=upload)


def _text_setting(actor, bad):
    from hal.actions.confirm import check_start_confirmation
    from hal.actions.settings import REGISTRY, register_setting

    register_setting("test.label", type="str", default="plain", description="a test label")
    try:
        check_start_confirmation(
            actor=actor, action_code="settings.change", params={"name": "test.label", "value": bad}
        )
    finally:
        REGISTRY.pop("test.label", None)


def _user_first_name(actor, bad):
    from hal.actions.accounts import check_update_user

    check_update_user(actor=actor, user=actor.user.pk, data={"first_name": bad})


def _group_name(actor, bad):
    from hal.actions.accounts import check_save_group

    check_save_group(actor=actor, data={"name": bad})


def _mcp_token_name(actor, bad):
    from hal.actions.mcp_tokens import check_create_mcp_token

    check_create_mcp_token(actor=actor, name=bad, ttl_days=30)


def _panel_tab_title(actor, bad):
    from hal.actions.operators import check_save_panel_state

    check_save_panel_state(actor=actor, state={"tab_titles": {"1": bad}})


def _connection(actor, **data):
    from providers.actions import check_create_connection

    return check_create_connection(
        actor=actor, data={"name": "gpt", "provider": "openai_compat", **data}
    )


def _connection_role(actor, bad):
    _connection(actor, role=bad)


def _connection_base_url(actor, bad):
    _connection(actor, base_url="https://models.example.test/" + bad)


def _connection_rename(actor, bad):
    from providers.actions import check_update_connection
    from providers.models import AIConnection

    conn = AIConnection.objects.get(name="seed")
    check_update_connection(actor=actor, connection=conn.pk, data={"name": bad})


def _room_title(actor, bad):
    from chatrooms.actions import check_rename_room
    from chatrooms.models import Room

    room = Room.objects.get(operator=actor.user, kind=Room.INDIVIDUAL)
    check_rename_room(actor=actor, room_id=room.pk, title=bad)


def _channel_name(actor, bad):
    from notifications.actions import check_add_channel

    check_add_channel(actor=actor, kind="email", name=bad, address="ops@example.test")


def _channel_address(actor, bad):
    from notifications.actions import check_add_channel

    check_add_channel(actor=actor, kind="email", name="mail", address="ops@example.test" + bad)


def _runbook_title(actor, bad):
    from runbooks.actions import check_create_runbook

    check_create_runbook(actor=actor, title=bad, body="Check the disk.")


def _runbook_note(actor, bad):
    from runbooks.actions import check_edit_runbook
    from runbooks.models import Runbook

    book = Runbook.objects.get(title="seed")
    check_edit_runbook(
        actor=actor, runbook_id=book.pk, title="seed", body="v2", base_version=1, note=bad
    )


def _runbook_scope(actor, bad):
    from runbooks.actions import check_create_runbook

    check_create_runbook(actor=actor, title="disk", body="x", scopes={"servers": [bad]})


def _allow_domain_note(actor, bad):
    from webfetch.sources import check_save_allow_domain

    check_save_allow_domain(actor=actor, data={"domain": "docs.example.test", "note": bad})


def _curated_title(actor, bad):
    from webfetch.sources import check_save_curated_source

    check_save_curated_source(
        actor=actor,
        data={"domain": "docs.example.test", "url": "https://docs.example.test/", "title": bad},
    )


def _curated_tags(actor, bad):
    from webfetch.sources import check_save_curated_source

    check_save_curated_source(
        actor=actor,
        data={"domain": "docs.example.test", "title": "Docs", "tags": bad},
    )


def _snapshot() -> dict[str, Any]:
    """Every row these actions could write (a refused action must leave all of it alone)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from chatrooms.models import Room
    from hal.models import (
        AuditEntry,
        EnrolmentToken,
        Incident,
        McpToken,
        Module,
        OperatorProfile,
        Release,
        Server,
        Setting,
    )
    from notifications.models import Channel, Event
    from providers.models import AIConnection
    from runbooks.models import Runbook, RunbookVersion
    from webfetch.models import CuratedSource, FetchAllowDomain

    return {
        "incidents": list(Incident.objects.values_list("title", flat=True)),
        "events": Event.objects.count(),
        "servers": list(Server.objects.values_list("hostname", "address", "description")),
        "enrol": EnrolmentToken.objects.count(),
        "modules": list(Module.objects.values_list("name", "description")),
        "releases": list(Release.objects.values_list("version", "artifact_name")),
        "settings": list(Setting.objects.values_list("name", "value")),
        "users": list(get_user_model().objects.values_list("username", "first_name")),
        "groups": list(Group.objects.values_list("name", flat=True)),
        "tokens": McpToken.objects.count(),
        "panels": list(OperatorProfile.objects.values_list("panel_state", flat=True)),
        "connections": list(AIConnection.objects.values_list("name", "role", "base_url")),
        "rooms": list(Room.objects.values_list("title", flat=True)),
        "channels": Channel.objects.count(),
        "runbooks": list(Runbook.objects.values_list("title", "version")),
        "versions": list(RunbookVersion.objects.values_list("note", flat=True)),
        "allow": FetchAllowDomain.objects.count(),
        "curated": CuratedSource.objects.count(),
        "audit_ok": AuditEntry.objects.filter(result="ok").count(),
    }


# (field, the action with the bad value, the code it must answer). Fields that already had
# a strict format (a connection's @name) keep their own code.
CASES: list[tuple[str, Callable[[Actor, str], None], str]] = [
    ("incident title", _incident_title, "invalid_text"),
    ("server address", _server_address, "invalid_text"),
    ("server description", _server_description, "invalid_text"),
    ("enrolment token note", _enrolment_note, "invalid_text"),
    ("module description", _module_description, "invalid_text"),
    ("release version", _release_version, "invalid_version"),
    ("release artifact name", _release_artifact_name, "invalid_text"),
    ("text setting value", _text_setting, "invalid_text"),
    ("user first name", _user_first_name, "invalid_text"),
    ("group name", _group_name, "invalid_text"),
    ("MCP token name", _mcp_token_name, "invalid_text"),
    ("panel tab title", _panel_tab_title, "invalid_text"),
    ("connection role", _connection_role, "invalid_text"),
    ("connection base URL", _connection_base_url, "invalid_base_url"),
    ("connection name", _connection_rename, "invalid_name"),
    ("room title", _room_title, "invalid_text"),
    ("channel name", _channel_name, "invalid_text"),
    ("channel address", _channel_address, "invalid_text"),
    ("runbook title", _runbook_title, "invalid_text"),
    ("runbook version note", _runbook_note, "invalid_text"),
    ("runbook scope", _runbook_scope, "invalid_text"),
    ("allowlisted domain note", _allow_domain_note, "invalid_text"),
    ("curated source title", _curated_title, "invalid_text"),
    ("curated source tags", _curated_tags, "invalid_text"),
]


@pytest.fixture
def seeded(operator):
    """What the edit cases change: a connection (and so a room), a runbook (v1)."""
    from chatrooms.actions import ensure_rooms
    from providers.models import AIConnection
    from runbooks.actions import check_create_runbook

    actor = _actor(operator)
    AIConnection.objects.create(name="seed", provider="openai_compat", auth_method="api_key")
    check_create_runbook(actor=actor, title="seed", body="v1")
    ensure_rooms(operator)
    return actor


@pytest.mark.parametrize("bad", BAD, ids=["crlf", "esc", "u2028", "rlo", "del"])
@pytest.mark.parametrize(("field", "run", "code"), CASES, ids=[c[0] for c in CASES])
def test_a_control_character_in_a_one_line_field_is_refused(seeded, field, run, code, bad):
    before = _snapshot()
    with pytest.raises(HalError) as refused:
        run(seeded, bad)
    assert refused.value.code == code, (field, refused.value.code, refused.value.message)
    assert refused.value.http_status == 400
    if code == "invalid_text":
        assert refused.value.details == {"field": refused.value.details["field"]}
    assert _snapshot() == before


def test_the_same_fields_take_ordinary_text(seeded):
    """The refusal is about control characters only: Korean, accents, spaces, tabs' absence."""
    from hal.actions.incidents import check_open_incident
    from notifications.actions import check_add_channel

    incident = check_open_incident(
        actor=seeded, severity="sev3", title="  디스크 가득 참 — db-1 (é) \t "
    )
    assert incident.title == "디스크 가득 참 — db-1 (é)"
    added = check_add_channel(
        actor=seeded, kind="email", name="온콜 메일", address="ops@example.test"
    )
    assert added.channel.name == "온콜 메일"


def test_the_api_refuses_a_crlf_incident_title_with_its_code(reauthed):
    """The red team's request: POST /api/incidents with a CR/LF inside the title."""
    from hal.models import Incident
    from notifications.models import Event

    response = reauthed.post(
        "/api/incidents",
        {"severity": "sev2", "title": "disk full\r\nBcc: someone@example.test"},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_text"
    assert error["details"] == {"field": "title"}
    assert Incident.objects.count() == 0 and Event.objects.count() == 0


def test_a_models_open_incident_proposal_with_a_crlf_title_cannot_run(operator):
    """The AI path: the proposal is made (HAL re-validates at approval), its precheck flags
    it at once, and approving it is refused with the same code — nothing is opened."""
    from hal.actions.proposals import check_approve_proposal, proposal_precheck
    from hal.models import Incident
    from hal.tools.dispatch import run_tool_call

    actor = Actor(user=operator, via="ai", label="gpt")
    outcome = run_tool_call(
        "open_incident", {"severity": "sev2", "title": "disk\r\nBcc: x@example.test"}, actor=actor
    )
    proposal = outcome.proposal
    assert proposal is not None
    flagged = proposal_precheck(proposal)
    assert flagged is not None and not flagged.ok and flagged.error.code == "invalid_text"
    with pytest.raises(HalError) as refused:
        check_approve_proposal(actor=_actor(operator), proposal_id=proposal.pk)
    assert refused.value.code == "invalid_text"
    assert Incident.objects.count() == 0


def test_a_dollar_anchored_pattern_no_longer_takes_a_trailing_newline():
    """`re.match(r"^…$")` accepts "value\\n" (`$` matches before a final newline): every
    such identifier check now uses fullmatch."""
    from hal.actions.servers.agents import clean_agent_version
    from hal.agent.ops import OpError, safe_name
    from hal.errors import InvalidInput
    from vault.api import _check_target

    with pytest.raises(OpError):
        safe_name("1.0\n", "version")  # a path component on the agent's host
    with pytest.raises(InvalidInput):
        _check_target("notifications.webhook_secret", "notify_channel", "3\n")
    with pytest.raises(InvalidInput):
        clean_agent_version("0.3.0\n")
