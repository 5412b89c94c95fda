"""Web-fetch outcomes in the metrics (issue 47): by "ok" or the failure's fixed reason,
never the URL or its host."""

from __future__ import annotations

from webfetch import metrics
from webfetch.result import FetchResult

from .conftest import sample


def result(ok: bool, reason: str | None) -> FetchResult:
    return FetchResult(
        url="https://user-input.example.test/page?id=4711",
        final_url="https://user-input.example.test/page?id=4711",
        ok=ok,
        status=200 if ok else None,
        content_type="text/html",
        retrieved_at="2026-12-06T09:00:00Z",
        bytes_read=10,
        truncated=False,
        trust_tier="web",
        failure_reason=reason,
    )


def test_outcomes_counted_by_fixed_reason():
    ok = sample("hal_webfetch_fetches_total", outcome="ok")
    timeout = sample("hal_webfetch_fetches_total", outcome="timeout")
    other = sample("hal_webfetch_fetches_total", outcome="other")
    metrics.record_fetch(result(True, None))
    metrics.record_fetch(result(False, "timeout"))
    metrics.record_fetch(result(False, "something new from user input"))
    assert sample("hal_webfetch_fetches_total", outcome="ok") == ok + 1
    assert sample("hal_webfetch_fetches_total", outcome="timeout") == timeout + 1
    assert sample("hal_webfetch_fetches_total", outcome="other") == other + 1
    metrics.reset()
