"""deploy/systemd and deploy/proxy: the files say what docs/deploy.md and install.py assume."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bounds import SLOW

REPO = Path(__file__).resolve().parents[2]
SYSTEMD = REPO / "deploy" / "systemd"
PROXY = REPO / "deploy" / "proxy"
PYTHON = "/srv/hal/current/.venv/bin/python"


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string((SYSTEMD / name).read_text())
    return parser


def argv(parser: configparser.ConfigParser) -> list[str]:
    return shlex.split(parser["Service"]["ExecStart"])


HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
}


@pytest.mark.parametrize("name", ["hal-web.service", "hal-web@.service", "hal-worker.service"])
def test_console_units_share_release_env_user_and_hardening(name):
    u = unit(name)
    service = u["Service"]
    assert service["User"] == "hal"
    assert service["Group"] == "hal"
    assert service["EnvironmentFile"] == "/etc/hal/hal.env"
    assert service["WorkingDirectory"] == "/srv/hal/current"
    assert "HAL_PRODUCTION=1" in shlex.split(service["Environment"])
    for key, value in HARDENING.items():
        assert service[key] == value, key
    # The only writable place is the data dir (DB, vault.keys, artifacts, snapshots).
    assert service["ReadWritePaths"] == "/var/lib/hal"
    assert service["StateDirectory"] == "hal"
    assert service["UMask"] == "0077"
    assert service["Restart"] == "on-failure"
    assert argv(u)[0] == PYTHON  # the venv install.py creates in each release
    assert u["Install"]["WantedBy"] == "multi-user.target"


def test_web_unit_runs_daphne_on_loopback_only():
    args = argv(unit("hal-web.service"))
    # `python -m daphne` puts the working directory (the release) first on sys.path.
    assert args[1:3] == ["-m", "daphne"]
    assert args[args.index("-b") + 1] == "127.0.0.1"
    assert args[args.index("-p") + 1] == "8000"
    # daphne's --proxy-headers would believe any client's X-Forwarded-For; HAL's own
    # middleware believes it from HAL_TRUSTED_PROXIES only.
    assert "--proxy-headers" not in args
    assert args[-1] == "hal.asgi:application"


def test_web_template_unit_is_the_single_unit_on_the_instance_port():
    single, template = unit("hal-web.service"), unit("hal-web@.service")
    args = argv(template)
    assert args[args.index("-b") + 1] == "127.0.0.1"
    assert args[args.index("-p") + 1] == "%i"
    assert "--proxy-headers" not in args
    # Everything else is the single process's unit: same release, env, user, sandbox.
    for key, value in single["Service"].items():
        if key != "ExecStart":
            assert template["Service"][key] == value, key
    assert argv(single)[: args.index("-p")] == args[: args.index("-p")]


def test_worker_unit_runs_the_task_worker():
    u = unit("hal-worker.service")
    assert argv(u)[1:] == ["manage.py", "hal_worker"]
    assert "hal-web.service" not in u["Unit"].get("Requires", "")


def test_agent_unit_uses_the_real_agent_flags():
    u = unit("hal-agent.service")
    args = argv(u)
    assert args[1:3] == ["-m", "hal.agent"]
    flags = [a for a in args if a.startswith("--")]
    assert {"--hal", "--token-file", "--root"} <= set(flags)
    assert args[args.index("--hal") + 1].startswith("https://")
    helptext = subprocess.run(
        [sys.executable, "-m", "hal.agent", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in flags:
        assert flag in helptext, flag
    service = u["Service"]
    assert service["User"] == "hal-agent"
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    root = args[args.index("--root") + 1]
    token = args[args.index("--token-file") + 1]
    writable = service["ReadWritePaths"].split()
    assert root in writable
    assert any(token.startswith(p + "/") for p in writable)


def nginx() -> str:
    return (PROXY / "nginx-hal.conf").read_text()


def caddy() -> str:
    return (PROXY / "Caddyfile").read_text()


def test_nginx_terminates_tls_serves_static_and_proxies_websockets():
    conf = nginx()
    assert re.search(r"listen 443 ssl( http2)?;", conf)
    assert "ssl_certificate " in conf and "ssl_certificate_key " in conf
    assert "return 301 https://$host$request_uri;" in conf
    assert re.search(r"location /static/ \{\s*alias /srv/hal/current/staticfiles/;", conf)
    assert conf.count("proxy_pass http://hal_daphne;") == 2
    assert "server 127.0.0.1:8000 max_fails=0;" in conf
    ws = conf[conf.index("location /ws/") :]
    ws = ws[: ws.index("}")]
    assert "proxy_http_version 1.1;" in ws
    assert "proxy_set_header Upgrade $http_upgrade;" in ws
    assert 'proxy_set_header Connection "upgrade";' in ws
    assert conf.count("proxy_set_header X-Forwarded-Proto https;") == 2
    assert conf.count("proxy_set_header Host $http_host;") == 2  # port kept: Origin checks
    # One HSTS header, from the proxy, on every response (static files too).
    assert (
        'add_header Strict-Transport-Security "max-age=31536000; includeSubDomains" always;' in conf
    )
    assert "proxy_hide_header Strict-Transport-Security;" in conf
    assert "client_max_body_size 512m;" in conf


def test_nginx_sets_the_client_address_and_retries_idempotent_requests():
    conf = nginx()
    # The edge proxy states the connecting address; a client-sent header is replaced.
    assert "$proxy_add_x_forwarded_for" not in conf
    assert conf.count("proxy_set_header X-Forwarded-For $remote_addr;") == 2
    # A restarting process: the next upstream, for requests nginx may resend (never a
    # POST already sent: no non_idempotent).
    assert re.search(r"^\s*proxy_next_upstream error timeout;", conf, re.M)
    assert "non_idempotent" not in conf
    # The multi-process layout's four hal-web@ ports are spelled out for the operator.
    for port in (8001, 8002, 8003, 8004):
        assert f"#server 127.0.0.1:{port} max_fails=0;" in conf


def test_caddy_sets_the_client_address_retries_and_is_valid(tmp_path):
    conf = caddy()
    assert "header_up X-Forwarded-For {remote_host}" in conf
    assert "lb_try_duration 15s" in conf
    tool = shutil.which("caddy")
    if tool is None:
        pytest.skip("caddy is not installed (make system-deps installs it)")
    done = subprocess.run(
        [tool, "validate", "--adapter", "caddyfile", "--config", str(PROXY / "Caddyfile")],
        capture_output=True,
        text=True,
        timeout=SLOW,
        env={**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert "Valid configuration" in done.stdout + done.stderr


def test_caddy_terminates_tls_serves_static_and_proxies():
    conf = caddy()
    assert "hal.example.org {" in conf
    assert re.search(r"handle_path /static/\* \{\s*root \* /srv/hal/current/staticfiles", conf)
    assert "file_server" in conf
    assert "reverse_proxy 127.0.0.1:8000" in conf
    assert "header_up X-Forwarded-Proto {scheme}" in conf
    assert "header_down -Strict-Transport-Security" in conf
    assert 'Strict-Transport-Security "max-age=31536000; includeSubDomains"' in conf
    assert "max_size 512MB" in conf


def test_snapshot_timer_runs_dr_snapshot_as_the_service_does():
    u = unit("hal-snapshot.service")
    service = u["Service"]
    web = unit("hal-web.service")["Service"]
    assert service["Type"] == "oneshot"
    assert argv(u) == [PYTHON, "manage.py", "dr_snapshot"]
    for key in ("User", "EnvironmentFile", "WorkingDirectory", "ReadWritePaths", "Environment"):
        assert service[key] == web[key], key
    timer = unit("hal-snapshot.timer")
    assert timer["Timer"]["Persistent"] == "true"
    assert timer["Install"]["WantedBy"] == "timers.target"


SANDBOX = (
    "NoNewPrivileges", "ProtectSystem", "ReadWritePaths", "ProtectHome", "PrivateTmp",
    "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
    "ProtectControlGroups", "ProtectClock", "ProtectHostname", "RestrictSUIDSGID",
    "RestrictRealtime", "RestrictNamespaces", "LockPersonality", "RestrictAddressFamilies",
    "SystemCallArchitectures", "SystemCallFilter", "CapabilityBoundingSet",
    "AmbientCapabilities", "UMask",
)  # fmt: skip


@pytest.mark.parametrize("name", ["hal-snapshot.service", "hal-web.service"])
def test_every_console_unit_has_the_workers_sandbox(name):
    """Issue 28 item 7: hal-snapshot.service ran hal's code with a weaker sandbox."""
    service, worker = unit(name)["Service"], unit("hal-worker.service")["Service"]
    for key in SANDBOX:
        assert service.get(key) == worker[key], key


