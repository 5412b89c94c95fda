"""FetchResult: one URL's fetch outcome, shared by the pipeline, its cache and its metrics."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class FetchResult:
    """One URL's fetch outcome with provenance; frozen because the cache shares it."""

    url: str
    final_url: str
    ok: bool
    status: int | None
    content_type: str
    retrieved_at: str  # ISO 8601, UTC
    bytes_read: int
    truncated: bool  # body cut at max_bytes (not a failure)
    trust_tier: str  # "curated" | "web"
    failure_reason: str | None
    title: str = ""
    text: str = ""
    text_truncated: bool = False  # extracted text cut at the per-page char cap
    detail: str = ""  # human-readable reason for a failure
    from_cache: bool = False

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
