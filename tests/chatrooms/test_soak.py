"""A one-minute soak (bench/soak.py) in CI: two daphne processes behind nginx on
PostgreSQL + Redis, one killed with SIGKILL midway; nothing lost, nothing duplicated.
No timing assertions: the numbers it prints are for reading, not for passing."""

from __future__ import annotations

import asyncio
import os

import pytest

pytestmark = pytest.mark.skipif(
    not (os.environ.get("DATABASE_URL", "").startswith("postgres") and os.environ.get("REDIS_URL")),
    reason="several web processes share PostgreSQL + Redis (the embedded default has one)",
)


# The soak bounds its own waits (a reply: 90 s; the last ones: 120 s) and then reports what
# was lost; pytest's default 120 s would cut that short on a busy machine (the suite runs
# on every core) and report a timeout instead of the answer.
@pytest.mark.timeout(420)
def test_one_minute_soak_with_a_killed_process_loses_and_duplicates_nothing(
    transactional_db, tmp_path, settings
):
    from bench import soak
    from bench.harness import ROOT
    from tests.browser.conftest import _server_env

    env = _server_env(tmp_path)
    env["HAL_VAULT_KEY_FILE"] = settings.HAL_VAULT_KEY_FILE  # the connections' keys
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    )
    args = soak.parser().parse_args(
        ["--minutes", "1", "--processes", "2", "--operators", "12", "--interval", "5"]
    )
    result = asyncio.run(soak.soak(args, env, tmp_path))
    soak.print_report(result)
    assert result["sent"] > 0
    # The database's truth, asserted: every sent message stored, every reply finished,
    # nothing answered twice.
    assert result["send_errors"] == 0, result
    assert result["missing"] == result["without_reply"] == result["running"] == 0, result
    assert result["duplicated"] == 0, result
    # And what the sockets saw: every completed reply reached its operator's socket, the
    # ones that finished while a socket was away through the resume's `open` ids.
    assert result["unseen_on_socket"] == 0, result
