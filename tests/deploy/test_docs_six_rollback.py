"""docs/deploy.md §4 "Rollback and restore on the §6 layout", run as written (issue 42 item 3).

The two blocks run under `bash -euo pipefail` in a private mount namespace whose /srv is a
tmpfs holding two releases, `current` on the newer. The units are a stand-in that keeps,
per unit, the release it was (re)started into — `systemctl` answers "not found" for a unit
the layout does not have (`hal-web`), as the real one does — and `curl` answers each
`127.0.0.1:<port>/api/health` with that process's version and the public name with the
first one that runs. `hal-manage` refuses while any process runs. Seconds, not minutes:
the real processes of this layout are exercised by tests/deploy/test_layout_e2e.py.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.deploy.docs_blocks import DOC, SIX_LAYOUT_ROLLBACK, blocks_under, placeholders
from tests.deploy.marks import slow_once

PORTS = ["8001", "8002", "8003", "8004"]

SYSTEMCTL = r"""#!/bin/sh
# systemctl stand-in: $STATE/<unit> holds the release the unit runs; calls are logged.
echo "systemctl $*" >> "$STATE/calls"
verb=$1; shift
for unit in "$@"; do
  case $unit in
    hal-web@800[1-4]|hal-worker) ;;
    *) echo "Failed to $verb $unit.service: Unit $unit.service not found." >&2; exit 5 ;;
  esac
  case $verb in
    stop) rm -f "$STATE/$unit" ;;
    start|restart)
      # A stale process (the test's fault injection) keeps serving what it served.
      [ -e "$STATE/stale-$unit" ] && continue
      basename "$(readlink /srv/hal/current)" > "$STATE/$unit" ;;
    *) exit 2 ;;
  esac
done
"""

CURL = r"""#!/bin/sh
# curl stand-in: a web process's /api/health from $STATE; the public name: any process.
# Plain HTTP straight to daphne without X-Forwarded-Proto: https gets HAL's redirect to
# HTTPS (HAL_PRODUCTION), an empty body that `curl -f` does not fail on.
proto=""
for arg in "$@"; do [ "$arg" = "X-Forwarded-Proto: https" ] && proto=https; url=$arg; done
case $url in
  http://127.0.0.1:*/api/health)
    [ "$proto" = https ] || exit 0
    port=${url#http://127.0.0.1:}; port=${port%%/*}
    files="$STATE/hal-web@$port" ;;
  https://hal.example.org/api/health) files=$(ls "$STATE"/hal-web@* 2>/dev/null) ;;
  *) exit 6 ;;
esac
for f in $files; do
  [ -e "$f" ] && printf '{"status": "ok", "version": "%s"}\n' "$(cat "$f")" && exit 0
done
echo "curl: (7) Failed to connect" >&2
exit 7
"""

HAL_MANAGE = r"""#!/bin/sh
# hal-manage stand-in: dr_restore refuses while a process of HAL runs.
echo "hal-manage $*" >> "$STATE/calls"
if ls "$STATE"/hal-web@* "$STATE"/hal-worker >/dev/null 2>&1; then
  echo "a HAL process still runs" >&2; exit 1
fi
"""


def namespaces_work() -> bool:
    done = subprocess.run(["unshare", "--mount", "--fork", "true"], capture_output=True)
    return done.returncode == 0


@pytest.fixture
def host(tmp_path):
    if not namespaces_work():
        pytest.skip("no mount namespace here (needs root)")
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, text in (("systemctl", SYSTEMCTL), ("curl", CURL)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    (tmp_path / "hal-manage").write_text(HAL_MANAGE)
    (tmp_path / "hal-manage").chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    return {"tmp": tmp_path, "shims": shims, "state": state}


def run(host, block: str, before: str = "") -> subprocess.CompletedProcess:
    """The block as written, on /srv of its own: 0.3.0 and 0.4.0, current on 0.4.0."""
    q = shlex.quote
    script = host["tmp"] / "run.sh"
    snapshot = "/var/lib/hal/snapshots/20261206-0400"
    script.write_text(
        f"""set -euo pipefail
