"""The environment of a HAL child process on its real settings and a SQLite file of its own."""

from __future__ import annotations

import os
from pathlib import Path

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
