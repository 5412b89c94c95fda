"""A real Prometheus Alertmanager (Debian's package) on a loopback port, for the tests: its
config (a webhook receiver with a bearer token, group timings in seconds), its API and its
own metrics."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.bounds import WAIT

BINARY = "/usr/bin/prometheus-alertmanager"

CONFIG = """\
route:
  receiver: hal
  group_by: ["alertname"]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 3s
receivers:
  - name: hal
    webhook_configs:
      - url: "{url}"
        send_resolved: true
        max_alerts: 0
        http_config:
          authorization:
            type: Bearer
            credentials_file: "{token_file}"
"""


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class Alertmanager:
    """`prometheus-alertmanager` with its own config and storage under `folder`."""

    def __init__(self, folder: Path, hal_url: str, token: str) -> None:
        from tests.browser.conftest import _free_port

        folder.mkdir(parents=True, exist_ok=True)
        token_file = folder / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        config = folder / "alertmanager.yml"
        config.write_text(
            CONFIG.format(url=f"{hal_url}/api/alerts/alertmanager", token_file=token_file)
        )
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / "alertmanager.log"
        self._log = open(self.log_path, "wb")  # closed in stop()
        self.proc = subprocess.Popen(
            [
                BINARY,
                f"--config.file={config}",
                f"--storage.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",  # no HA gossip: one instance, no peers
                "--log.level=debug",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("alertmanager exited:\n" + self.log_text())
            try:
                urllib.request.urlopen(self.url + "/-/ready", timeout=2)
                return
            except Exception:
                time.sleep(0.2)
        raise RuntimeError("alertmanager did not start")

    def post_alerts(self, alerts: list[dict[str, Any]]) -> None:
        """POST /api/v2/alerts (what Prometheus does)."""
        request = urllib.request.Request(
            self.url + "/api/v2/alerts",
            data=json.dumps(alerts).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            assert response.status == 200

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a metric's samples matching `labels` (its own /metrics)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=WAIT) as response:
            text = response.read().decode()
        total = 0.0
        for line in text.splitlines():
            match = re.match(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", line)
            if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
                total += float(match.group(2))
        return total

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
