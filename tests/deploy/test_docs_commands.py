"""docs/deploy.md §2–§4, run as written: first install, upgrade, rollback and restore.

(§4's blocks for §6's `hal-web@` layout are run by tests/deploy/test_docs_six_rollback.py
with stand-ins, and under the real systemd by tests/deploy/test_layout_e2e.py.)

The shell blocks of those sections are extracted from the Markdown and run in order on a
fresh Debian ops host: tests/deploy/real_systemd.py's machine, the real systemd as PID 1
(journald, D-Bus) running the shipped units — the docs' `systemctl`, `systemd-run`
(hal-manage) are the real ones — with /etc, /srv, /var and /root overlays (the real ones
are never written) and a loopback of its own. `useradd` creates a real `hal` user in the
overlay, hal.example.org and artifacts.example.org resolve to loopback and are served by
the system's nginx (under its unit) with the shipped proxy config and a certificate from
a throwaway CA added to the overlay's trust store; the release venv is the host's own
/usr/bin/python3 (the artifacts are built for its version). Two stand-ins remain:
`apt-get` (no package index: tests/deploy/fake_apt.py checks the packages are
installed) and certbot (it checks that its token is served over plain HTTP at the name —
§2's TLS order — then puts the throwaway CA's certificate at certbot's paths). The prose
step between the blocks (publish the artifacts) is done by the harness the way the prose
says.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy import hosts
from tests.deploy.docs_blocks import (
    DOC,
    doc_versions,
    placeholders,
    section_blocks,
    single_process_blocks,
)
from tests.deploy.install_host import (
    build_wheelhouse,
    host_python_version,
    load_release,
    retarget,
    sign,
)
from tests.deploy.marks import slow_once
from tests.deploy.real_systemd import Machine, unavailable

REPO = Path(__file__).resolve().parents[2]
FAKE_APT = Path(__file__).with_name("fake_apt.py")


CERTBOT = r"""
import os, secrets, shutil, sys, time, urllib.request
args = sys.argv[1:]
assert args[0] == "certonly" and "--webroot" in args, args
webroot, name = args[args.index("-w") + 1], args[args.index("-d") + 1]
token = secrets.token_urlsafe(16)
challenge = os.path.join(webroot, ".well-known", "acme-challenge")
os.makedirs(challenge, exist_ok=True)
with open(os.path.join(challenge, token), "w") as fh:
    fh.write(token)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# `systemctl reload nginx` returns once nginx was signalled; its new workers follow shortly
# (the real ACME server asks later too): wait for the token, a bounded number of times.
for _ in range(300):
    try:
        with opener.open(f"http://{name}/.well-known/acme-challenge/{token}", timeout=30) as r:
            if r.read().decode() == token:
                break
    except OSError:
        pass
    time.sleep(0.2)
else:
    sys.exit(f"certbot (stand-in): http://{name}/.well-known/acme-challenge/ was never served")
