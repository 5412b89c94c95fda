"""Process-wide TTL + LRU cache of successful fetch results (failures are never cached)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    from webfetch.result import FetchResult

DEFAULT_TTL = 300.0
DEFAULT_MAX_ENTRIES = 256


def cache_key(url: str) -> str:
    """Fragments never reach the server, so they do not make a different page."""
    return url.strip().split("#", 1)[0]


class FetchCache:
    """URL → (result, stored_at, max_bytes) with a TTL and a bounded LRU; thread-safe."""

    def __init__(
        self,
        ttl: float = DEFAULT_TTL,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._data: OrderedDict[str, tuple[FetchResult, float, int | None]] = OrderedDict()
        # A threading lock (not asyncio): callers live on different event loops and threads.
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def get(self, url: str, *, max_bytes: int | None = None) -> FetchResult | None:
        key = cache_key(url)
        with self._lock:
            entry = self._data.get(key)
            if entry is not None:
                result, stored_at, stored_max = entry
                expired = self._clock() - stored_at >= self.ttl
                # A page cut at a smaller budget is not an answer for a bigger one.
                too_small = (
                    result.truncated
                    and max_bytes is not None
                    and stored_max is not None
                    and max_bytes > stored_max
                )
                if expired:
                    del self._data[key]
                elif not too_small:
                    self._data.move_to_end(key)
                    self.hits += 1
                    return result
            self.misses += 1
            return None

    def put(self, result: FetchResult, *, max_bytes: int | None = None) -> None:
        if not result.ok:
            return
        key = cache_key(result.url)
        with self._lock:
            self._data[key] = (result, self._clock(), max_bytes)
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = 0
            self.misses = 0

    def stats(self) -> dict[str, float | int]:
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "size": len(self._data),
                "max_entries": self.max_entries,
                "ttl": self.ttl,
            }


_shared: FetchCache | None = None
_shared_lock = threading.Lock()


def shared_cache() -> FetchCache:
    """The one cache every caller (pre-fetch in any room, tools, search) shares."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = FetchCache(
                ttl=float(getattr(settings, "HAL_WEBFETCH_CACHE_TTL", DEFAULT_TTL)),
                max_entries=int(getattr(settings, "HAL_WEBFETCH_CACHE_SIZE", DEFAULT_MAX_ENTRIES)),
            )
        return _shared
