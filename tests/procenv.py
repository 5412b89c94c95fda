"""The environment of a HAL child process on its real settings and a SQLite file of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.bounds import SLOW

ROOT = Path(__file__).resolve().parents[1]


def own_sqlite_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment without pytest's, on hal.settings, data and database in
    `tmp_path` (not the test database), HAL importable from the checkout; `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.pop("DATABASE_URL", None)
    env.update(
        DJANGO_SETTINGS_MODULE="hal.settings",
        HAL_DATA_DIR=str(tmp_path),
        HAL_SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        PYTHONPATH=str(ROOT),
        **extra,
    )
    return env


def probe(code: str, env: dict[str, str], *args: str) -> dict:
    """Run `code` in a child Python in the checkout with `env`; the JSON of its last line."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SLOW,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])
