"""Django for a bench: settings and data dir, users and connections, a daphne process."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.harness.util import ASGI, ROOT, free_port


def setup_django(data_dir: Path) -> dict[str, str]:
    """Configure this process for HAL on DATABASE_URL/REDIS_URL (or SQLite in `data_dir`),
    migrate, and return the environment that daphne children need to share it."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hal.settings")
    os.environ.setdefault("HAL_DATA_DIR", str(data_dir))
    if not os.environ.get("DATABASE_URL"):
        os.environ.setdefault("HAL_SQLITE_PATH", str(data_dir / "bench.sqlite3"))
    os.environ.setdefault("HAL_VAULT_KEY_FILE", str(data_dir / "vault.keys"))
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(32))
    os.environ.setdefault("HAL_LOG_LEVEL", "WARNING")
    os.environ.setdefault("HAL_HEALTH_REQUIRE_WORKER", "0")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    keep = (
        "DJANGO_SETTINGS_MODULE",
        "HAL_DATA_DIR",
        "HAL_SQLITE_PATH",
        "HAL_VAULT_KEY_FILE",
        "HAL_VAULT_KEYS",
        "DJANGO_SECRET_KEY",
        "HAL_LOG_LEVEL",
        "HAL_HEALTH_REQUIRE_WORKER",
        "DATABASE_URL",
        "REDIS_URL",
        "HAL_REDIS_PREFIX",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HAL_", "DJANGO"))}
    env.update({k: os.environ[k] for k in keep if k in os.environ})
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    )
    return env


def create_bench_user(prefix: str = "bench") -> tuple[Any, str]:
    """A superuser with a fresh password (call from a sync context)."""
    from django.contrib.auth import get_user_model

    password = secrets.token_urlsafe(18)
    user = get_user_model().objects.create_superuser(
        f"{prefix}-{secrets.token_hex(3)}", "", password
    )
    return user, password


def create_connections(user: Any, base_url: str, count: int, prefix: str) -> list[Any]:
    """`count` OpenAI-compatible connections to the fake, through the connections action."""
    from hal.actions.base import Actor
    from providers.actions import check_create_connection
    from providers.models import AIConnection

    actor = Actor(user=user, via="api", reauth_at=time.time())
    out = []
    for i in range(count):
        conn = check_create_connection(
            actor=actor,
            data={
                "name": f"{prefix}{i}",
                "provider": "openai_compat",
                "auth_method": "api_key",
                "base_url": base_url,
                "api_key": "sk-bench-" + secrets.token_urlsafe(24),
            },
        )
        AIConnection.objects.filter(pk=conn.pk).update(
            model="bench-model", models=["bench-model"], status="active"
        )
        out.append(conn)
    return out


class Daphne:
    """One daphne process serving hal.asgi on a loopback port."""

    def __init__(self, env: dict[str, str], log_dir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.env = env
        self.log_path = log_dir / f"daphne-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: float = 60) -> Daphne:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), ASGI],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.log_path.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(self.url + "/api/health", timeout=1)
                return self
            except Exception:
                time.sleep(0.2)
        self.kill()  # not left running behind the failed bench
        raise RuntimeError(f"daphne did not start: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """kill -9: no shutdown code runs (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def rss_kib(self) -> int:
        """Resident memory of the process (Linux /proc)."""
        if self.proc is None:
            return 0
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0