os.remove(os.path.join(challenge, token))
cert, key = os.environ["CERTBOT_ISSUES"].split(":")
live = f"/etc/letsencrypt/live/{name}"
os.makedirs(live, exist_ok=True)
shutil.copy(cert, f"{live}/fullchain.pem")
shutil.copy(key, f"{live}/privkey.pem")
print(f"Successfully received certificate for {name} (test stand-in, webroot checked)")
"""


def test_the_documented_blocks_are_found():
    blocks = single_process_blocks(DOC.read_text())
    text = "\n".join(blocks)
    assert len(blocks) >= 8
    for needle in (
        "useradd",
        "install.py",
        "hal_bootstrap",
        "dr_restore",
        "systemctl restart",
        "certbot certonly --webroot",
    ):
        assert needle in text, needle
    assert doc_versions(blocks)[:2] == ["0.3.0", "0.4.0"]
    # Nothing left for the reader to fill in: a placeholder would not run.
    assert not placeholders(blocks), placeholders(blocks)


def test_the_section_6_blocks_are_found():
    """§6's own blocks (run as written by tests/deploy/test_layout_e2e.py): the database,
    the first install of the `hal-web@` layout and its upgrade, nothing to fill in."""
    blocks = section_blocks(DOC.read_text(), 6, 6)
    assert len(blocks) == 3, blocks
    database, first, upgrade = blocks
    assert "CREATE ROLE hal" in database and "DATABASE_URL=" in database
    assert "systemctl enable hal-web@" in first and "--web-ports" in first
    assert "/srv/hal/current/deploy/install.py" in upgrade and "--web-ports" in upgrade
    assert doc_versions(blocks)[:2] == ["0.3.0", "0.4.0"]
    # Each block stands alone (an operator runs the upgrade weeks later, in a new shell):
    # the checksum it passes is the one of the artifact it installs.
    for block in (first, upgrade):
        (version,) = set(re.findall(r"hal-(\d+\.\d+\.\d+)\.tar\.gz", block))
        assert f"SHA=$(cut -d' ' -f1 hal-{version}.tar.gz.sha256)" in block, block
    assert not placeholders(blocks), placeholders(blocks)


@slow_once
# Two installs from the wheelhouse (pip installs ~90 wheels each, as on a host) on top of
# the rest: more than slow_once's 15 min on a loaded machine.
@pytest.mark.timeout(1800)
def test_deploy_md_sections_2_to_4_run_as_written(tmp_path, release_key):
    for tool in ("/usr/sbin/nginx", "/usr/bin/curl"):
        if not Path(tool).exists():
            pytest.skip(f"{tool} is missing (make system-deps installs nginx)")
    if reason := unavailable():
        pytest.skip(f"systemd cannot run as PID 1 here: {reason}")
    python = host_python_version()
    if python is None:
        pytest.skip("/usr/bin/python3 is missing or of another minor version")
    blocks = single_process_blocks(DOC.read_text())
    first, upgrade = doc_versions(blocks)[:2]

    # The artifacts the docs name, as release.py builds them (suite marked as run, the
    # wheelhouse inside, the record signed with this run's release key).
    release = load_release()
    work, published = tmp_path / "work", tmp_path / "published"
    work.mkdir()
    published.mkdir()
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    built = tmp_path / "built.tar.gz"
    version = release.read_version((REPO / "pyproject.toml").read_text())
    # Built for the host's /usr/bin/python3, as `release.py build --host-python` builds.
    wheels = build_wheelhouse(tmp_path / "wheels", python)
    info = {"version": version, "commit": commit, "tested": True, "tests": {"passed": 1},
            "python": python}  # fmt: skip
    release.write_artifact(REPO, commit, f"hal-{version}/", info, built, wheels)
    for name in (first, upgrade):
        artifact = published / f"hal-{name}.tar.gz"
        retarget(built, artifact, version, name)
        sign(artifact, release_key)  # its .sha256 and .record.json beside it
        # "a directory holding hal-<v>.tar.gz, its .sha256 and .record.json"
        for suffix in ("", ".sha256", ".record.json"):
            shutil.copy(published / f"{artifact.name}{suffix}", work)
    shutil.copy(release_key["public"], work)  # "… and release-key.pub" (§1)
    ca = hosts.make_ca(tmp_path / "tls", "hal.example.org", "artifacts.example.org")
    shims = tmp_path / "shims"
    shims.mkdir()
    apt_get = shims / "apt-get"  # no package index here: checks they are installed
    apt_get.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_APT} "$@"\n')
    apt_get.chmod(0o755)
    # certbot: puts a token in the webroot, fetches it as the ACME server would (plain HTTP
    # to the name: only an nginx already serving the webroot passes), then issues.
    certbot = shims / "certbot"
    certbot.write_text(f"#!{sys.executable}\n{CERTBOT}")
    certbot.chmod(0o755)
    doc_script = tmp_path / "doc.sh"
    doc_script.write_text(
        "".join(
            f"echo '===== docs/deploy.md block {n}'\n{block}\n" for n, block in enumerate(blocks)
        )
    )
    results = tmp_path / "results"
    results.mkdir()
    q = shlex.quote
    harness = tmp_path / "harness.sh"
    harness.write_text(
        f"""set -euo pipefail
