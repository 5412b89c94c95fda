"""Periodic work of the apps above hal, run by `hal_worker` without hal importing them.

An app registers in its `AppConfig.ready()`: a *sweep* `fn(actor)` runs on the worker's
heartbeat thread every `SWEEP_EVERY_SECONDS` after hal's own sweeps; a *loop*
`fn(stop_event)` gets a thread of its own for the worker's life (for work that may block
on a provider and must never delay a heartbeat).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Sweep = Callable[[Any], object]
Loop = Callable[[Any], object]

_SWEEPS: dict[str, Sweep] = {}
_LOOPS: dict[str, Loop] = {}


def register_sweep(name: str, fn: Sweep) -> None:
    """Add (or replace) the sweep `name`; sweeps run in registration order."""
    _SWEEPS[name] = fn


def register_loop(name: str, fn: Loop) -> None:
    """Add (or replace) the loop `name`, started in its own thread by the worker."""
    _LOOPS[name] = fn


def sweeps() -> list[tuple[str, Sweep]]:
    """The registered sweeps, in order."""
    return list(_SWEEPS.items())


def loops() -> list[tuple[str, Loop]]:
    """The registered loops, in order."""
    return list(_LOOPS.items())


def sweep_names() -> list[str]:
    return list(_SWEEPS)


def loop_names() -> list[str]:
    return list(_LOOPS)
