"""The web process's startup objects are moved out of the cyclic collector (hal/asgi.py).

At 64 streams, full (generation 2) collections of a daphne serving HAL took 145-190 ms
each, walking the ~300,000 objects that Django, the apps and their imports leave behind:
the event loop stood still meanwhile, and the first tokens and deltas that fell in such a
pause arrived that much later (issue 29: deliver p99 210 ms, 36 ms with the freeze)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.bounds import SLOW
from tests.procenv import ROOT, own_sqlite_env

PROBE = (
    "import gc, json\n"
    "import hal.asgi\n"
    "live = len(gc.get_objects())\n"
    "print(json.dumps({'frozen': gc.get_freeze_count(), 'live': live}))\n"
)


def test_importing_the_asgi_application_freezes_what_startup_made(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=own_sqlite_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=SLOW,
        check=True,
    )
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    # Everything startup made is frozen; what the collector still walks is what came after.
    assert counts["frozen"] > 100_000, counts
    assert counts["live"] < counts["frozen"] / 20, counts
