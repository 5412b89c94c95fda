"""A fake `claude` executable: prints the CLI's stream-json events, records how HAL ran it."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

_SCRIPT = """#!{python}
# Fake Claude Code CLI written by tests/fakes/claude_cli.py. It records how HAL ran it.
import json, os, re, sys, time
HERE = {here!r}
behaviour = json.load(open(os.path.join(HERE, "behaviour.json")))
stdin = "" if "auth" in sys.argv[1:2] or "--version" in sys.argv else sys.stdin.read()
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
if os.path.isdir("attachments"):  # files HAL put in the run's private folder
    record["attachments"] = {{
        name: {{"mode": oct(os.stat(os.path.join("attachments", name)).st_mode & 0o777),
                "text": open(os.path.join("attachments", name), encoding="utf-8").read()}}
        for name in sorted(os.listdir("attachments"))
    }}
args = sys.argv[1:]
if "--mcp-config" in args:
    value = args[args.index("--mcp-config") + 1]
    if os.path.isfile(value):
        record["mcp_config_file"] = value
        record["mcp_config_mode"] = oct(os.stat(value).st_mode & 0o777)
        record["mcp_config"] = json.load(open(value))
        for server in record["mcp_config"]["mcpServers"].values():
            if server.get("type") == "http":  # a room turn: HAL's /mcp, no process
                continue
            env_file = server["args"][2]
            record["mcp_env_mode"] = oct(os.stat(env_file).st_mode & 0o777)
            record["mcp_env"] = json.load(open(env_file))
    else:
        record["mcp_config"] = json.loads(value)
for flag, key in (("--system-prompt-file", "system_prompt"), ("--settings", "settings")):
    if flag in args:
        value = args[args.index(flag) + 1]
        if os.path.isfile(value):
            record[key + "_mode"] = oct(os.stat(value).st_mode & 0o777)
            record[key] = open(value).read()
with open(os.path.join(HERE, "call-%04d.json" % len(calls)), "w") as fh:
    json.dump(record, fh)
if "--version" in args:
    print(behaviour.get("version", "0.0.0") + " (Claude Code)")
    sys.exit(0)
if args[:2] == ["auth", "status"]:
    logged_in = behaviour.get("logged_in", True)
    print(json.dumps({{"loggedIn": logged_in, "authMethod": "claude.ai" if logged_in else "none"}}))
    sys.exit(0 if logged_in else 1)
sid = args[args.index("--session-id") + 1] if "--session-id" in args else "0000"
def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\\n")
    sys.stdout.flush()
def api(event):
    emit({{"type": "stream_event", "event": event, "session_id": sid, "parent_tool_use_id": None}})
time.sleep(behaviour.get("sleep", 0))
if behaviour.get("raw_stdout") is not None:
    sys.stdout.write(behaviour["raw_stdout"])
    sys.stdout.flush()
    time.sleep(behaviour.get("after_raw_sleep", 0))
else:
    init = {{"type": "system", "subtype": "init", "session_id": sid}}
    init["tools"] = behaviour["init_tools"]
    if behaviour.get("init_mcp_servers") is not None:
        init["mcp_servers"] = behaviour["init_mcp_servers"]
    if behaviour.get("init_key_source") is not None:
        init["apiKeySource"] = behaviour["init_key_source"]
    emit(init)
    text = behaviour.get("result", "")
    if not behaviour.get("is_error"):
        for name, arguments in behaviour.get("tool_uses", []):
            api({{"type": "message_start", "message": {{"usage": {{"input_tokens": 1}}}}}})
            block = {{"type": "tool_use", "id": "toolu_1", "name": name, "input": {{}}}}
            api({{"type": "content_block_start", "index": 0, "content_block": block}})
            api({{"type": "content_block_delta", "index": 0,
                 "delta": {{"type": "input_json_delta", "partial_json": json.dumps(arguments)}}}})
            api({{"type": "content_block_stop", "index": 0}})
            api({{"type": "message_stop"}})
        api({{"type": "message_start", "message": {{"usage": {{"input_tokens": 1}}}}}})
        block = {{"type": "text", "text": ""}}
        api({{"type": "content_block_start", "index": 0, "content_block": block}})
        for n, chunk in enumerate(re.findall(r"\\S+\\s*|\\s+", text)):
            delta = {{"type": "text_delta", "text": chunk}}
            api({{"type": "content_block_delta", "index": 0, "delta": delta}})
            if n == 0:
                time.sleep(behaviour.get("stall", 0))
            time.sleep(behaviour.get("token_delay", 0))
        api({{"type": "content_block_stop", "index": 0}})
        api({{"type": "message_stop"}})
    result = {{
        "type": "result",
        "subtype": behaviour.get("subtype", "success"),
        "is_error": behaviour.get("is_error", False),
        "duration_ms": 1234,
        "num_turns": 1,
        "result": text,
        "session_id": sid,
        "total_cost_usd": 0.0012,
        "usage": behaviour.get("usage", {{}}),
    }}
    if behaviour.get("api_error_status") is not None:
        result["api_error_status"] = behaviour["api_error_status"]
        result["api_error_type"] = behaviour.get("api_error_type")
    if not behaviour.get("no_result"):
        emit(result)
if behaviour.get("stderr"):
    sys.stderr.write(behaviour["stderr"])
sys.exit(behaviour.get("exit_code", 0))
"""


def _pinned() -> str:
    root = Path(__file__).resolve().parents[2]
    return (root / "deploy" / "claude-code.version").read_text().strip()


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
        token_delay: float = 0,
        stall: float = 0,
        exit_code: int = 0,
        raw_stdout: str | None = None,
        after_raw_sleep: float = 0,
        stderr: str = "",
        usage: dict[str, int] | None = None,
        api_error_status: int | None = None,
        api_error_type: str | None = None,
        logged_in: bool = True,
        tool_uses: list[tuple[str, dict[str, Any]]] | None = None,
        no_result: bool = False,
        version: str | None = None,
        init_tools: list[str] | None = None,
        init_mcp_servers: list[dict[str, Any]] | None = None,
        init_key_source: str | None = None,
    ) -> None:
        """Set what the next runs print (stream-json events, as the real CLI does)."""
        behaviour: dict[str, Any] = {
            "result": result,
            "is_error": is_error,
            "subtype": subtype,
            "sleep": sleep,
            "token_delay": token_delay,
            "stall": stall,
            "exit_code": exit_code,
            "raw_stdout": raw_stdout,
            "after_raw_sleep": after_raw_sleep,
            "stderr": stderr,
            "api_error_status": api_error_status,
            "api_error_type": api_error_type,
            "logged_in": logged_in,
            "tool_uses": list(tool_uses or []),
            "no_result": no_result,
            # `claude --version` (default: the pinned version HAL requires at least)
            "version": version or _pinned(),
            "init_tools": list(init_tools or []),
            "init_mcp_servers": init_mcp_servers,
            # the init event's `apiKeySource` (the real CLI: "ANTHROPIC_API_KEY", "none", …)
            "init_key_source": init_key_source,
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
