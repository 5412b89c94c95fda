"""Web context for HAL's models: SSRF-safe fetching, extraction, caching and search.

Public API (imported lazily so Django start-up does not load trafilatura):
`fetch_many`, `FetchResult`, `extract_urls`, `format_context_block`,
`format_context_blocks`, `metrics_snapshot`. Search lives in its submodule:
`from webfetch.search import search` (a package attribute named `search` would be
shadowed by the submodule of the same name once it is imported).
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "fetch_many": ("webfetch.pipeline", "fetch_many"),
    "FetchResult": ("webfetch.pipeline", "FetchResult"),
    "extract_urls": ("webfetch.urls", "extract_urls"),
    "format_context_block": ("webfetch.context", "format_context_block"),
    "format_context_blocks": ("webfetch.context", "format_context_blocks"),
    "metrics_snapshot": ("webfetch.metrics", "snapshot"),
    "PAGE_CHARS": ("webfetch.extract", "PAGE_CHARS"),
    "SHARED_PAGE_CHARS": ("webfetch.extract", "SHARED_PAGE_CHARS"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'webfetch' has no attribute {name!r}")
    import importlib

    module, attr = _EXPORTS[name]
    return getattr(importlib.import_module(module), attr)
