"""CI's two passes (.ci/run, tests/conftest.py): what the PostgreSQL + Redis pass repeats."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = [
    "tests/deploy/test_release.py",  # builds releases in a clean environment: once
    "tests/deploy/test_units.py",  # unit files checked by systemd-analyze: once
    # the §6 layout under a real systemd brings its own PostgreSQL and Redis: once
    "tests/deploy/test_layout_e2e.py",
    "tests/deploy/test_proxy_client_ip.py",  # the shipped proxies, an echo upstream: once
    "tests/core/test_rows.py",  # the database: both
    "tests/core/test_fastjson.py",  # a pure function: once
]


def collected(second: bool) -> set[str]:
    """The test files pytest collects for FILES in the first or the second pass."""
    env = {k: v for k, v in os.environ.items() if k != "HAL_TEST_PASS"}
    if second:
        env["HAL_TEST_PASS"] = "second"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FILES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return {line.split("::", 1)[0] for line in out.stdout.splitlines() if "::" in line}


def test_the_second_pass_repeats_only_what_the_backend_can_change():
    assert collected(second=False) == set(FILES)
    assert collected(second=True) == {"tests/core/test_rows.py"}