mount -t tmpfs tmpfs /srv
for v in 0.3.0 0.4.0; do
  mkdir -p /srv/hal/releases/$v/deploy
  cp {q(str(host["tmp"] / "hal-manage"))} /srv/hal/releases/$v/deploy/hal-manage
done
echo '{json.dumps({"snapshot": snapshot})}' > /srv/hal/releases/0.4.0/.hal-release.json
ln -s releases/0.4.0 /srv/hal/current
{before}
{block}
echo "current: $(readlink /srv/hal/current)"
"""
    )
    env = {
        "PATH": f"{host['shims']}:/usr/sbin:/usr/bin:/sbin:/bin",
        "STATE": str(host["state"]),
        "LANG": "C.UTF-8",
    }
    done = subprocess.run(
        ["unshare", "--mount", "--fork", "bash", str(script)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    print(done.stdout, done.stderr, sep="\n")
    return done


def serving(state: Path) -> dict[str, str]:
    return {p.name: p.read_text().strip() for p in state.iterdir() if p.name.startswith("hal-")}


def all_on(version: str) -> str:
    """Shell: every unit of the layout running `version` (as after the upgrade)."""
    units = [f"hal-web@{p}" for p in PORTS] + ["hal-worker"]
    return "\n".join(f'echo {version} > "$STATE/{u}"' for u in units)


def blocks() -> tuple[str, str]:
    found = blocks_under(DOC.read_text(), 4, SIX_LAYOUT_ROLLBACK)
    assert len(found) == 2, found
    assert not placeholders(found)
    return found[0], found[1]


def test_the_blocks_name_every_web_process_of_section_6():
    rollback, restore = blocks()
    six = "\n".join(re.findall(r"^```sh\n(.*?)^```", DOC.read_text(), flags=re.M | re.S))
    assert "--web-ports 8001,8002,8003,8004" in six  # the ports §6 runs
    assert "for port in 8001 8002 8003 8004" in rollback
    assert "systemctl restart hal-web@$port" in rollback
    assert "hal-web hal-worker" not in rollback + restore  # §2's single unit
    units = " ".join(f"hal-web@{p}" for p in PORTS) + " hal-worker"
    assert f"systemctl stop {units}" in restore and f"systemctl start {units}" in restore


@slow_once
def test_manual_rollback_restarts_every_web_process_and_checks_each(host):
    rollback, _ = blocks()
    done = run(host, rollback, before=all_on("0.4.0"))
    assert done.returncode == 0, done.stderr
    assert "current: releases/0.3.0" in done.stdout
    assert serving(host["state"]) == {
        **{f"hal-web@{p}": "0.3.0" for p in PORTS},
        "hal-worker": "0.3.0",
    }
    calls = (host["state"] / "calls").read_text().splitlines()
    assert calls == [f"systemctl restart hal-web@{p}" for p in PORTS] + [
        "systemctl restart hal-worker"
    ]


@slow_once
def test_a_web_process_still_on_the_new_release_fails_the_check(host):
    """The issue's case: the public name answers, one process still serves the new release."""
    rollback, _ = blocks()
    done = run(host, rollback, before=all_on("0.4.0") + '\ntouch "$STATE/stale-hal-web@8003"')
    assert done.returncode != 0
    assert "hal-web@8003 does not serve 0.3.0" in done.stderr
    assert serving(host["state"])["hal-web@8003"] == "0.4.0"


@slow_once
def test_restore_stops_every_process_first_and_reads_each_back(host):
    _, restore = blocks()
    # After the manual rollback: every process on 0.3.0, `current` too.
    before = all_on("0.3.0") + "\nln -sfn releases/0.3.0 /srv/hal/current"
    done = run(host, restore, before=before)
    assert done.returncode == 0, done.stderr
    calls = (host["state"] / "calls").read_text().splitlines()
    snapshot = "/var/lib/hal/snapshots/20261206-0400"
    assert calls[1:3] == [
        f"hal-manage dr_restore {snapshot} --verify-only",
        f"hal-manage dr_restore {snapshot} --yes",
    ]
    assert calls[0].startswith("systemctl stop") and calls[3].startswith("systemctl start")
    assert serving(host["state"]) == {
        **{f"hal-web@{p}": "0.3.0" for p in PORTS},
        "hal-worker": "0.3.0",
    }
