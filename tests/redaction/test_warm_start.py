"""The web process compiles the redaction rules while it starts (hal/asgi.py), not on the
first sends after it: `functools.cache` does not hold concurrent first callers back, so the
sends that arrive together on a fresh daphne each compiled all 222 rules again (issue 43
item 3: 5 % of the web CPU of the outside-shaped capacity line, py-spy on daphne)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.bounds import SLOW
from tests.procenv import ROOT, own_sqlite_env

PROBE = (
    "import gc, json\n"
    "import hal.asgi\n"
    "from providers.redaction.rules import load_rules\n"
    "info = load_rules.cache_info()\n"
    "rules = load_rules()\n"
    "print(json.dumps({'cached': info.currsize, 'frozen': gc.is_tracked(rules)"
    " and not any(r is rules for r in gc.get_objects()), 'rules': len(rules.rules)}))\n"
)


def test_the_asgi_application_starts_with_the_rules_compiled(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=own_sqlite_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=SLOW,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["cached"] == 1, found
    assert found["rules"] > 100, found
    # Compiled before gc.freeze(): the rule set is startup's, out of the collector's walk.
    assert found["frozen"], found
