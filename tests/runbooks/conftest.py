"""Runbook fixtures: an administrator, a plain operator, actors on the web and AI paths."""

from __future__ import annotations

import pytest

from hal.actions.base import Actor
from tests.conftest import make_user


@pytest.fixture
def admin_actor(operator) -> Actor:
    return Actor(user=operator, via="api", label=operator.username)


@pytest.fixture
def plain_operator(db, django_user_model):
    """May view and operate, not administer."""
    return make_user(django_user_model, "plain", perms=("operate",))


@pytest.fixture
def plain_actor(plain_operator) -> Actor:
    return Actor(user=plain_operator, via="api", label=plain_operator.username)


@pytest.fixture
def disk_runbook(admin_actor):
    from runbooks.actions import check_create_runbook

    return check_create_runbook(
        actor=admin_actor,
        title="Disk full on a web server",
        body="1. Read `get_metrics`.\n2. Propose `restart_module` for portal.",
        tags=["disk", "Web"],
        scopes={"pages": ["servers"], "servers": ["web-01"], "modules": []},
    )
