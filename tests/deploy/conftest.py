"""Fixtures of the install/ship tests: artifacts built from HEAD, an artifact server, an ops
host in a temp dir (each module that uses them gets its own)."""

from __future__ import annotations

import functools
import http.server
import subprocess
import threading
import tomllib

import pytest

from tests.deploy.install_host import (
    REPO,
    build_wheelhouse,
    free_port,
    load_release,
    make_release_key,
    retarget,
    sign,
    stop_fake_services,
    write_env_file,
)


@pytest.fixture(scope="module")
def version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="session")
def wheels(tmp_path_factory):
    """The dependencies' wheelhouse (built once per test process, offline)."""
    return build_wheelhouse(tmp_path_factory.mktemp("wheelhouse") / "wheels")


@pytest.fixture(scope="module")
def release_key(tmp_path_factory):
    """This module's release key pair (the artifacts are signed with it, the host trusts it)."""
    return make_release_key(tmp_path_factory.mktemp("release-key"))


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory, version, wheels, release_key):
    """hal-<v>.tar.gz as release.py builds it from HEAD (suite marked as run), and copies,
    each with its .sha256 and signed record."""
    out = tmp_path_factory.mktemp("artifacts")
    first = out / f"hal-{version}.tar.gz"
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.strip()
    info = {"version": version, "commit": commit, "tested": True, "tests": {"passed": 1}}
    load_release().write_artifact(REPO, commit, f"hal-{version}/", info, first, wheels)
    second_version = f"{version}.post1"
    second = out / f"hal-{second_version}.tar.gz"
    retarget(first, second, version, second_version)
    older = out / "hal-0.0.1.tar.gz"
    retarget(first, older, version, "0.0.1")
    untested = out / f"hal-{version}.post2.tar.gz"
    retarget(first, untested, version, f"{version}.post2", tested=False, tests={})
    for artifact in (first, second, older, untested):
        sign(artifact, release_key)
    return {
        "first": first,
        "second": second,
        "second_version": second_version,
        "older": older,
        "untested": untested,
    }


@pytest.fixture(scope="module")
def artifact_server(artifacts):
    """A real loopback HTTP server for the artifact download (http:// only on loopback)."""
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(artifacts["first"].parent)
    )
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def site(tmp_path_factory, release_key):
    """An ops host in a temp dir: root, data dir, env file, release key, the fake service."""
    base = tmp_path_factory.mktemp("ops")
    data = base / "data"
    data.mkdir()
    env_file = base / "hal.env"
    write_env_file(env_file, data)
    port = free_port()
    state = base / "service"
    info = {
        "root": base / "srv",
        "data": data,
        "env_file": env_file,
        "port": port,
        "state": state,
        "health": f"http://127.0.0.1:{port}/api/health",
        "release_key": release_key,
    }
    yield info
    stop_fake_services(state)
