"""The process-wide TTL/LRU cache and the in-process metrics."""

from __future__ import annotations

import math

from webfetch import metrics
from webfetch.cache import FetchCache, shared_cache
from webfetch.pipeline import FetchResult


def ok_result(url: str, **kw) -> FetchResult:
    base = dict(
        url=url,
        final_url=url,
        ok=True,
        status=200,
        content_type="text/html",
        retrieved_at="2026-01-01T00:00:00+00:00",
        bytes_read=10,
        truncated=False,
        trust_tier="web",
        failure_reason=None,
        title="t",
        text="x",
    )
    base.update(kw)
    return FetchResult(**base)


def test_ttl_expiry_and_counters():
    now = [1000.0]
    cache = FetchCache(ttl=300, max_entries=8, clock=lambda: now[0])
    cache.put(ok_result("https://a.example/"))
    assert cache.get("https://a.example/").ok
    now[0] += 299
    assert cache.get("https://a.example/") is not None
    now[0] += 2
    assert cache.get("https://a.example/") is None
    assert cache.stats() == {"hits": 2, "misses": 1, "size": 0, "max_entries": 8, "ttl": 300}


def test_lru_bound():
    cache = FetchCache(ttl=300, max_entries=2)
    for name in ("a", "b"):
        cache.put(ok_result(f"https://{name}.example/"))
    cache.get("https://a.example/")  # a is now most recent
    cache.put(ok_result("https://c.example/"))
    assert cache.get("https://b.example/") is None
    assert cache.get("https://a.example/") is not None
    assert len(cache) == 2


def test_failures_are_never_cached():
    cache = FetchCache(ttl=300, max_entries=8)
    cache.put(ok_result("https://a.example/", ok=False, failure_reason="http_5xx", status=503))
    assert cache.get("https://a.example/") is None
    assert len(cache) == 0


def test_truncated_entry_is_not_served_for_a_larger_budget():
    cache = FetchCache(ttl=300, max_entries=8)
    cache.put(ok_result("https://a.example/", truncated=True), max_bytes=1000)
    assert cache.get("https://a.example/", max_bytes=1000) is not None
    assert cache.get("https://a.example/", max_bytes=500) is not None
    assert cache.get("https://a.example/", max_bytes=5000) is None


def test_shared_cache_is_one_instance():
    assert shared_cache() is shared_cache()


def test_metrics_snapshot():
    metrics.record_fetch(ok_result("https://a.example/x", bytes_read=100))
    metrics.record_fetch(ok_result("https://b.example/y", bytes_read=50))
    metrics.record_fetch(
        ok_result("https://b.example/z", ok=False, failure_reason="timeout", bytes_read=0)
    )
    shared_cache().get("https://nothing.example/")
    snap = metrics.snapshot()
    assert snap["fetches"] == 3
    assert snap["fetch_ok"] == 2
    assert math.isclose(snap["fetch_success_rate"], 2 / 3)
    assert snap["bytes_read"] == 150
    assert snap["failures"] == {"timeout": 1}
    assert snap["cache"]["misses"] == 1
    assert snap["cache_hit_rate"] == 0.0
    # domains a, b, b → H = -(1/3 log2 1/3 + 2/3 log2 2/3)
    assert math.isclose(snap["domain_entropy"], 0.9182958340544896)


def test_domain_entropy_function():
    assert metrics.domain_entropy([]) == 0.0
    assert metrics.domain_entropy(["https://a.x/", "https://a.x/2"]) == 0.0
    assert math.isclose(metrics.domain_entropy(["https://a.x/", "https://b.x/"]), 1.0)
