"""A web process's entry point: daphne, on uvloop's event loop (ADR 0029).

`python -m hal.web.serve` takes daphne's own arguments (`-b`, `-p`, the application) and
runs daphne's own command line. The only difference is the loop: daphne makes its loop
when `daphne.server` is imported, so the policy is set here first. Per token streamed,
the loop's work on each socket read was a third of a web process's CPU (py-spy,
docs/performance.md); uvloop does that work in C. `HAL_EVENT_LOOP=asyncio` keeps the
standard library's loop (a host without the wheel, or to compare).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping

LOOPS = ("uvloop", "asyncio")


def choose_loop(environ: Mapping[str, str] = os.environ) -> str:
    """The event loop named by HAL_EVENT_LOOP (uvloop unless it says asyncio)."""
    name = (environ.get("HAL_EVENT_LOOP") or "uvloop").strip().lower()
    if name not in LOOPS:
        raise SystemExit(f"HAL_EVENT_LOOP={name!r}: expected one of {', '.join(LOOPS)}")
    return name


def install_loop() -> str:
    """Set the event loop policy HAL_EVENT_LOOP names, before daphne makes its loop; which."""
    name = choose_loop()
    if name == "uvloop":
        import uvloop

        wanted: type[asyncio.AbstractEventLoopPolicy] = uvloop.EventLoopPolicy
    else:
        wanted = asyncio.DefaultEventLoopPolicy
    if not isinstance(asyncio.get_event_loop_policy(), wanted):
        if "daphne.server" in sys.modules:
            # Too late: daphne made its loop when that module was imported.
            raise SystemExit("hal.web.serve: daphne.server was imported before the loop was set")
        asyncio.set_event_loop_policy(wanted())
    return name


def main(argv: list[str] | None = None) -> None:
    """Set the event loop policy, then run daphne's command line with `argv`."""
    install_loop()
    from daphne.cli import CommandLineInterface  # type: ignore[import-untyped]

    CommandLineInterface().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
