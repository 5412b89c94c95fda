"""deploy/monitoring/ (issue 47): the shipped rules pass `promtool check rules` and their
unit tests (`promtool test rules`), and the scrape config passes `promtool check config`
with its rule file where the config says, scraping the §6 layout's five processes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

pytestmark = pytest.mark.skipif(
    not Path(PROMTOOL).exists(), reason="promtool is missing (make system-deps installs it)"
)


def promtool(*args: str, cwd: Path = MONITORING) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_rules_pass_promtool_check():
    done = promtool("check", "rules", "hal-rules.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_rules_unit_tests_pass():
    done = promtool("test", "rules", "hal-rules.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_rule_is_caught(tmp_path):
    text = (MONITORING / "hal-rules.yml").read_text()
    (tmp_path / "hal-rules.yml").write_text(text.replace("> 1800", "> > 1800", 1))
    assert promtool("check", "rules", "hal-rules.yml", cwd=tmp_path).returncode != 0


def test_the_scrape_config_covers_the_layout(tmp_path):
    text = (MONITORING / "prometheus-hal.yml").read_text()
    targets = re.findall(r"^\s+- (127\.0\.0\.1:\d+)$", text, re.MULTILINE)
    assert targets == [f"127.0.0.1:{p}" for p in (8001, 8002, 8003, 8004, 9464)]
    assert "metrics_path: /metrics" in text
    shutil.copy(MONITORING / "hal-rules.yml", tmp_path / "hal-rules.yml")
    rules = str(tmp_path / "hal-rules.yml")
    (tmp_path / "prometheus.yml").write_text(text.replace("/etc/prometheus/hal-rules.yml", rules))
    done = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 1 rule files found" in done.stdout
