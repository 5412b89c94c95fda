"""The skill document stays complete: every status and every HalError code is explained."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps

from hal.tools import run_tool_call, skill_text

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ["hal", "chatrooms", "providers", "vault", "webfetch", "runbooks", "reviews"]
PROJECT_APPS = {"hal", "chatrooms", "providers", "vault", "webfetch", "runbooks", "reviews"}
STATUS_FIELDS = {"status", "state", "result", "severity", "kind", "level", "via", "tier"}


def documented() -> set[str]:
    return set(re.findall(r"`([^`\s]+)`", skill_text()))


def error_codes() -> dict[str, str]:
    """Every `code="..."` keyword and `code = "..."` assignment in the code base."""
    found: dict[str, str] = {}
    for package in SCANNED:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                value = None
                if isinstance(node, ast.keyword) and node.arg == "code":
                    value = node.value
                elif isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "code" for t in node.targets
                ):
                    value = node.value
                elif isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "code":
                    value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.setdefault(value.value, str(path.relative_to(ROOT)))
    return found


def status_values() -> dict[str, str]:
    """Every choice of every status-like field of the project's models."""
    found: dict[str, str] = {}
    for model in apps.get_models():
        if model._meta.app_label not in PROJECT_APPS:
            continue
        for field in model._meta.get_fields():
            if getattr(field, "name", "") in STATUS_FIELDS and getattr(field, "choices", None):
                for value, _label in field.choices:
                    found.setdefault(str(value), f"{model.__name__}.{field.name}")
    return found


def test_the_scan_finds_what_it_should():
    codes = error_codes()
    assert {"reauth_required", "proposal_not_pending", "server_not_found"} <= set(codes)
    statuses = status_values()
    assert {"pending", "executing", "isolated", "queued", "sev1"} <= set(statuses)


def test_every_error_code_is_explained():
    missing = {c: where for c, where in error_codes().items() if c not in documented()}
    assert not missing, f"document these codes in hal/tools/skill.md: {missing}"


def test_every_status_is_explained():
    missing = {s: where for s, where in status_values().items() if s not in documented()}
    assert not missing, f"document these statuses in hal/tools/skill.md: {missing}"


def test_derived_and_dispatch_codes_are_explained():
    for code in ("unreachable", "unknown_tool", "invalid_arguments", "pending_approval"):
        assert code in skill_text()


def test_the_injection_rule_is_stated():
    text = skill_text().lower()
    for source in ("files", "logs", "customer data", "web pages", "other models' replies"):
        assert source in text
    assert "never changes an approval" in text


@pytest.mark.django_db
def test_get_skill_serves_the_document(operator):
    from tests.tools.conftest import make_actor

    outcome = run_tool_call("get_skill", {}, actor=make_actor(operator))
    assert outcome.result["skill"] == skill_text()
