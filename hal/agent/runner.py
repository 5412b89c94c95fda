"""The agent's client and loop: enrol, heartbeat with psutil metrics, claim and run jobs."""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from hal.agent import AGENT_VERSION, ops

log = logging.getLogger("hal.agent")


class AgentError(Exception):
    """HAL answered with an error (status and code kept for the caller)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code


class HalClient:
    """A tiny JSON client for /api/agent/ (bearer token, timeouts, no redirects to follow)."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _request(self, method: str, path: str, body: dict | None = None) -> urllib.request.Request:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json", "User-Agent": f"hal-agent/{AGENT_VERSION}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return urllib.request.Request(  # noqa: S310 — the operator-given HAL URL
            self.base_url + path, data=data, method=method, headers=headers
        )

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        """One JSON request; an HTTP error becomes AgentError(status, code)."""
        try:
            with urllib.request.urlopen(  # noqa: S310
                self._request(method, path, body), timeout=self.timeout
            ) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            try:
                err = json.loads(exc.read() or b"{}").get("error", {})
            except ValueError:
                err = {}
            raise AgentError(
                exc.code, err.get("code", "http_error"), err.get("message", "")
            ) from None
        return json.loads(raw or b"{}")

    def download(self, path: str, dest: Path) -> int:
        """Stream a file to dest; return its size."""
        size = 0
        try:
            with (
                urllib.request.urlopen(  # noqa: S310
                    self._request("GET", path), timeout=self.timeout
                ) as resp,
                open(dest, "wb") as out,
            ):
                while chunk := resp.read(ops.CHUNK):
                    size += len(chunk)
                    out.write(chunk)
        except urllib.error.HTTPError as exc:
            try:
                err = json.loads(exc.read() or b"{}").get("error", {})
            except ValueError:
                err = {}
            raise ops.OpError(err.get("code", "download_failed"), err.get("message", "")) from None
        return size


def collect_metrics(root: Path | str = "/") -> dict:
    """cpu, memory, disk (of the agent root's filesystem), load and uptime from psutil."""
    memory = psutil.virtual_memory()
    disk = psutil.disk_usage(str(root) if Path(root).exists() else "/")
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cpu_percent": float(psutil.cpu_percent(interval=None)),
        "memory_percent": float(memory.percent),
        "memory_used": int(memory.used),
        "memory_total": int(memory.total),
        "disk_percent": float(disk.percent),
        "disk_used": int(disk.used),
        "disk_total": int(disk.total),
        "load1": float(load[0]),
        "load5": float(load[1]),
        "load15": float(load[2]),
        "uptime_seconds": int(max(0, time.time() - psutil.boot_time())),
    }


def facts() -> dict:
    return {
        "os": platform.system(),
        "release": platform.release(),
        "python": platform.python_version(),
        "cpus": os.cpu_count() or 0,
    }


def enrol(client: HalClient, enrolment_token: str, hostname: str, token_file: Path) -> dict:
    """Trade the one-time enrolment token for this agent's own token (written 0600)."""
    answer = client.call(
        "POST",
        "/api/agent/enrol",
        {
            "enrolment_token": enrolment_token,
            "hostname": hostname,
            "agent_version": AGENT_VERSION,
            "facts": facts(),
        },
    )
    write_token(token_file, answer["agent_token"])
    client.token = answer["agent_token"]
    return answer["server"]


