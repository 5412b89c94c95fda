"""FetchPipeline: the one shared fetch stage (guard, robots, types, caps, timeouts, cache)."""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import urlsplit

from django.conf import settings
from protego import Protego

from webfetch import metrics
from webfetch.cache import cache_key, shared_cache
from webfetch.client import (
    ROBOTS_TOKEN,
    FetchFailure,
    RawResponse,
    Timeouts,
    guarded_get,
)
from webfetch.extract import HTML_TYPES, PAGE_CHARS, aextract
from webfetch.guard import GuardError, Target, guard_url
from webfetch.result import FetchResult

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 1_000_000
DEFAULT_MIN_INTERVAL = 1.0
ROBOTS_MAX_BYTES = 512_000  # RFC 9309: parse at least 500 KiB
ALLOWED_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain", "application/json"})

FAILURE_REASONS = metrics.FAILURE_REASONS


def media_type_allowed(media: str, allowed: Collection[str] = ALLOWED_TYPES) -> bool:
    """The content-type allowlist: HTML/XHTML, text/plain, JSON and any +json type."""
    return media in allowed or (media.startswith("application/") and media.endswith("+json"))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class DomainThrottle:
    """Process-wide minimum interval between requests to one host (loop-agnostic)."""

    def __init__(self) -> None:
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()

    def reserve(self, host: str, interval: float) -> float:
        """Book the next slot for `host`; returns how long the caller must wait for it."""
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next.get(host, 0.0))
            self._next[host] = slot + interval
            return slot - now

    def reset(self) -> None:
        with self._lock:
            self._next.clear()


_throttle = DomainThrottle()


def throttle() -> DomainThrottle:
    return _throttle


class RobotsCache:
    """robots.txt per origin for one run; fetched through the same guarded client."""

    def __init__(self, *, timeouts: Timeouts, ssl_context: ssl.SSLContext | None) -> None:
        self._timeouts = timeouts
        self._ssl = ssl_context
        self._tasks: dict[tuple[str, str, int], asyncio.Task[Protego | bool]] = {}

    async def allowed(self, target: Target, url: str) -> bool:
        key = target.origin
        task = self._tasks.get(key)
        if task is None:
            task = asyncio.ensure_future(self._load(target))
            self._tasks[key] = task
        rules = await asyncio.shield(task)
        if isinstance(rules, bool):
            return rules
        return bool(rules.can_fetch(url, ROBOTS_TOKEN))

    async def _load(self, target: Target) -> Protego | bool:
        robots_url = f"{target.scheme}://{target.authority}/robots.txt"
        try:
            raw = await guarded_get(
                robots_url,
                max_bytes=ROBOTS_MAX_BYTES,
                accept="text/plain,*/*;q=0.5",
                timeouts=self._timeouts,
                ssl_context=self._ssl,
                first_target=Target(
                    url=robots_url,
                    scheme=target.scheme,
                    host=target.host,
                    port=target.port,
                    target="/robots.txt",
                    addresses=target.addresses,
                ),
            )
        except FetchFailure as exc:
            # RFC 9309 §2.3.1.4: unreachable → assume complete disallow.
            log.info("robots.txt unreachable for %s: %s", robots_url, exc)
            return False
        if 400 <= raw.status < 500:
            return True  # RFC 9309 §2.3.1.3: "unavailable" → allowed
        if raw.status >= 500 or raw.status < 200:
            return False
        from webfetch.extract import decode_body

        return Protego.parse(decode_body(raw.body, raw.charset))


def _host_matches(host: str, domains: Iterable[str]) -> bool:
    host = host.lower().rstrip(".")
    for d in domains:
        d = d.lower().strip().rstrip(".")
        if d and (host == d or host.endswith("." + d)):
            return True
    return False


def _load_curated_domains() -> set[str]:
    from webfetch.models import CuratedSource, FetchAllowDomain

    domains = set(FetchAllowDomain.objects.values_list("domain", flat=True))
    domains.update(
        d for d in CuratedSource.objects.filter(enabled=True).values_list("domain", flat=True) if d
    )
    return domains


async def load_curated_domains() -> set[str]:
    """Admin-curated domains (fetch allowlist + curated sources) → trust tier "curated"."""
    from asgiref.sync import sync_to_async

    try:
        return await sync_to_async(_load_curated_domains, thread_sensitive=True)()
    except Exception as exc:  # no DB (bench, early boot) just means "web"
        log.debug("curated domains unavailable: %s", exc)
        return set()


@dataclass(frozen=True)
class _Options:
    max_bytes: int
    max_chars: int
    robots: bool
    content_types: frozenset[str]
    timeouts: Timeouts
    total_timeout: float
    min_interval: float
    max_redirects: int
    use_cache: bool
    ssl_context: ssl.SSLContext | None
    redirect_hosts: frozenset[str] | None = None


def _failure(
    url: str, reason: str, detail: str, tier: str, *, status: int | None = None, final_url: str = ""
) -> FetchResult:
    return FetchResult(
        url=url,
        final_url=final_url or url,
        ok=False,
        status=status,
        content_type="",
        retrieved_at=_now(),
        bytes_read=0,
        truncated=False,
        trust_tier=tier,
        failure_reason=reason,
        detail=detail,
    )


