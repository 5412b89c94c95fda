"""Database connection settings from the environment: persistent connections, health
checks, and psycopg 3's pool on PostgreSQL (settings are read in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.bounds import SLOW

PG = "postgres://hal@127.0.0.1:5432/hal_settings_probe"


def _databases(**environ: str) -> dict:
    code = (
        "import json, hal.settings as s;"
        "d = s.DATABASES['default'];"
        "print(json.dumps({k: d.get(k) for k in ('ENGINE', 'CONN_MAX_AGE',"
        " 'CONN_HEALTH_CHECKS', 'OPTIONS')}, default=str))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HAL_DB_", "DATABASE_URL"))}
    env.update(environ)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=SLOW
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_defaults_postgresql_health_checks_and_no_pool():
    db = _databases(DATABASE_URL=PG)
    assert db["CONN_HEALTH_CHECKS"] is True and db["CONN_MAX_AGE"] == 0
    assert "pool" not in (db["OPTIONS"] or {})  # opt-in (no gain measured yet)


def test_pool_on_postgresql_when_sized():
    db = _databases(DATABASE_URL=PG, HAL_DB_POOL_MAX_SIZE="20", HAL_DB_CONN_MAX_AGE="60")
    pool = db["OPTIONS"]["pool"]
    assert pool["min_size"] >= 1 and pool["max_size"] == 20
    # The pool replaces persistent connections (Django refuses both at once).
    assert db["CONN_MAX_AGE"] == 0


def test_pool_size_and_persistent_connections_from_the_environment():
    db = _databases(DATABASE_URL=PG, HAL_DB_POOL_MAX_SIZE="32", HAL_DB_CONN_HEALTH_CHECKS="0")
    assert db["OPTIONS"]["pool"]["max_size"] == 32 and db["CONN_HEALTH_CHECKS"] is False
    db = _databases(DATABASE_URL=PG, HAL_DB_POOL_MAX_SIZE="0", HAL_DB_CONN_MAX_AGE="60")
    assert "pool" not in (db["OPTIONS"] or {}) and db["CONN_MAX_AGE"] == 60


def test_sqlite_has_no_pool_but_takes_the_connection_age():
    db = _databases(HAL_DB_CONN_MAX_AGE="30")
    assert db["ENGINE"].endswith("sqlite3")
    assert "pool" not in db["OPTIONS"] and db["CONN_MAX_AGE"] == 30
    assert db["CONN_HEALTH_CHECKS"] is True