def write_token(path: Path, token: str) -> None:
    """Write a secret file readable by its owner only."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.chmod(path, 0o600)


def send_heartbeat(client: HalClient, root: Path) -> dict:
    return client.call(
        "POST",
        "/api/agent/heartbeat",
        {"agent_version": AGENT_VERSION, "metrics": collect_metrics(root)},
    )


def run_job(client: HalClient, root: Path, job: dict) -> dict:
    """Run one claimed job and report its outcome to HAL; returns the finish answer."""
    job_id = int(job["id"])
    base = f"/api/agent/jobs/{job_id}"
    buffered: list[dict] = []

    def log_line(level: str, text: str) -> None:
        buffered.append({"level": level, "text": str(text)[:2000]})
        flush()

    def flush() -> bool:
        nonlocal buffered
        if not buffered:
            return False
        lines, buffered = buffered, []
        try:
            answer = client.call("POST", base + "/log", {"lines": lines})
        except AgentError as exc:
            if exc.status == 409:  # HAL already closed the job (e.g. refused the artifact)
                return True
            raise
        return bool(answer.get("stop_requested"))

    def should_stop() -> bool:
        return bool(client.call("POST", base + "/lease", {}).get("stop_requested"))

    kind = job.get("kind")
    status, result, code, message = "succeeded", {}, "", ""
    try:
        if kind == "deploy":
            result = ops.deploy(
                root,
                job["module"],
                job["version"],
                job["sha256"],
                download=lambda dest: client.download(job["artifact_url"], dest),
                log=log_line,
                should_stop=should_stop,
            )
        elif kind == "rollback":
            result = ops.rollback(root, job["module"], job["to_version"], log=log_line)
        elif kind == "health_check":
            log_line("info", f"GET {job.get('url')}")
            result = ops.health_check(job.get("url", ""))
            log_line("info", f"status {result.get('status_code')} in {result['latency_ms']} ms")
            if not result["healthy"]:
                status, code = "failed", "unhealthy"
                message = result.get("error") or f"HTTP {result.get('status_code')}"
        elif kind == "restart":
            digest = str(job.get("argv_sha256") or "")
            log_line("info", f"running the bound restart command (argv sha256 {digest[:12]}…)")
            result = ops.restart(job.get("argv"), job.get("argv_sha256"))
            if result["returncode"] != 0:
                status, code = "failed", "command_failed"
                message = f"exit status {result['returncode']}"
        else:
            raise ops.OpError("unsupported_kind", f"this agent does not run {kind!r} jobs")
    except ops.OpError as exc:
        status = "stopped" if exc.code == "stopped" else "failed"
        code, message = ("" if exc.code == "stopped" else exc.code), exc.message
        log_line("error" if status == "failed" else "warning", exc.message)
    except Exception as exc:  # report, never die with a job half-reported
        status, code, message = "failed", "agent_error", f"{type(exc).__name__}: {exc}"[:500]
        log.exception("job %s failed", job_id)
    flush()
    try:
        return client.call(
            "POST",
            base + "/finish",
            {"status": status, "result": result, "error_code": code, "message": message},
        )
    except AgentError as exc:
        if exc.status == 409:
            log.warning("job %s was already closed by HAL: %s", job_id, exc)
            return {"job": None, "closed_by_hal": True}
        raise


def run_once(client: HalClient, root: Path) -> dict:
    """One cycle: heartbeat, then claim and run jobs until none is left."""
    beat = send_heartbeat(client, root)
    ran = 0
    while beat.get("server_status") in ("active", "maintenance", "unreachable"):
        job = client.call("POST", "/api/agent/jobs/claim", {}).get("job")
        if not job:
            break
        run_job(client, root, job)
        ran += 1
    return {"heartbeat": beat, "jobs": ran}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hal.agent", description=__doc__)
    parser.add_argument("--hal", required=True, help="HAL base URL, e.g. https://hal.example")
    parser.add_argument("--token-file", required=True, type=Path)
    parser.add_argument("--enrol-token", default=os.environ.get("HAL_ENROL_TOKEN", ""))
    parser.add_argument("--root", type=Path, default=Path("/srv/hal-agent"))
    parser.add_argument("--interval", type=float, default=15.0)
    parser.add_argument("--hostname", default=socket.getfqdn().lower())
    parser.add_argument("--once", action="store_true", help="one cycle, then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args.root.mkdir(parents=True, exist_ok=True)
    client = HalClient(args.hal)
    if args.token_file.exists():
        client.token = args.token_file.read_text().strip()
    elif args.enrol_token:
        server = enrol(client, args.enrol_token, args.hostname, args.token_file)
        log.info("enrolled as %s (%s); waiting for approval", server["hostname"], server["status"])
    else:
        parser.error("no token file yet: pass --enrol-token (one-time token from HAL)")
    psutil.cpu_percent(interval=None)  # prime the CPU counter
    while True:
        try:
            outcome = run_once(client, args.root)
            interval = float(outcome["heartbeat"].get("interval") or args.interval)
        except AgentError as exc:
            if exc.status == 401:
                log.error("HAL refused this agent's token (revoked?); stopping")
                return 2
            log.warning("HAL error: %s", exc)
            interval = args.interval
        except (urllib.error.URLError, OSError) as exc:
            log.warning("HAL unreachable: %s", exc)
            interval = args.interval
        if args.once:
            return 0
        time.sleep(min(args.interval, interval) if args.interval else interval)


if __name__ == "__main__":
    sys.exit(main())
