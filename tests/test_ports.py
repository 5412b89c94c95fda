"""tests/ports.py: ports outside the kernel's ephemeral range, one slice per worker."""

from __future__ import annotations

import socket

from tests import ports


def ephemeral_low() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return int(f.read().split()[0])


def test_ports_are_free_below_the_ephemeral_range_and_never_given_twice(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    given = [ports.free_port() for _ in range(50)]
    assert len(set(given)) == 50
    low = ports.BASE + 3 * ports.SLICE
    assert all(low <= p < low + ports.SLICE for p in given)
    assert max(given) < ephemeral_low()
    with socket.socket() as s:
        s.bind(("127.0.0.1", given[0]))  # free when handed out


def test_each_worker_has_its_own_slice(monkeypatch):
    slices = set()
    for n in range(8):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{n}")
        slices.add((ports.free_port() - ports.BASE) // ports.SLICE)
    assert slices == set(range(8))
