"""Issue 42 item 2, part "restore" of the §6 scenario: docs/deploy.md §6's first install
and upgrade as written, then §4's manual rollback and restore for this layout as written
(back to the first release, each process read back on its own port; `dr_restore` of the
snapshot the upgrade was installed over) and an install by ship.py after the restore,
under the operators' load.

On a machine of its own under the real systemd, beside tests/deploy/test_layout_e2e.py's
part on another worker (tests/deploy/layout_scenario.py).
"""

from __future__ import annotations

import json

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
from tests.deploy.load import Load

STEPS = ("after_restore",)


@pytest.fixture(autouse=True)
def _prerequisites():
    if reason := missing_prerequisite():
        pytest.skip(reason)


@pytest.fixture
def artifacts(tmp_path):
    return build_artifacts(tmp_path, STEPS)


# Three installs from the wheelhouse and about twelve daphne starts: 12-14 min alone under
# the real systemd at a load average of 10-12.
@pytest.mark.timeout(3600)
def test_section_4_rollback_and_restore_on_the_section_6_layout(tmp_path, artifacts):
    report = run_part(tmp_path, artifacts, "restore")
    steps, versions = report["steps"], artifacts["versions"]
    assert_first_install(report, versions)
    assert_upgrade(report, versions)

    # docs/deploy.md §4 on the §6 layout, as written under the real systemd: back to the
    # first release, every process read back on its own port; then the restore.
    rollback = steps["rollback"]
    assert rollback["rc"] == 0, rollback["out"][-2000:] + rollback["err"][-2000:]
    assert rollback["current"] == versions["first"]
    restore = steps["restore"]
    assert restore["rc"] == 0, restore["out"][-2000:] + restore["err"][-2000:]
    assert restore["current"] == versions["first"]
    assert "Restored from" in restore["out"]
    # The dump's own `running` row came back and was marked interrupted, not left to
    # refuse the next install's snapshot.
    assert "Marked interrupted: " in restore["out"]
    snapshots = json.loads(report["snapshots"])
    assert "running" not in {s["status"] for s in snapshots}, snapshots
    assert "interrupted" in {s["status"] for s in snapshots}, snapshots
    after = steps["after_restore"]
    assert after["rc"] == 0, after["err"][-2000:]
    assert after["current"] == versions["after_restore"]
    assert Load.failed(after["load"]) == 0, after["load"]

    assert_units_and_stops(report)
    print(
        "\n§6 as written, §4's rollback and restore, an install after: "
        + summary(
            report,
            ("first", "upgrade", "rollback", "restore", "after_restore"),
            ("after_restore",),
        )
    )
