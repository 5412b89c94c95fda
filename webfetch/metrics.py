"""In-process fetch metrics: success rate, bytes, cache hit rate, domain entropy."""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from prometheus_client import Counter as PromCounter

from hal.observe import families

if TYPE_CHECKING:
    from webfetch.result import FetchResult

# Why a fetch failed (webfetch/pipeline.py): a fixed set, also the metrics' labels.
FAILURE_REASONS = (
    "robots",
    "content_type",
    "timeout",
    "http_4xx",
    "http_5xx",
    "blocked_address",
    "too_many_redirects",
    "redirect_blocked",
    "network",
    "invalid_url",
)

# HAL observed (/metrics, issue 47): network fetches by outcome ("ok" or a failure reason).
fetch_outcomes = PromCounter(
    "hal_webfetch_fetches",
    "Web fetches over the network (cache hits not included), by outcome: ok or why it failed.",
    ["outcome"],
)

_lock = threading.Lock()
_fetches = 0
_ok = 0
_bytes = 0
_truncated = 0
_failures: Counter[str] = Counter()
_domains: Counter[str] = Counter()
_searches = 0
_last_search_entropy = 0.0


def _domain(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def shannon_entropy(labels: Iterable[str]) -> float:
    """Shannon entropy in bits of a multiset of labels (0 for empty or uniform)."""
    counts = Counter(labels)
    total = sum(counts.values())
    if total == 0:
        return 0.0
    h = -sum((n / total) * math.log2(n / total) for n in counts.values())
    return h if h > 0 else 0.0


def domain_entropy(urls: Iterable[str]) -> float:
    """Entropy of the host names of `urls` — low means the results all come from one site."""
    return shannon_entropy(d for d in (_domain(u) for u in urls) if d)


def record_fetch(result: FetchResult) -> None:
    """Count one network fetch outcome (cache hits are counted by the cache, not here)."""
    global _fetches, _ok, _bytes, _truncated
    with _lock:
        _fetches += 1
        _bytes += result.bytes_read
        if result.ok:
            _ok += 1
            _truncated += int(result.truncated)
        else:
            _failures[result.failure_reason or "unknown"] += 1
        dom = _domain(result.url)
        if dom:
            _domains[dom] += 1
    reason = result.failure_reason if result.failure_reason in FAILURE_REASONS else "other"
    if families.ON:
        fetch_outcomes.labels("ok" if result.ok else reason).inc()


def record_search(entropy: float) -> None:
    """Remember the domain entropy of the latest search's results."""
    global _searches, _last_search_entropy
    with _lock:
        _searches += 1
        _last_search_entropy = entropy


def reset() -> None:
    global _fetches, _ok, _bytes, _truncated, _searches, _last_search_entropy
    with _lock:
        _fetches = _ok = _bytes = _truncated = _searches = 0
        _last_search_entropy = 0.0
        _failures.clear()
        _domains.clear()


def snapshot() -> dict[str, Any]:
    """Everything a metrics page or a read tool shows, as plain JSON-able values."""
    from webfetch.cache import shared_cache

    cache = shared_cache().stats()
    lookups = cache["hits"] + cache["misses"]
    with _lock:
        return {
            "fetches": _fetches,
            "fetch_ok": _ok,
            "fetch_success_rate": (_ok / _fetches) if _fetches else 0.0,
            "bytes_read": _bytes,
            "truncated": _truncated,
            "failures": dict(_failures),
            "domains": len(_domains),
            "domain_entropy": shannon_entropy(_domains.elements()),
            "searches": _searches,
            "last_search_domain_entropy": _last_search_entropy,
            "cache": cache,
            "cache_hit_rate": (cache["hits"] / lookups) if lookups else 0.0,
        }
