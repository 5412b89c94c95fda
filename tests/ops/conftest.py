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
