"""Investigation fixtures: the chat rooms' fake-backed models, a failing health endpoint,
the investigator setting, and the fake model's fixed investigation script."""

from __future__ import annotations

import http.server
import threading
import time

import pytest

from tests.chatrooms.conftest import *  # noqa: F403
from tests.fakes.script import Reply, ScriptedToolCall


def change_setting(user, name: str, value) -> None:
    """Change a setting through the settings action (audited, with history)."""
    from hal.actions.base import Actor
    from hal.actions.settings import do_change_setting, get_definition

    actor = Actor(user=user, via="api", reauth_at=time.time())
    do_change_setting(actor, get_definition(name), value, reason="test")


@pytest.fixture
def investigator(models, operator):
    """alpha (the Anthropic fake) takes the first look at every incident."""
    change_setting(operator, "ai.incident_investigator", str(models[0].id))
    return models[0]


class FailingHealth:
    """A loopback health endpoint that answers 503 (a module that fails its check)."""

    def __init__(self, status: int = 503) -> None:
        self.hits: list[str] = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                site.hits.append(self.path)
                self.send_response(status)
                self.send_header("Content-Length", "4")
                self.end_headers()
                self.wfile.write(b"down")

            def log_message(self, *args):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/health"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def failing_health():
    site = FailingHealth()
    yield site
    site.close()


def fail_health_check(operator, module: str, url: str):
    """Configure `module`'s health URL (the admin's high-risk step) and run its check from
    HAL: the endpoint fails, so the job fails."""
    from hal.actions import jobs, releases
    from tests.fleet.conftest import configure_module, make_actor

    op = make_actor(operator)
    configure_module(op, module, health_check_url=url)
    job = releases.check_module_health(actor=op, module=module)
    jobs.run_hal_job.call(job.pk)
    job.refresh_from_db()
    return job


def script_investigation(fake, module: str = "portal") -> None:
    """The fixed investigation: two rounds of reads, then the findings with one next step."""
    fake.replies.push(
        Reply(
            text="Looking at health and recent jobs.",
            tool_calls=[
                ScriptedToolCall("get_health", {}, id="toolu_inv_health"),
                ScriptedToolCall("list_jobs", {"module": module}, id="toolu_inv_jobs"),
            ],
        ),
        Reply(
            text="",
            tool_calls=[ScriptedToolCall("search_audit", {}, id="toolu_inv_audit")],
        ),
        Reply(
            text="Findings ready.",
            tool_calls=[
                ScriptedToolCall(
                    "submit_findings",
                    {
                        "checked": [
                            {
                                "claim": f"The health check of {module} failed with HTTP 503.",
                                "evidence": ["toolu_inv_jobs"],
                            },
                            {"claim": "HAL itself is healthy.", "evidence": ["toolu_inv_health"]},
                            {"claim": "Nobody changed it today.", "evidence": ["made_up"]},
                        ],
                        "likely_cause": f"{module} is down on its host.",
                        "next_steps": [
                            {
                                "tool": "check_module_health",
                                "arguments": {"module": module},
                                "why": "confirm it is still failing",
                            }
                        ],
                    },
                    id="toolu_inv_submit",
                )
            ],
        ),
    )
