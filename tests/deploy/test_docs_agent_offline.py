"""docs/deploy.md §7 (a node agent on a fleet server), run as written, offline (issue 42).

The block runs under `bash -euo pipefail` in a private mount + network namespace: /etc is
an overlay (useradd makes a real `hal-agent` user there; the real /etc is never written),
/opt and /srv are tmpfs, there is no route anywhere (loopback only), and systemctl is a
stand-in that records its calls. The artifact is built from HEAD with its wheelhouse, as
release.py builds it; psutil must come from that wheelhouse, hash-checked.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest

from tests.deploy.docs_blocks import DOC, section_blocks
from tests.deploy.install_host import REPO, load_release, sha256
from tests.deploy.marks import slow_once


def namespaces_work() -> bool:
    done = subprocess.run(["unshare", "--mount", "--net", "--fork", "true"], capture_output=True)
    return done.returncode == 0


@slow_once
def test_section_7_installs_the_agent_from_the_artifact_without_an_index(tmp_path, wheels):
    if not namespaces_work():
        pytest.skip("no mount/net namespaces here (needs root)")
    (block,) = section_blocks(DOC.read_text(), 7, 7)
    assert "pip install psutil" not in block and "--no-index" in block
    (name,) = set(re.findall(r"hal-\d+\.\d+\.\d+\.tar\.gz", block))
    version = name.removeprefix("hal-").removesuffix(".tar.gz")

    work = tmp_path / "work"
    work.mkdir()
    release = load_release()
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    info = {"version": version, "commit": commit, "tested": True, "tests": {"passed": 1}}
    artifact = work / name
    release.write_artifact(REPO, commit, f"hal-{version}/", info, artifact, wheels)
    (work / f"{name}.sha256").write_text(f"{sha256(artifact)}  {name}\n")
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "systemctl").write_text('#!/bin/sh\necho "systemctl $*" >> "$CALLS"\n')
    (shims / "systemctl").chmod(0o755)
    calls = tmp_path / "calls"
    q = shlex.quote
    script = tmp_path / "run.sh"
    script.write_text(
        f"""set -euo pipefail
ip link set lo up
OV={q(str(tmp_path / "ov"))}
mkdir -p $OV/etc/up $OV/etc/work
mount -t overlay overlay -o lowerdir=/etc,upperdir=$OV/etc/up,workdir=$OV/etc/work /etc
mount -t tmpfs tmpfs /opt
mount -t tmpfs tmpfs /srv
cd {q(str(work))}
{block}
echo '===== after the documented commands'
/opt/hal-agent/venv/bin/python -c 'import psutil; print("psutil", psutil.__version__)'
id hal-agent
"""
    )
    done = subprocess.run(
        ["unshare", "--mount", "--net", "--fork", "bash", str(script)],
        capture_output=True,
        text=True,
        timeout=900,
        env={
            "PATH": f"{shims}:/usr/sbin:/usr/bin:/sbin:/bin",
            "CALLS": str(calls),
            "LANG": "C.UTF-8",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            # A fleet server's pip has no configuration of this machine's (find-links,
            # constraints): none is read.
            "PIP_CONFIG_FILE": os.devnull,
        },
    )
    print(done.stdout, done.stderr, sep="\n")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{name}: OK" in done.stdout  # sha256sum --check
    assert "psutil " in done.stdout and "uid=" in done.stdout
    assert calls.read_text().splitlines() == [
        "systemctl daemon-reload",
        "systemctl enable --now hal-agent",
    ]
