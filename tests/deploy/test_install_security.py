"""install.py's guards: the signed record, the interpreter, the wheelhouse, no proxy to itself."""

from __future__ import annotations

import http.server
import json
import os
import platform
import shutil
import stat
import threading
from pathlib import Path

import pytest

from tests.deploy.install_host import (
    PYTHON,
    load_install,
    make_release_key,
    retarget,
    run_install,
    sha256,
    sign,
    write_env_file,
)


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every GET with its server's `answer` and records the request line."""

    def do_CONNECT(self):
        self.server.seen.append(self.requestline)  # type: ignore[attr-defined]
        self.send_response(403)
        self.end_headers()

    def do_GET(self):
        self.server.seen.append(self.requestline)  # type: ignore[attr-defined]
        status, body = self.server.answer  # type: ignore[attr-defined]
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def servers():
    """Two loopback servers: daphne's health, and a proxy that would answer 502 for it."""
    made = []
    for answer in ((200, {"status": "ok", "version": "1.0"}), (502, {})):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
        server.answer, server.seen = answer, []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
    yield made
    for server in made:
        server.shutdown()


def test_the_loopback_health_read_back_never_goes_through_a_proxy(servers, monkeypatch):
    health_server, proxy = servers
    proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
    # As ship.py --remote-env HTTPS_PROXY=… gives them to install.py (for the download).
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy_url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    health = load_install("health")
    url = f"http://127.0.0.1:{health_server.server_address[1]}/api/health"
    assert health.read_health(url) == (200, {"status": "ok", "version": "1.0"})
    assert proxy.seen == []
    assert health_server.seen == ["GET /api/health HTTP/1.1"]
    # The same environment does send a non-loopback request to the proxy (it is honoured
    # for the download and the public URL): a CONNECT reaches it (it refuses the tunnel).
    with pytest.raises(OSError):
        health.read_health("https://hal.invalid/api/health")
    assert [line.split()[:2] for line in proxy.seen] == [["CONNECT", "hal.invalid:443"]]


def refused(done, needle: str, tmp_path, status: int = 1) -> None:
    assert done.returncode == status, done.stdout + done.stderr
    assert needle in done.stderr, done.stderr
    assert not (tmp_path / "srv" / "releases").exists()  # nothing staged
    assert not (tmp_path / "srv" / "current").exists()


def install_args(tmp_path, key: dict, *extra: str) -> list[str]:
    write_env_file(tmp_path / "hal.env", tmp_path / "data")
    return [
        *("--root", str(tmp_path / "srv"), "--env-file", str(tmp_path / "hal.env")),
        *("--release-key", str(key["public"]), "--python", PYTHON),
        "--restart-cmd=false",
        *extra,
    ]


def test_a_forged_tested_flag_and_a_rewritten_checksum_are_refused(
    tmp_path, artifacts, release_key
):
    # A --skip-tests build, honestly signed "tested": false ...
    untested = tmp_path / artifacts["untested"].name
    shutil.copy(artifacts["untested"], untested)
    sign(untested, release_key)
    args = install_args(tmp_path, release_key)
    done = run_install("--artifact", str(untested), "--sha256", sha256(untested), *args)
    refused(done, "--skip-tests", tmp_path)
    # ... its record edited to say "tested": true: the signature no longer verifies.
    record = untested.with_name(untested.name + ".record.json")
    envelope = json.loads(record.read_text())
    assert '"tested": false' in envelope["record"]
    envelope["record"] = envelope["record"].replace('"tested": false', '"tested": true')
    record.write_text(json.dumps(envelope))
    done = run_install("--artifact", str(untested), "--sha256", sha256(untested), *args)
    refused(done, "signature does not verify", tmp_path)

    # A tested, signed artifact repacked with other contents, and the checksum everybody
    # is given rewritten to match it: the signed sha256 is the artifact's no longer.
    first = artifacts["first"]
    version = json.loads(
        json.loads(first.with_name(first.name + ".record.json").read_text())["record"]
    )["version"]
    forged = tmp_path / first.name
    retarget(first, forged, version, version, commit="0" * 40)
    shutil.copy(first.with_name(first.name + ".record.json"), tmp_path)
    done = run_install("--artifact", str(forged), "--sha256", sha256(forged), *args)
    refused(done, "disagrees with the artifact: signed sha256", tmp_path)

    # No record at all, or one signed by another key.
    (tmp_path / (first.name + ".record.json")).unlink()
    done = run_install("--artifact", str(forged), "--sha256", sha256(forged), *args)
    refused(done, "no signed build record", tmp_path)
    other = make_release_key(tmp_path / "other")
    sign(forged, other)
    done = run_install("--artifact", str(forged), "--sha256", sha256(forged), *args)
    refused(done, "does not verify (it names key", tmp_path)


