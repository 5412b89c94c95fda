"""What the web process does while it starts (hal/asgi.py), read from one import of the
ASGI application in a child process.

- Startup's objects are moved out of the cyclic collector. At 64 streams, full (generation
  2) collections of a daphne serving HAL took 145-190 ms each, walking the ~300,000 objects
  that Django, the apps and their imports leave behind: the event loop stood still
  meanwhile, and the first tokens and deltas that fell in such a pause arrived that much
  later (issue 29: deliver p99 210 ms, 36 ms with the freeze).
- The redaction rules are compiled then, not on the first sends after it:
  `functools.cache` does not hold concurrent first callers back, so the sends that arrived
  together on a fresh daphne each compiled all 222 rules again (issue 43 item 3: 5 % of the
  web CPU of the outside-shaped capacity line, py-spy on daphne). So are the tools' registry
  and their JSON schemas, and the providers' registry (the first sends imported them)."""

from __future__ import annotations

import pytest

from tests.procenv import own_sqlite_env, probe

PROBE = (
    "import gc, json\n"
    "import hal.asgi\n"
    "live = len(gc.get_objects())\n"
    "from providers.redaction.rules import load_rules\n"
    "info = load_rules.cache_info()\n"
    "rules = load_rules()\n"
    "from hal.tools import registry\n"
    "from chatrooms import integration\n"
    "specs = sum(map(len, integration._SPECS_CACHE.values()))\n"
    "import sys\n"
    "tools = {'loaders': len(registry._loaders), 'specs': specs,"
    " 'sdks': [m for m in ('providers.registry', 'openai', 'anthropic') if m in sys.modules]}\n"
    "print(json.dumps({'frozen': gc.get_freeze_count(), 'live': live,"
    " 'rules_cached': info.currsize, 'rules': len(rules.rules),"
    " 'rules_frozen': gc.is_tracked(rules) and not any(r is rules for r in gc.get_objects()),"
    " **tools}))\n"
)


@pytest.fixture(scope="module")
def started(tmp_path_factory) -> dict:
    return probe(PROBE, own_sqlite_env(tmp_path_factory.mktemp("asgi")))


def test_importing_the_asgi_application_freezes_what_startup_made(started):
    # Everything startup made is frozen; what the collector still walks is what came after.
    assert started["frozen"] > 100_000, started
    assert started["live"] < started["frozen"] / 20, started


def test_the_asgi_application_starts_with_the_rules_compiled(started):
    assert started["rules_cached"] == 1, started
    assert started["rules"] > 100, started
    # Compiled before gc.freeze(): the rule set is startup's, out of the collector's walk.
    assert started["rules_frozen"], started


def test_the_asgi_application_starts_with_the_tools_and_the_providers_registry_loaded(started):
    assert started["loaders"] == 0, started  # every loader of tool definitions has run
    assert started["specs"] > 10, started
    # The providers' registry too (the SDKs were already imported): the first sends imported it.
    assert started["sdks"] == ["providers.registry", "openai", "anthropic"], started


def test_the_suites_web_processes_import_the_sdks_at_their_first_model_call(tmp_path):
    # tests/settings.py: ~100 short-lived web processes a pass, most of which never call a
    # model, each paid the SDKs' imports (~2-4 CPU-s on a 2-core machine) while it started.
    env = {**own_sqlite_env(tmp_path), "DJANGO_SETTINGS_MODULE": "tests.settings"}
    code = (
        "import json, sys\n"
        "import hal.asgi\n"
        "sdks = ('providers.registry', 'openai', 'anthropic')\n"
        "before = [m for m in sdks if m in sys.modules]\n"
        "from providers.registry import ProviderConfig, build_provider\n"
        "build_provider(ProviderConfig(connection_id=1, kind='anthropic'))\n"
        "print(json.dumps({'before': before, 'after': [m for m in sdks if m in sys.modules]}))\n"
    )
    seen = probe(code, env)
    assert seen == {"before": [], "after": ["providers.registry", "openai", "anthropic"]}, seen
