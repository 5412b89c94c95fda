"""Scrape-time metrics read from the database: each app registers its source from its
`AppConfig.ready()` (as worker sweeps are registered, hal/hooks/workers.py).

Every process serves them (§6 layout: each web process is its own scrape target), so
Prometheus sees the same value from each: the shipped rules and dashboard aggregate with
`max without (instance)` (docs/adr/0023). A source that fails is logged and skipped — a
scrape never fails because one table could not be read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import REGISTRY, Collector

log = logging.getLogger("hal.observe")

Source = Callable[[], Iterable[Metric]]
_sources: dict[str, Source] = {}


def register(name: str, source: Source) -> None:
    """Add (or replace, on a second `ready()`) the scrape-time source called `name`."""
    _sources[name] = source


class DatabaseSources(Collector):
    """Calls every registered source at scrape time (in the view's thread: it may query)."""

    def collect(self) -> Iterator[Metric]:
        for name, source in list(_sources.items()):
            try:
                yield from source()
            except Exception:
                log.exception("metrics source %s failed", name)

    def describe(self) -> list[Metric]:
        return []  # unchecked: registering must not query the database


_collector = DatabaseSources()
REGISTRY.register(_collector)