def test_a_wheelhouse_for_another_python_is_refused_before_anything(
    tmp_path, artifacts, release_key
):
    first = tmp_path / artifacts["first"].name
    shutil.copy(artifacts["first"], first)
    args = install_args(tmp_path, release_key)
    here = platform.python_version()
    # Another minor version, and the same minor with another patch version (its markers,
    # e.g. python_full_version < "3.11.3", may pick other wheels): both refused, exit 5,
    # before even the root is made, saying how to build for this interpreter.
    for other in ("3.10.14", f"{here.rsplit('.', 1)[0]}.{int(here.rsplit('.', 1)[1]) + 1}"):
        sign(first, release_key, python=other)
        done = run_install("--artifact", str(first), "--sha256", sha256(first), *args)
        refused(done, f"wheelhouse was resolved for Python {other}", tmp_path, status=5)
        assert "error [python-mismatch]:" in done.stderr
        assert f"release.py build --host-python {here}" in done.stderr
        assert not (tmp_path / "srv").exists()


def test_an_interpreter_the_service_user_cannot_run_is_refused_first(
    tmp_path, artifacts, release_key
):
    if os.geteuid() != 0:
        pytest.skip("needs root (runs a step as another user)")
    # Root's own interpreter, in a directory only root may enter (a pyenv shim under /root).
    private = tmp_path / "root-only"
    private.mkdir(mode=0o700)
    (private / "python3").symlink_to(PYTHON)
    first = artifacts["first"]
    args = install_args(tmp_path, release_key, "--user", "nobody")
    args[args.index("--python") + 1] = str(private / "python3")
    done = run_install("--artifact", str(first), "--sha256", sha256(first), *args)
    refused(done, f"--python {private / 'python3'} cannot run as the service user nobody", tmp_path)
    assert "sha256 verified" not in done.stdout  # checked before the artifact is even read
    # Relative names are refused too: the interpreter is chosen explicitly.
    args[args.index("--python") + 1] = "python3"
    done = run_install("--artifact", str(first), "--sha256", sha256(first), *args)
    refused(done, "--python must be an absolute path", tmp_path)


def test_collect_static_never_follows_a_link_the_service_user_planted(tmp_path, monkeypatch):
    """staticfiles/ is the service user's while collectstatic fills it: links it plants, and
    a directory it swaps for a link while root takes the tree back, are never followed."""
    staging = load_install("staging")
    release = tmp_path / "release"
    release.mkdir()
    static = release / "staticfiles"
    outside = tmp_path / "outside"  # root's, private: nothing here may change
    outside.mkdir(mode=0o700)
    secret = outside / "app.css"
    secret.write_text("root's own")
    secret.chmod(0o600)
    as_root = os.geteuid() == 0
    if as_root:
        os.chown(secret, 4242, 4242)

    class Planting:
        """The service user's collectstatic: files, links out, a directory to swap later."""

        user = None

        def manage(self, release, *args, **env):
            root = Path(env["HAL_STATIC_ROOT"])
            (root / "hal").mkdir()
            (root / "hal" / "app.css").write_text("ok")
            (root / "evil.css").symlink_to(secret)
            (root / "evil-dir").symlink_to(outside)
            (root / "sub").mkdir()
            (root / "sub" / "app.css").write_text("mine")
            return ""

    swapped: list[bool] = []

    def racing(real):
        """At root's first change of owner or mode, a hal process swaps sub/ for a link."""

        def change(*args, **kwargs):
            if not swapped:
                swapped.append(True)
                (static / "sub").rename(static / "sub-gone")
                (static / "sub").symlink_to(outside)
            return real(*args, **kwargs)

        return change

    for name in ("chown", "fchown", "lchown", "chmod", "fchmod", "lchmod"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, racing(getattr(os, name)))
    staging.collect_static(Planting(), release)

    assert swapped
    after = os.stat(secret)
    assert stat.S_IMODE(after.st_mode) == 0o600 and secret.read_text() == "root's own"
    assert stat.S_IMODE(os.stat(outside).st_mode) == 0o700
    if as_root:
        assert (after.st_uid, after.st_gid) == (4242, 4242)
    for link in ("evil.css", "evil-dir", "sub"):
        assert (static / link).is_symlink()
        if as_root:
            assert os.lstat(static / link).st_uid == 0  # the link itself is root's now
    assert stat.S_IMODE(os.stat(static / "hal" / "app.css").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(static / "hal").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(static).st_mode) == 0o755


def test_collect_static_refuses_a_hard_link_to_a_file_elsewhere(tmp_path):
    """A hard link in staticfiles/ (say to the service's own database) is not taken over."""
    staging = load_install("staging")
    errors = load_install("errors")
    release = tmp_path / "release"
    release.mkdir()
    database = tmp_path / "hal.sqlite3"
    database.write_text("data")
    database.chmod(0o600)

    class Linking:
        user = None

        def manage(self, release, *args, **env):
            os.link(database, Path(env["HAL_STATIC_ROOT"]) / "db.css")
            return ""

    with pytest.raises(errors.InstallError, match="2 hard links"):
        staging.collect_static(Linking(), release)
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
