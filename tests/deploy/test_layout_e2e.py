"""Issue 28 "done when", part "ship": docs/deploy.md §6 (the `hal-web@` processes it names +
the worker behind the shipped nginx config, PostgreSQL + Redis) run as written, its upgrade
under the operators' load (0 failed requests, `/api/health` included), then ship.py over
SSH into the same host: a release whose health raises (rolled back), a web process killed
under load (restarted by systemd), one whose migration fails (refused, nothing switched).

The host runs under the real systemd as PID 1 (issue 42 item 2): tests/deploy/
layout_scenario.py says how, and which part tests/deploy/test_layout_restore_e2e.py runs
beside this one on a machine of its own.
"""

from __future__ import annotations

import pytest

from tests.deploy.layout_scenario import (
    assert_first_install,
    assert_units_and_stops,
    assert_upgrade,
    build_artifacts,
    missing_prerequisite,
    run_part,
    summary,
)

STEPS = ("broken", "bad_migration")


@pytest.fixture(autouse=True)
def _prerequisites():
    if reason := missing_prerequisite():
        pytest.skip(reason)


@pytest.fixture
def artifacts(tmp_path):
    return build_artifacts(tmp_path, STEPS)


# Three installs from the wheelhouse (each pip-installs ~90 wheels, as on a host) and about
# ten daphne starts: 12-14 min alone under the real systemd at a load average of 10-12.
@pytest.mark.timeout(3600)
def test_section_6_as_written_then_ship_on_postgresql_and_redis(tmp_path, artifacts):
    report = run_part(tmp_path, artifacts, "ship")
    steps, versions = report["steps"], artifacts["versions"]
    assert_first_install(report, versions)

    # §6's upgrade, as written, under load: no page, health poll or socket request failed.
    assert_upgrade(report, versions)
    load = steps["upgrade"]["load"]
    assert load["pages"]["failed"] == 0, load
    assert load["health"]["failed"] == 0, load
    assert load["sockets"]["failed"] == 0, load
    # The proxy spreads the polls over processes of both releases while they roll: the
    # answers go from the old release to the new one, and end on the new one.
    seen = load["health"]["versions"]
    assert seen[0] == versions["first"] and seen[-1] == versions["upgrade"], seen
    assert set(seen) == {versions["first"], versions["upgrade"]}, seen
    assert load["pages"]["ok"] > 0 and load["sockets"]["ok"] > 0
    assert load["sockets"]["connections"] > 2  # the sockets were moved, and came back

    broken = steps["broken"]
    assert broken["rc"] != 0
    assert "ROLLED BACK" in broken["out"] + broken["err"]
    assert broken["current"] == versions["upgrade"]
    # Only the web process that ran the broken release went back; the others never moved.
    assert broken["out"].count("restart: systemctl restart hal-web@") == 2, broken["out"]
    assert "restart: systemctl restart hal-worker" not in broken["out"]

    # A genuinely broken release: its migration fails while staging, nothing switched.
    bad = steps["bad_migration"]
    assert bad["rc"] != 0
    assert "FAILED while staging" in bad["out"] + bad["err"]
    assert "no_such_function_in_this_release" in bad["out"] + bad["err"]
    assert bad["current"] == versions["upgrade"]

    # A web process killed under load (its main process, SIGKILL): systemd restarted it
    # (Restart=on-failure) and it answered its own /api/health again.
    crash = steps["crash"]
    assert int(crash["after"]["NRestarts"]) == int(crash["before"]["NRestarts"]) + 1, crash
    assert crash["after"]["MainPID"] != crash["before"]["MainPID"], crash
    assert crash["after"]["ActiveState"] == "active", crash

    assert_units_and_stops(report)
    print(
        "\n§6 as written, then ship.py, on PostgreSQL + Redis: "
        + summary(
            report,
            ("first", "upgrade", "broken", "crash", "bad_migration"),
            ("upgrade", "broken", "crash"),
        )
    )
