"""The installer's refusals, exit statuses and its two output streams."""

from __future__ import annotations

import sys

EXIT_FAILED = 1  # nothing switched; current release untouched
EXIT_NO_ROLLBACK = 2  # failed after the switch and there was no previous release
EXIT_ROLLED_BACK = 3  # failed after the switch; the previous release is current and healthy
EXIT_ROLLBACK_UNHEALTHY = 4  # rolled back, but the previous release does not answer either
EXIT_WRONG_PYTHON = 5  # refused, nothing touched: the wheelhouse is for another Python version


class InstallError(Exception):
    """A refusal or failure; the message is printed and the install stops."""

    code = ""  # a stable tag printed with the message, for scripts: `error [<code>]: …`
    status = EXIT_FAILED


class WrongPython(InstallError):
    """The artifact's wheelhouse was resolved for another Python full version."""

    code = "python-mismatch"
    status = EXIT_WRONG_PYTHON


def say(message: str) -> None:
    """Progress on stdout (flushed: the operator watches it live)."""
    print(f"install: {message}", flush=True)


def shout(message: str) -> None:
    """A failure or rollback report on stderr."""
    print(f"install: {message}", file=sys.stderr, flush=True)
