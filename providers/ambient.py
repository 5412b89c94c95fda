"""The official SDKs' environment settings HAL takes out of its own process at start."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("hal.providers")

# What the OpenAI and Anthropic SDKs read from the environment on every client they build
# (a call's per-call copy included) and send to whatever endpoint the client talks to:
# identity headers (OPENAI_ORG_ID, OPENAI_PROJECT_ID) and extra headers, one "Name: value"
# per line (*_CUSTOM_HEADERS). An `Authorization` line there even replaced a connection's
# vault key on the OpenAI SDK. HAL passes each connection's credential and base URL
# explicitly, which stops the SDKs reading those variables; these have no such switch, and
# a request must carry what its connection configured, whatever the host's shell exports.
SDK_AMBIENT = (
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_CUSTOM_HEADERS",
    "ANTHROPIC_CUSTOM_HEADERS",
)


def seal_sdk_environment() -> list[str]:
    """Remove SDK_AMBIENT from the process environment; returns (and logs) the names it
    removed, never their values. Called once at start (providers' AppConfig.ready), before
    any thread runs: the local Claude Code CLI gets an environment of its own anyway
    (providers/cli_sandbox.py)."""
    removed = [name for name in SDK_AMBIENT if os.environ.pop(name, None) is not None]
    if removed:
        log.warning(
            "ignored %s from the environment: a connection's requests carry only what the "
            "connection configures",
            ", ".join(removed),
        )
    return removed
