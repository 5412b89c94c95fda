"""Loopback ports for the servers the tests start.

A port taken from the kernel (bind to port 0, close, hand it to a server that binds it
later) is an ephemeral port: until the server binds it, any other socket of the machine
may be given the same one — with four workers starting daphnes, identity providers,
Alertmanagers and ops hosts, a ship test's service found its port answered by another
test's server (HTTP 404) and exited. These come from below the kernel's ephemeral range
(never handed out for port 0) in a slice of their own per pytest-xdist worker, and a
process never hands out the same port twice.
"""

from __future__ import annotations

import os
import random
import socket

SLICE = 1500  # ports per worker
BASE = 20000  # up to 20000 + 8 × 1500 = 32000, below Linux's default ephemeral 32768
_given: set[int] = set()


def _worker_index() -> int:
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    digits = name[2:] if name.startswith("gw") else ""
    return int(digits) % 8 if digits.isdigit() else 0


def free_port() -> int:
    """A loopback TCP port free now, in this worker's slice, not handed out before."""
    low = BASE + _worker_index() * SLICE
    for _ in range(500):
        port = random.randrange(low, low + SLICE)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port in {low}–{low + SLICE}")