async def _fetch_one(
    url: str, opts: _Options, robots: RobotsCache, curated: set[str]
) -> FetchResult:
    tier = "web"

    async def before_hop(target: Target, hop: int) -> None:
        hop_url = url if hop == 0 else f"{target.scheme}://{target.authority}{target.target}"
        if (
            hop
            and opts.redirect_hosts is not None
            and not _host_matches(target.host, opts.redirect_hosts)
        ):
            raise FetchFailure(
                "redirect_blocked", f"redirect to {target.host}, which is not an allowed domain"
            )
        if opts.robots and not await robots.allowed(target, hop_url):
            raise FetchFailure("robots", f"robots.txt of {target.host} disallows {hop_url}")
        wait = throttle().reserve(target.host, opts.min_interval)
        if wait > 0:
            await asyncio.sleep(wait)

    try:
        # One deadline for everything: resolution, robots, throttle wait, redirects, body.
        async with asyncio.timeout(opts.total_timeout):
            first = await guard_url(url)
            if _host_matches(first.host, curated):
                tier = "curated"
            raw: RawResponse = await guarded_get(
                url,
                max_bytes=opts.max_bytes,
                timeouts=opts.timeouts,
                max_redirects=opts.max_redirects,
                ssl_context=opts.ssl_context,
                media_type_ok=lambda m: media_type_allowed(m, opts.content_types),
                before_hop=before_hop,
                first_target=first,
            )
    except GuardError as exc:
        return _failure(url, exc.reason, exc.detail, tier)
    except FetchFailure as exc:
        return _failure(
            url, exc.reason, exc.detail, tier, status=exc.status, final_url=exc.final_url
        )
    except TimeoutError:
        return _failure(url, "timeout", f"no complete answer within {opts.total_timeout:g}s", tier)
    if raw.status >= 400:
        reason = "http_5xx" if raw.status >= 500 else "http_4xx"
        return _failure(
            url, reason, f"HTTP {raw.status}", tier, status=raw.status, final_url=raw.final_url
        )
    if raw.status >= 300 or raw.status < 200:
        return _failure(
            url,
            "network",
            f"unexpected HTTP {raw.status}",
            tier,
            status=raw.status,
            final_url=raw.final_url,
        )
    extracted = await aextract(
        raw.body,
        raw.media_type if raw.media_type in HTML_TYPES else "text/plain",
        charset=raw.charset,
        url=raw.final_url,
        max_chars=opts.max_chars,
    )
    return FetchResult(
        url=url,
        final_url=raw.final_url,
        ok=True,
        status=raw.status,
        content_type=raw.media_type,
        retrieved_at=_now(),
        bytes_read=len(raw.body),
        truncated=raw.truncated,
        trust_tier=tier,
        failure_reason=None,
        title=extracted.title,
        text=extracted.text,
        text_truncated=extracted.text_truncated,
    )


async def fetch_many(
    urls: Iterable[str],
    *,
    max_bytes: int | None = None,
    max_chars: int = PAGE_CHARS,
    robots: bool = True,
    content_types: Collection[str] | None = None,
    connect_timeout: float = 5.0,
    read_timeout: float = 10.0,
    total_timeout: float = 20.0,
    min_interval: float | None = None,
    max_redirects: int = 5,
    use_cache: bool = True,
    curated_domains: Collection[str] | None = None,
    ssl_context: ssl.SSLContext | None = None,
    concurrency: int = 4,
    redirect_hosts: Collection[str] | None = None,
) -> list[FetchResult]:
    """Fetch `urls` concurrently; one FetchResult per input URL, in input order.

    Never raises for a bad URL or a failed fetch: failures are results with a
    `failure_reason`. Successful results are served from / stored in the shared cache.
    """
    url_list = [str(u) for u in urls]
    if max_bytes is None:
        max_bytes = int(getattr(settings, "HAL_WEBFETCH_MAX_BYTES", DEFAULT_MAX_BYTES))
    if min_interval is None:
        min_interval = float(getattr(settings, "HAL_WEBFETCH_MIN_INTERVAL", DEFAULT_MIN_INTERVAL))
    timeouts = Timeouts(connect=connect_timeout, read=read_timeout)
    opts = _Options(
        max_bytes=max_bytes,
        max_chars=max_chars,
        robots=robots,
        content_types=frozenset(content_types) if content_types is not None else ALLOWED_TYPES,
        timeouts=timeouts,
        total_timeout=total_timeout,
        min_interval=min_interval,
        max_redirects=max_redirects,
        use_cache=use_cache,
        ssl_context=ssl_context,
        redirect_hosts=frozenset(redirect_hosts) if redirect_hosts is not None else None,
    )
    curated = set(curated_domains) if curated_domains is not None else await load_curated_domains()
    robots_cache = RobotsCache(timeouts=timeouts, ssl_context=ssl_context)
    cache = shared_cache()
    gate = asyncio.Semaphore(max(1, concurrency))
    unique: dict[str, asyncio.Task[FetchResult]] = {}

    async def run(url: str) -> FetchResult:
        if use_cache:
            hit = cache.get(url, max_bytes=max_bytes)
            if hit is not None and (
                opts.redirect_hosts is None
                or _host_matches(urlsplit(hit.final_url).hostname or "", opts.redirect_hosts)
            ):
                return replace(hit, url=url, from_cache=True)
        async with gate:
            result = await _fetch_one(url, opts, robots_cache, curated)
        metrics.record_fetch(result)
        if use_cache:
            cache.put(result, max_bytes=max_bytes)
        return result

    for url in url_list:
        key = cache_key(url)
        if key not in unique:
            unique[key] = asyncio.ensure_future(run(url))
    await asyncio.gather(*unique.values())
    out = []
    for url in url_list:
        result = unique[cache_key(url)].result()
        out.append(result if result.url == url else replace(result, url=url))
    return out
