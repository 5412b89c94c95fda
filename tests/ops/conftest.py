"""Fixtures of the ops-domain tests: actors for the operator and the viewer."""

from __future__ import annotations

import time

import pytest

from hal.actions.base import Actor


@pytest.fixture
def op_actor(operator) -> Actor:
    """The superuser operator acting through the API, re-authenticated just now."""
    return Actor(user=operator, via="api", reauth_at=time.time())


@pytest.fixture
def viewer_actor(viewer) -> Actor:
    """A logged-in user without any console permission."""
    return Actor(user=viewer, via="api", reauth_at=time.time())


def audit_rows(action: str, result: str = "ok"):
    from hal.models import AuditEntry

    return list(AuditEntry.objects.filter(action=action, result=result))


@pytest.fixture(autouse=True)
def _emergency_context_processor(settings):
    """Make sure the banner's context processor is on (the lead adds it to settings)."""
    templates = [dict(t, OPTIONS=dict(t.get("OPTIONS", {}))) for t in settings.TEMPLATES]
    processors = list(templates[0]["OPTIONS"].get("context_processors", []))
    if "hal.views.context.emergency" not in processors:
        processors.append("hal.views.context.emergency")
        templates[0]["OPTIONS"]["context_processors"] = processors
        settings.TEMPLATES = templates