def exposure(tool: str, path: Path) -> float:
    done = subprocess.run(
        [tool, "security", "--offline=yes", "--no-pager", str(path)],
        capture_output=True,
        text=True,
        timeout=SLOW,
    )
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout + done.stderr)
    if found is None:
        pytest.skip(f"systemd-analyze security --offline does not work here: {done.stderr[-300:]}")
    return float(found.group(1))


def test_systemd_analyze_security_rates_the_snapshot_unit_like_the_worker(tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    for name in ("hal-snapshot.service", "hal-worker.service"):
        (tmp_path / name).write_text((SYSTEMD / name).read_text())
    snapshot = exposure(tool, tmp_path / "hal-snapshot.service")
    assert snapshot <= exposure(tool, tmp_path / "hal-worker.service")
    assert snapshot < 3.0  # was 4.9 with the short list


def test_hal_manage_runs_like_the_units():
    script = REPO / "deploy" / "hal-manage"
    assert os.access(script, os.X_OK)
    text = script.read_text()
    web = unit("hal-web.service")["Service"]
    for key in ("User", "EnvironmentFile", "WorkingDirectory", "ReadWritePaths"):
        assert f"{key}={web[key]}" in text, key
    assert f'"Environment={web["Environment"]}"' in text
    assert f'{PYTHON} manage.py "$@"' in text
    # The whole hardening block (it had only the first five lines: a manual command ran with
    # every capability in its bounding set and no seccomp filter; issue 42 item 2).
    hardening = list(web)[list(web).index("NoNewPrivileges") :]
    for key in hardening:
        value = f"{key}={web[key]}"
        assert f"-p {value} " in text or f'-p "{value}" ' in text, value


@pytest.mark.parametrize(
    "name",
    [
        "hal-web.service",
        "hal-web@8001.service",
        "hal-worker.service",
        "hal-agent.service",
        "hal-snapshot.service",
        "hal-snapshot.timer",
    ],
)
def test_systemd_accepts_every_directive(name, tmp_path):
    """systemd-analyze verify, with the not-yet-installed interpreters pointed at this one."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    for path in SYSTEMD.iterdir():
        text = path.read_text()
        for python in (PYTHON, "/opt/hal-agent/venv/bin/python"):
            text = text.replace(python, sys.executable)
        (tmp_path / path.name).write_text(text)
    if "@" in name:  # an instance of a template: its own file name, the template's text
        (tmp_path / name).write_text((tmp_path / (name.split("@")[0] + "@.service")).read_text())
    done = subprocess.run(
        [tool, "verify", "--man=no", str(tmp_path / name)],
        capture_output=True,
        text=True,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"},
        timeout=SLOW,
    )
    output = done.stdout + done.stderr
    assert "Unknown" not in output and "Failed to parse" not in output, output
    assert done.returncode == 0, output


def test_the_docs_never_copy_the_agent_unit_onto_the_console_host():
    """Issue 28 item 9: `cp hal-*.service` brought hal-agent.service along."""
    doc = (REPO / "docs" / "deploy.md").read_text()
    blocks = "\n".join(re.findall(r"^```sh\n(.*?)^```", doc, flags=re.M | re.S))
    assert "hal-*.service" not in blocks
    assert "cp deploy/systemd/hal-*" not in "".join(p.read_text() for p in SYSTEMD.iterdir())
    console = re.findall(r"^for unit in ([^;]+); do", blocks, flags=re.M)
    assert len(console) == 2, console  # §2 (single process) and §6 (hal-web@)
    for units in console:
        assert "hal-agent" not in units and "hal-worker.service" in units
    # Nothing is started before a release exists: `enable --now` only after an install.
    for line in blocks.splitlines():
        if "enable --now" in line and not line.startswith("#"):
            assert "hal-web" not in line and "hal-worker" not in line, line
