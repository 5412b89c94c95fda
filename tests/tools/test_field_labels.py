"""Field labels of the proposal cards (issue 41 item 7): every argument of every tool's
schema, every key of the impact details of every high-risk action and every key of what a
write or high-risk tool returns has a label an operator reads, translated into Korean.
The model keeps reading the raw names (the labels never reach a tool result or schema)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import translation

from hal.actions.base import Actor
from hal.errors import HalError
from hal.i18n.fields import FIELD_LABELS, field_labels
from hal.tools.registry import READ, all_tools, proposal_references
from tests.tools.conftest import valid_args

pytestmark = pytest.mark.django_db


class _Undo(Exception):
    """Leaves the transaction a tool ran in (each tool sees the same world)."""


def _keys(value: Any) -> set[str]:
    """The keys a card shows: those of a result object, or of each object of a list."""
    if isinstance(value, dict):
        return set(value)
    if isinstance(value, list):
        return {k for item in value if isinstance(item, dict) for k in item}
    return set()


def test_every_tool_argument_has_a_label():
    names = {name for tool in all_tools() for name in tool.input_schema["properties"]}
    names |= set(proposal_references())
    assert len(names) > 30
    missing = sorted(names - set(FIELD_LABELS))
    assert not missing, missing


def test_every_impact_detail_has_a_label(world, operator):
    from hal.actions.confirm import HIGH_RISK

    actor = Actor(user=operator, via="ai", label="ops")
    seen: set[str] = set()
    for tool in all_tools(["high_risk"]):
        impact = HIGH_RISK[tool.action_code].impact(actor, valid_args(tool.name, world))
        seen |= set(impact.details)
    # The one high-risk action no tool offers (a module's commands): its dialog shows them too.
    configure = {"module": "portal", "restart_command": ["/bin/true"], "health_check_url": ""}
    details = HIGH_RISK["modules.configure"].impact(actor, configure).details
    seen |= set(details) | {k for v in details.values() if isinstance(v, dict) for k in v}
    assert {"controls", "before", "after", "type"} <= seen
    seen = {key for key in seen if not key.endswith("_i18n")}  # rendered into their sibling
    missing = sorted(seen - set(FIELD_LABELS))
    assert not missing, missing


def test_every_key_of_a_proposals_result_has_a_label(world):
    # What the approved call returns: run each write/high-risk tool's handler (as HAL's own
    # system actor, which skips the gates it already passed) and roll it back.
    actor = Actor.for_system("task", "label-test")
    seen: set[str] = set()
    ran = []
    for tool in all_tools():
        if tool.tier == READ or tool.name == "fetch_url":
            continue
        try:
            with transaction.atomic():
                seen |= _keys(tool.handler(actor, tool.validate(valid_args(tool.name, world))))
                ran.append(tool.name)
                raise _Undo
        except (_Undo, HalError):
            pass
    assert len(ran) >= 15, ran
    missing = sorted(seen - set(FIELD_LABELS))
    assert not missing, missing


def test_labels_are_translated_and_the_raw_names_stay_for_the_model(world):
    with translation.override("ko"):
        korean = field_labels()
    with translation.override("en"):
        english = field_labels()
    assert set(korean) == set(FIELD_LABELS)
    same = {"id", "url", "sha256"}  # ID, URL, SHA-256: written so in Korean too
    untranslated = sorted(k for k in korean if korean[k] == english[k] and k not in same)
    assert not untranslated, untranslated
    assert korean["severity"] == "심각도"
    # A model reads the schema's own names, never a label.
    tool = next(t for t in all_tools() if t.name == "open_incident")
    assert "severity" in tool.input_schema["properties"]
    assert "심각도" not in str(tool.to_anthropic())
