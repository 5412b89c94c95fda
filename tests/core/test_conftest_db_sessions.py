"""The suite's end-of-session clean-up works when DATABASE_URL names a database that does
not exist and no collected test uses one (pytest-django then creates no test database)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGET = ["tests/test_packaging.py"]  # a quick test that uses no database


def _missing_database_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.skip("needs the PostgreSQL server of DATABASE_URL")
    server = url.rsplit("/", 1)[0]
    return f"{server}/hal_missing_{secrets.token_hex(6)}"


def test_a_run_without_database_tests_on_a_missing_database_has_no_error():
    # Not HAL_TEST_PASS either: CI's second pass would deselect the child's only test.
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k != "HAL_TEST_PASS"
    }
    env["DATABASE_URL"] = _missing_database_url()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *TARGET],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # a bound for a hung child only: this run takes seconds
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert " error" not in out.lower(), out