echo '127.0.0.1 hal.example.org artifacts.example.org' >> /etc/hosts
cat {q(str(ca.ca_pem))} >> /etc/ssl/certs/ca-certificates.crt
# The proxy is §2's "Units, proxy, TLS" block (certbot: the stand-in below). The artifact
# server the docs download from (§1: "publish both files … over HTTPS") has its own files.
mkdir -p /etc/ssl/hal-test
cp {q(str(ca.cert_pem))} /etc/ssl/hal-test/fullchain.pem
cp {q(str(ca.key_pem))} /etc/ssl/hal-test/privkey.pem
mkdir -p /srv/artifacts/hal && cp {q(str(published))}/* /srv/artifacts/hal/
cat > /etc/nginx/sites-enabled/artifacts.conf <<'EOF'
server {{
    listen 443 ssl;
    server_name artifacts.example.org;
    ssl_certificate /etc/ssl/hal-test/fullchain.pem;
    ssl_certificate_key /etc/ssl/hal-test/privkey.pem;
    location /hal/ {{ alias /srv/artifacts/hal/; }}
}}
EOF
nginx -t -q && systemctl start nginx
export PATH={q(str(shims))}:/usr/sbin:/usr/bin:/sbin:/bin
export PIP_DISABLE_PIP_VERSION_CHECK=1
export CERTBOT_ISSUES={q(str(ca.cert_pem))}:{q(str(ca.key_pem))}
cd {q(str(work))}
. {q(str(doc_script))}
echo '===== after the documented commands'
R={q(str(results))}
# Until healthy, as an operator waits after a restore: the worker's first heartbeat can
# take a while on a loaded machine (health says `starting` until then).
for _ in $(seq 1 180); do
  curl -fsS --retry 30 --retry-delay 1 https://hal.example.org/api/health > $R/health.json
  grep -q '"status": *"ok"' $R/health.json && break
  sleep 1
done
readlink /srv/hal/current > $R/current.txt
systemctl stop hal-web hal-worker
systemctl stop nginx
"""
    )
    # The harness runs inside the machine as root (a login's environment, not the test
    # runner's); the repository is there read-only, this test's directory read-write.
    with Machine.boot(tmp_path / "machine", binds=[f"{REPO}:ro", str(tmp_path)]) as machine:
        done = machine.run("bash", str(harness), check=False, timeout=1740)
        # systemd's own lines: the units it ran, and whether a stop needed the SIGKILL.
        journal = machine.run("journalctl", "--no-pager", "_PID=1", check=False).stdout
    print(done.stdout[-20000:], done.stderr[-8000:], sep="\n")
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert f"done: HAL {first} is current (previous: none)" in out
    assert f"done: HAL {upgrade} is current (previous: {first})" in out
    assert re.search(r"Restored from \S+", out)
    # §2's TLS order: the ACME site served the challenge before the TLS site existed.
    assert "Successfully received certificate for hal.example.org" in out
    health = json.loads((results / "health.json").read_text())
    # Rolled back by hand and restored: the first version again, healthy.
    assert health["version"] == first and health["status"] == "ok", health
    assert (results / "current.txt").read_text().strip() == f"releases/{first}"
    # The docs' units ran under the real systemd, and every stop ended on SIGTERM.
    for unit in ("hal-web.service", "hal-worker.service", "hal-snapshot.timer"):
        assert f"Started {unit}" in journal, unit
    assert "Stopped hal-web.service" in journal
    assert "stop-sigterm' timed out" not in journal, journal[-3000:]
