"""Issue 48 item 5: the real Claude Code CLI connects to HAL with only its URL.

`claude mcp add --transport http hal <url>` then `claude mcp list` says "Needs
authentication" (it met the 401 and read HAL's metadata); `claude mcp login hal
--no-browser` (in a pseudo-terminal: it refuses to run without one) registers itself,
prints the authorization URL and listens on its loopback callback; Playwright logs in
through HAL's login and allows it on the consent page; the CLI says it is authenticated
and `claude mcp list` then connects. `claude mcp logout` revokes the grant at HAL (RFC
7009); signed in again and revoked on the MCP access page, it needs authentication again."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT
from tests.claude_mcp import BINARY, MISSING, mcp_runner, offline_env

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.access(BINARY, os.X_OK),
        reason=MISSING,
    ),
]


class Terminal:
    """A child process on a pseudo-terminal, its output collected by a thread."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, close_fds=True
        )
        os.close(slave)
        self.master = master
        self.output = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk

    def text(self) -> str:
        return self.output.decode(errors="replace")

    def wait_for(self, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text())
            if found:
                return found
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} in: {self.text()[-2000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(WAIT)
        os.close(self.master)


def test_claude_code_signs_in_with_only_the_url(live_asgi, page_factory, operator, tmp_path):
    from hal.models import McpOAuthGrant

    env = offline_env(tmp_path, TERM="dumb")
    claude = mcp_runner(env, tmp_path)

    def status() -> str:
        lines = [line for line in claude("list").splitlines() if line.startswith("hal:")]
        assert len(lines) == 1, lines
        return lines[0]

    base = live_asgi.url
    claude("add", "--transport", "http", "hal", base + "/mcp")
    assert "Needs authentication" in status()

    page = page_factory()

    def sign_in() -> None:
        login = Terminal([BINARY, "mcp", "login", "hal", "--no-browser"], env, tmp_path)
        try:
            found = login.wait_for(re.escape(base) + r"/oauth/authorize\?[^\s\x07\x1b]+")
            page.goto(found.group(0))
            if "/login/" in page.url:  # the first time: HAL's own login first
                page.fill("input[name=username]", operator.username)
                page.fill("input[name=password]", operator.raw_password)
                page.click("button[type=submit]")
            expect(page.locator("#mcp-consent-client")).to_contain_text("Claude Code")
            page.click("#mcp-consent-approve")
            login.wait_for("Authenticated")
            assert login.proc.wait(WAIT) == 0, login.text()[-2000:]
        finally:
            login.close()

    sign_in()
    assert "Connected" in status()

    # `claude mcp logout` revokes the grant at HAL (RFC 7009), not only its local copy.
    first = McpOAuthGrant.objects.get()
    assert first.user == operator and first.revoked_at is None
    claude("logout", "hal")
    first.refresh_from_db()
    assert (first.revoked_at is not None, first.revoked_reason) == (True, "client_revoked")
    assert "Needs authentication" in status()

    # Signed in again, then revoked on the MCP access page.
    sign_in()
    assert "Connected" in status()
    grant = McpOAuthGrant.objects.get(revoked_at__isnull=True)
    page.goto(base + "/mcp-access/")
    page.locator(f"#mcp-grant-{grant.pk} button[type=submit]").click()
    expect(page.locator(f"#mcp-grant-{grant.pk}")).not_to_contain_text("Revoke")
    assert "Needs authentication" in status()
