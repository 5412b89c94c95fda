"""A fake `claude` executable: prints the CLI's `--output-format json` result, records its call."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

_SCRIPT = """#!{python}
# Fake Claude Code CLI written by tests/fakes/claude_cli.py. It records how HAL ran it.
import json, os, sys, time
HERE = {here!r}
behaviour = json.load(open(os.path.join(HERE, "behaviour.json")))
stdin = sys.stdin.read()
def exec_environment():
    # Python itself may add LC_CTYPE (PEP 538); /proc shows the environment HAL passed.
    try:
        raw = open("/proc/self/environ", "rb").read().split(b"\\0")
        return dict(item.decode().split("=", 1) for item in raw if b"=" in item)
    except OSError:
        return dict(os.environ)
calls = sorted(p for p in os.listdir(HERE) if p.startswith("call-"))
record = {{
    "argv": sys.argv[1:],
    "env": exec_environment(),
    "cwd": os.getcwd(),
    "cwd_entries": sorted(os.listdir(os.getcwd())),
    "stdin": stdin,
    "pid": os.getpid(),
}}
args = sys.argv[1:]
if "--mcp-config" in args:
    value = args[args.index("--mcp-config") + 1]
    if os.path.isfile(value):
        record["mcp_config_file"] = value
        record["mcp_config_mode"] = oct(os.stat(value).st_mode & 0o777)
        record["mcp_config"] = json.load(open(value))
    else:
        record["mcp_config"] = json.loads(value)
with open(os.path.join(HERE, "call-%04d.json" % len(calls)), "w") as fh:
    json.dump(record, fh)
if "--version" in sys.argv[1:]:
    print("2.1.0 (Claude Code)")
    sys.exit(0)
time.sleep(behaviour.get("sleep", 0))
if behaviour.get("raw_stdout") is not None:
    sys.stdout.write(behaviour["raw_stdout"])
else:
    print(json.dumps({{
        "type": "result",
        "subtype": behaviour.get("subtype", "success"),
        "is_error": behaviour.get("is_error", False),
        "duration_ms": 1234,
        "duration_api_ms": 1100,
        "num_turns": 1,
        "result": behaviour.get("result", ""),
        "session_id": "00000000-0000-4000-8000-000000000000",
        "total_cost_usd": 0.0012,
        "usage": behaviour.get("usage", {{}}),
    }}))
if behaviour.get("stderr"):
    sys.stderr.write(behaviour["stderr"])
sys.exit(behaviour.get("exit_code", 0))
"""


class FakeClaudeCLI:
    """Owns a directory holding the `claude` script, its behaviour file and call records."""

    def __init__(self, directory: Path) -> None:
        self.bin_dir = directory
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.bin_dir / "claude"
        self.path.write_text(_SCRIPT.format(python=sys.executable, here=str(self.bin_dir)))
        self.path.chmod(self.path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.script(result="Hello from the fake CLI.")

    def script(
        self,
        *,
        result: str = "Hello from the fake CLI.",
        is_error: bool = False,
        subtype: str = "success",
        sleep: float = 0,
        exit_code: int = 0,
        raw_stdout: str | None = None,
        stderr: str = "",
        usage: dict[str, int] | None = None,
    ) -> None:
        """Set what the next runs print."""
        behaviour: dict[str, Any] = {
            "result": result,
            "is_error": is_error,
            "subtype": subtype,
            "sleep": sleep,
            "exit_code": exit_code,
            "raw_stdout": raw_stdout,
            "stderr": stderr,
            "usage": usage
            if usage is not None
            else {
                "input_tokens": 21,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 9,
            },
        }
        (self.bin_dir / "behaviour.json").write_text(json.dumps(behaviour))

    @property
    def calls(self) -> list[dict[str, Any]]:
        """Every recorded run, oldest first."""
        return [json.loads(p.read_text()) for p in sorted(self.bin_dir.glob("call-*.json"))]

    def path_with_fake_first(self) -> str:
        return str(self.bin_dir) + os.pathsep + os.environ.get("PATH", os.defpath)
