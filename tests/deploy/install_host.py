"""Helpers shared by the install/ship tests: the artifacts, the ops host in a temp dir, the
fake service's commands, install.py as a subprocess."""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import secrets
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

from tests import ports
from tests.bounds import SLOW

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "deploy" / "install.py"
FAKE_SERVICE = Path(__file__).with_name("fake_service.py")


def load_install(name: str):
    """A module of the installer package, imported from deploy/ (install.py's way: beside it)."""
    if str(INSTALL.parent) not in sys.path:
        sys.path.insert(0, str(INSTALL.parent))
    return importlib.import_module(f"hal_install.{name}")


def free_port() -> int:
    return ports.free_port()  # tests/ports.py: outside the ephemeral range


def clean_env() -> dict[str, str]:
    """No DATABASE_URL/REDIS_URL/HAL_* from the outer run (CI runs on PostgreSQL too).

    Nothing lends the release venv packages: it is installed from the artifact's
    wheelhouse, as on a host.
    """
    keep = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TMPDIR"}}
    keep["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return keep


# The venv's local copy of the dependency wheels (`make wheelhouse`, part of `make test`,
# fills it from the package index): the tests' release wheelhouses are built from it offline.
LOCAL_WHEELS = REPO / ".venv" / "wheelhouse"
# The release venv's interpreter in the tests: the one the wheelhouse was built with (a host
# passes /usr/bin/python3, the default; here the test venv's Python may be another micro
# version, whose wheels and markers differ).
PYTHON = sys.executable


HOST_PYTHON = "/usr/bin/python3"  # a host's own interpreter (the release venv's under systemd)


def host_python_version() -> str | None:
    """/usr/bin/python3's full version, if it is of this interpreter's minor version (the
    wheels are built for that minor version), else None."""
    if not Path(HOST_PYTHON).exists():
        return None
    done = subprocess.run(
        [HOST_PYTHON, "-c", "import platform; print(platform.python_version())"],
        capture_output=True, text=True,
    )  # fmt: skip
    full = done.stdout.strip()
    return full if full.split(".")[:2] == list(map(str, sys.version_info[:2])) else None


def build_wheelhouse(dest: Path, host_python: str | None = None) -> Path:
    """The dependencies' wheelhouse as release.py build makes it, but from LOCAL_WHEELS
    (for `host_python`'s full version, as `--host-python`; default this interpreter's)."""
    if not any(LOCAL_WHEELS.glob("*.whl")):
        raise RuntimeError(f"{LOCAL_WHEELS} holds no wheels: run `make wheelhouse`")
    load_release().build_wheelhouse(
        REPO, "HEAD", dest, ["--no-index", "--find-links", str(LOCAL_WHEELS)], host_python
    )
    return dest


def make_release_key(directory: Path) -> dict:
    """A release key made per run: the private key object and the public PEM file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    directory.mkdir(parents=True, exist_ok=True)
    private = Ed25519PrivateKey.generate()
    public = directory / "release-key.pub"
    public.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return {"private": private, "public": public}


def sign(artifact: Path, key: dict, **record_fields) -> Path:
    """Write <artifact>.sha256 and the signed <artifact>.record.json, as release.py build
    does, from the build info inside the artifact (record_fields override the record)."""
    release = load_release()
    digest = sha256(artifact)
    artifact.with_name(artifact.name + ".sha256").write_text(f"{digest}  {artifact.name}\n")
    info = release.read_build_info(artifact)
    record = {**release.build_record(artifact, info, digest, 0), **record_fields}
    return release.write_record(artifact, record, key["private"])


def run_install(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, str(INSTALL), *args],
        capture_output=True,
        text=True,
        timeout=SLOW,
        env=clean_env(),
    )
    print(done.stdout, done.stderr, sep="\n")
    return done


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_env_file(path: Path, data: Path) -> None:
    path.write_text(
        "# test hal.env\n"
        "HAL_PRODUCTION=1\n"
        f"DJANGO_SECRET_KEY={secrets.token_urlsafe(50)}\n"
        "HAL_ALLOWED_HOSTS=127.0.0.1,localhost\n"
        f"HAL_DATA_DIR={data}\n"
        "HAL_HEALTH_REQUIRE_WORKER=0\n"
    )


def load_release():
    spec = importlib.util.spec_from_file_location(
        "hal_deploy_release", REPO / "deploy" / "release.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def retarget(src_path: Path, dest_path: Path, old: str, new: str, **build) -> None:
    """A copy of the artifact src_path as version `new` (and build record fields changed)."""
    with tarfile.open(src_path) as src, tarfile.open(dest_path, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None
            member.name = member.name.replace(f"hal-{old}", f"hal-{new}", 1)
            # A long name (a wheel's) is also in the member's PAX header, which would win.
            member.pax_headers.pop("path", None)
            if member.name.endswith("/pyproject.toml") and member.name.count("/") == 1:
                data = data.replace(f'version = "{old}"'.encode(), f'version = "{new}"'.encode())
            if member.name.endswith("/.hal-build.json") and member.name.count("/") == 1:
                info = {**json.loads(data), "version": new, **build}
                data = json.dumps(info).encode()
            if data is not None:
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)


def stop_fake_services(state: Path) -> None:
    for pidfile in state.glob("pid-*"):
        try:
            os.killpg(int(pidfile.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass


def restart_cmd(site, *, port: int | str | None = None, **misbehaving: str) -> str:
    """The fake `systemctl restart` (--bad-release/--crash-release/--failing-release NAME)."""
    cmd = (
        f"{sys.executable} {FAKE_SERVICE} --root {site['root']} --env-file {site['env_file']}"
        f" --port {port or site['port']} --state {site['state']}"
    )
    for option, release in misbehaving.items():
        cmd += f" --{option.replace('_', '-')} {release}"
    return cmd


def alive_cmd(site, port: int | str | None = None) -> str:
    """The fake `systemctl is-active --quiet hal-web`: exits non-zero once the process died."""
    port = port or site["port"]
    return f"{sys.executable} {FAKE_SERVICE} --alive --port {port} --state {site['state']}"


def common_args(site) -> list[str]:
    return [
        "--release-key",
        str(site["release_key"]["public"]),
        "--python",
        PYTHON,
        "--root",
        str(site["root"]),
        "--env-file",
        str(site["env_file"]),
        "--health-url",
        site["health"],
        "--health-timeout",
        "30",
        "--pip-args=--no-index",
    ]
