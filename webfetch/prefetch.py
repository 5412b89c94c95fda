"""URL pre-fetch for an operator's chat message: fetched once, before any model is called.

The chat orchestrator calls `prefetch_context` once per operator message and puts the
same blocks into the context of every model that receives the message, in the unified
room and in individual rooms alike (mode parity). The only difference between the two
is the per-page cap: 8,000 characters when `shared=True` (unified room), else 20,000.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from webfetch.budgets import FetchPlan, afetch_plan, arecord_fetch
from webfetch.context import format_context_block
from webfetch.extract import PAGE_CHARS, SHARED_PAGE_CHARS
from webfetch.pipeline import FetchResult, fetch_many
from webfetch.urls import MAX_URLS, extract_urls

SKIP_AUTO_FETCH_OFF = "auto_fetch_off"
SKIP_COMMAND = "command"
SKIP_NO_URLS = "no_urls"


@dataclass(frozen=True)
class PrefetchResult:
    """What pre-fetch produced for one message: context blocks with provenance, or why none."""

    urls: tuple[str, ...] = ()
    results: tuple[FetchResult, ...] = ()
    blocks: tuple[str, ...] = ()
    max_chars: int = PAGE_CHARS
    shared: bool = False
    degraded: bool = False
    # URLs found but not fetched because degraded mode halves the pages (each has a block).
    skipped_urls: tuple[str, ...] = ()
    skipped: str = ""  # "" | auto_fetch_off | command | no_urls
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """All blocks, ready to append to a model's context ("" when nothing was fetched)."""
        return "\n\n".join(self.blocks)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["results"] = [r.as_dict() for r in self.results]
        data["text"] = self.text
        return data


def budget_block(url: str) -> str:
    """The honest block for a URL left out by degraded mode."""
    return (
        f"could not read {url}: budget (today's fetch budget is used up; degraded mode "
        "fetches fewer pages)\nDo not describe this page's contents; you have not read it."
    )


def _auto_fetch_enabled(operator_id: int) -> bool:
    from hal.models import OperatorProfile

    value = (
        OperatorProfile.objects.filter(user_id=operator_id)
        .values_list("auto_fetch_urls", flat=True)
        .first()
    )
    if value is not None:
        return bool(value)
    try:  # no profile yet: the console-wide default for new operators
        from hal.actions.settings import get_setting

        return bool(get_setting("webfetch.auto_fetch_default"))
    except Exception:
        return True


async def prefetch_context(
    text: str,
    *,
    operator_id: int,
    shared: bool,
    connection_ids: Iterable[int | None] = (),
    fetch_options: dict[str, Any] | None = None,
) -> PrefetchResult:
    """Fetch the URLs of an operator's message (before the models run) as context blocks.

    `shared=True` for the unified room (8,000 chars per page), else 20,000. Respects the
    operator's `auto_fetch_urls`; a `/command` has no URLs. Every found URL yields a block:
    the page with provenance, or "could not read <url>: <reason>". `connection_ids` are the
    connections receiving the message: their fetch budgets decide degraded mode (if any is
    over, all get the same degraded blocks: parity) and are charged the bytes fetched.
    Never raises for a bad URL or a failed fetch.
    """
    max_chars = SHARED_PAGE_CHARS if shared else PAGE_CHARS
    if not text or text.lstrip().startswith("/"):
        return PrefetchResult(max_chars=max_chars, shared=shared, skipped=SKIP_COMMAND)
    urls = extract_urls(text, max_urls=MAX_URLS)
    if not urls:  # checked first: no database trip for the common message without links
        return PrefetchResult(max_chars=max_chars, shared=shared, skipped=SKIP_NO_URLS)
    enabled = await sync_to_async(_auto_fetch_enabled, thread_sensitive=True)(operator_id)
    if not enabled:
        return PrefetchResult(max_chars=max_chars, shared=shared, skipped=SKIP_AUTO_FETCH_OFF)
    ids = [c for c in connection_ids if c is not None]
    plan: FetchPlan = await afetch_plan(ids)
    fetched_urls, skipped_urls = urls[: plan.max_pages], urls[plan.max_pages :]
    options = {**(fetch_options or {}), "max_bytes": plan.max_bytes, "max_chars": PAGE_CHARS}
    results = await fetch_many(fetched_urls, **options)
    await _charge(ids, results)
    blocks = [format_context_block(r, max_chars=max_chars) for r in results]
    blocks += [budget_block(u) for u in skipped_urls]
    return PrefetchResult(
        urls=tuple(urls),
        results=tuple(results),
        blocks=tuple(blocks),
        max_chars=max_chars,
        shared=shared,
        degraded=plan.degraded,
        skipped_urls=tuple(skipped_urls),
    )


async def _charge(connection_ids: Sequence[int], results: Sequence[FetchResult]) -> None:
    """Network bytes count against the budget; cache hits cost nothing."""
    network = [r for r in results if not r.from_cache]
    if connection_ids and network:
        await arecord_fetch(connection_ids, sum(r.bytes_read for r in network), len(network))
