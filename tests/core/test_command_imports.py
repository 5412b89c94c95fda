"""A management command does not import the model or MCP SDKs it does not use.

Every `manage.py` command runs Django's system checks first, and the URL check imports
every view. Through the chat's views that once imported the anthropic and openai SDKs and,
through the MCP access page, the mcp SDK: ~2.5 CPU-seconds of imports (anthropic alone
builds ~2,700 pydantic models) in each of an install's `migrate`, `collectstatic` and
`check --deploy`, a snapshot, a restore — commands that never call a model. The web process
still imports them while it starts (hal/asgi.py; tests/core/test_gc_freeze.py), and the
code that builds a provider imports its SDK where it needs it.
"""

from __future__ import annotations

import pytest

from tests.procenv import own_sqlite_env, probe

SDKS = ("anthropic", "openai", "mcp", "daphne.server", "twisted.internet.reactor")

# Django set up, then the system checks a command runs first (URL configuration included:
# every view imported), then the modules that came with them.
PROBE = (
    "import json, sys, django\n"
    "django.setup()\n"
    "from django.core import checks\n"
    "from django.urls import get_resolver\n"
    "get_resolver().url_patterns\n"
    "checks.run_checks(include_deployment_checks=False)\n"
    "print(json.dumps({'sdks': [m for m in sys.argv[1:] if m in sys.modules],"
    " 'views': 'chatrooms.views' in sys.modules and 'hal.views.mcp_access' in sys.modules}))\n"
)


@pytest.fixture(scope="module")
def after_checks(tmp_path_factory) -> dict:
    return probe(PROBE, own_sqlite_env(tmp_path_factory.mktemp("checks")), *SDKS)


def test_the_system_checks_import_every_view(after_checks):
    assert after_checks["views"], after_checks  # the probe reached what the commands reach


def test_the_system_checks_import_no_model_or_mcp_sdk(after_checks):
    assert after_checks["sdks"] == [], after_checks
