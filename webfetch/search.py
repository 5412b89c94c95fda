"""Web search: providers behind one protocol, then the shared FETCH stage, then PARSE."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, cast, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx2
from django.conf import settings

from webfetch import metrics
from webfetch.pipeline import FetchResult, fetch_many, load_curated_domains

log = logging.getLogger(__name__)

DEFAULT_TAVILY_URL = "https://api.tavily.com"
DEFAULT_ENTROPY_FLOOR = 1.5
_TRACKING = re.compile(r"^(utm_.*|fbclid|gclid|mc_cid|mc_eid|ref_src)$", re.I)
_WORD = re.compile(r"\w+", re.UNICODE)


class ProviderError(Exception):
    """A search provider failed; the message never contains credentials."""


@dataclass(frozen=True)
class SearchResult:
    """One raw result from one provider (SEARCH stage)."""

    url: str
    title: str
    snippet: str
    score: float  # provider's own ranking, normalised to 0..1
    provider_id: str
    trust_tier: str = "web"


@dataclass(frozen=True)
class Provenance:
    """Where a hit came from and what was done with it."""

    providers_used: tuple[str, ...]
    domain: str
    fetch_ok: bool
    depth: int  # 0 = snippet only, 1 = page fetched
    content_type: str
    retrieved_at: str
    trust_tier: str


@dataclass(frozen=True)
class SearchHit:
    """A de-duplicated, ranked result with its provenance and (depth 1) page text."""

    url: str
    title: str
    snippet: str
    score: float
    providers: tuple[str, ...]
    provenance: Provenance
    text: str = ""
    failure_reason: str | None = None


@dataclass
class SearchResponse:
    """The whole answer to one query."""

    query: str
    hits: list[SearchHit]
    providers_used: list[str]
    errors: dict[str, str] = field(default_factory=dict)
    domain_entropy: float = 0.0
    fallback_used: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class SearchProvider(Protocol):
    """SEARCH only: a query in, results out. Providers never fetch pages."""

    provider_id: str

    async def search(self, query: str, k: int) -> list[SearchResult]: ...


# -- Curated ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CuratedEntry:
    """An admin's preferred source (the CuratedSource model, detached from the ORM)."""

    domain: str
    title: str
    url: str = ""
    tags: Sequence[str] = ()
    description: str = ""

    @property
    def entry_url(self) -> str:
        return self.url or f"https://{self.domain}/"


def _load_curated_entries() -> list[CuratedEntry]:
    from webfetch.models import CuratedSource

    return [
        CuratedEntry(
            domain=s.domain,
            title=s.title,
            url=s.url,
            tags=tuple(s.tag_list),
            description=s.description,
        )
        for s in CuratedSource.objects.filter(enabled=True)
    ]


class CuratedProvider:
    """Returns admin-curated sources whose tags/title match the query. No network."""

    provider_id = "curated"

    def __init__(self, entries: Sequence[CuratedEntry] | None = None) -> None:
        self._entries = list(entries) if entries is not None else None

    async def _get_entries(self) -> list[CuratedEntry]:
        if self._entries is not None:
            return self._entries
        from asgiref.sync import sync_to_async

        return await sync_to_async(_load_curated_entries, thread_sensitive=True)()

    async def search(self, query: str, k: int) -> list[SearchResult]:
        words = {w.lower() for w in _WORD.findall(query)}
        lowered = query.lower()
        scored: list[tuple[float, CuratedEntry]] = []
        for entry in await self._get_entries():
            score = 0.0
            for tag in entry.tags:
                tag = tag.strip().lower()
                # Korean particles stick to words ("백업을"), so also match substrings.
                if tag and (tag in words or (len(tag) > 2 and tag in lowered)):
                    score += 1.0
            title_words = {w.lower() for w in _WORD.findall(entry.title)}
            score += 0.5 * len(words & title_words)
            if score > 0:
                scored.append((score, entry))
        if not scored:
            return []
        best = max(s for s, _ in scored)
        scored.sort(key=lambda pair: -pair[0])
        return [
            SearchResult(
                url=entry.entry_url,
                title=entry.title,
                snippet=entry.description or "curated",
                score=round(score / best, 4),
                provider_id=self.provider_id,
                trust_tier="curated",
            )
            for score, entry in scored[:k]
        ]


# -- Tavily ----------------------------------------------------------------------------


class TavilyProvider:
    """Tavily's HTTP search API. The API key is passed in (it lives in the vault)."""

    provider_id = "tavily"

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        timeout: float = 15.0,
        search_depth: str = "basic",
    ) -> None:
        self._api_key = api_key
        # hal.settings gives it a default, so it is never None there (env() is typed str | None).
        configured = cast(
            str, base_url or getattr(settings, "HAL_TAVILY_BASE_URL", DEFAULT_TAVILY_URL)
        )
        self.base_url = configured.rstrip("/")
        self.timeout = timeout
        self.search_depth = search_depth

    def __repr__(self) -> str:
        return f"TavilyProvider(base_url={self.base_url!r}, api_key=<hidden>)"

    async def search(self, query: str, k: int) -> list[SearchResult]:
        payload = {
            "query": query,
            "max_results": k,
            "search_depth": self.search_depth,
            "include_answer": False,
            "include_raw_content": False,
        }
        try:
            async with httpx2.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
                resp = await client.post(
                    f"{self.base_url}/search",
                    json=payload,
                    headers={"Authorization": f"Bearer {self._api_key}"},
                )
        except httpx2.TimeoutException as exc:
            raise ProviderError("tavily timed out") from exc
        except httpx2.HTTPError as exc:
            raise ProviderError(f"tavily unreachable ({type(exc).__name__})") from exc
        if resp.status_code != 200:
            raise ProviderError(f"tavily HTTP {resp.status_code}")
        try:
            data = resp.json()
            rows = data["results"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderError("tavily returned malformed JSON") from exc
        out = []
        for row in rows[:k]:
            if not isinstance(row, dict) or not row.get("url"):
                continue
            try:
                score = min(1.0, max(0.0, float(row.get("score") or 0.0)))
            except (TypeError, ValueError):
                score = 0.0
            out.append(
                SearchResult(
                    url=str(row["url"]),
                    title=str(row.get("title") or ""),
                    snippet=str(row.get("content") or ""),
                    score=score,
                    provider_id=self.provider_id,
                )
            )
        return out


# -- DuckDuckGo ------------------------------------------------------------------------


class DuckDuckGoProvider:
    """DuckDuckGo via `ddgs` (HTML scraping, strict IP rate limits): a fallback only."""

    provider_id = "ddg"

    def __init__(self, client_factory: Callable[[], Any] | None = None) -> None:
        self._factory = client_factory

    def _search_sync(self, query: str, k: int) -> list[dict[str, Any]]:
        if self._factory is None:
            from ddgs import DDGS

            client = DDGS()
        else:
            client = self._factory()
        return list(client.text(query, max_results=k) or [])

    async def search(self, query: str, k: int) -> list[SearchResult]:
        try:
            rows = await asyncio.to_thread(self._search_sync, query, k)
        except Exception as exc:  # ddgs raises its own hierarchy; all mean "provider failed"
            raise ProviderError(f"ddg failed ({type(exc).__name__})") from exc
        n = max(1, len(rows))
        return [
            SearchResult(
                url=str(r.get("href") or ""),
                title=str(r.get("title") or ""),
                snippet=str(r.get("body") or ""),
                score=round(1.0 - i / (n + 1), 4),  # rank-based: ddgs has no scores
                provider_id=self.provider_id,
            )
            for i, r in enumerate(rows[:k])
            if r.get("href")
        ]


# -- DEDUPE + RANK ---------------------------------------------------------------------


def normalize_url(url: str) -> str:
    """Canonical form for de-duplication: case, default ports, fragments, tracking params."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    netloc = (
        host
        if port is None or (scheme, port) in (("http", 80), ("https", 443))
        else f"{host}:{port}"
    )
    path = parts.path.rstrip("/") if parts.path not in ("", "/") else ""
    query = urlencode(
        [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if not _TRACKING.match(k)
        ]
    )
    return urlunsplit((scheme, netloc, path or "/", query, ""))


@dataclass
class _Merged:
    url: str
    title: str
    snippet: str
    score: float
    providers: list[str]
    trust_tier: str


def dedupe_and_rank(
    results: Sequence[SearchResult], curated_domains: Collection[str] = ()
) -> list[_Merged]:
    """Merge results that are the same page; rank by score, agreement and trust."""
    from webfetch.pipeline import _host_matches

    merged: dict[str, _Merged] = {}
    for r in results:
        if not r.url.lower().startswith(("http://", "https://")):
            continue
        key = normalize_url(r.url)
        m = merged.get(key)
        if m is None:
            host = urlsplit(r.url).hostname or ""
            tier = (
                "curated"
                if r.trust_tier == "curated" or _host_matches(host, curated_domains)
                else "web"
            )
            merged[key] = _Merged(r.url, r.title, r.snippet, r.score, [r.provider_id], tier)
            continue
        if r.provider_id not in m.providers:
            m.providers.append(r.provider_id)
        m.score = max(m.score, r.score)
        if len(r.snippet) > len(m.snippet):
            m.snippet = r.snippet
        if not m.title:
            m.title = r.title
        if r.trust_tier == "curated":
            m.trust_tier = "curated"

    def rank(m: _Merged) -> float:
        # Several providers agreeing and admin curation both outweigh one provider's score.
        return m.score + 0.15 * (len(m.providers) - 1) + (0.5 if m.trust_tier == "curated" else 0)

    return sorted(merged.values(), key=rank, reverse=True)


# -- The pipeline: SEARCH → FETCH → PARSE ----------------------------------------------


async def _run_providers(
    providers: Sequence[SearchProvider], query: str, k: int, errors: dict[str, str]
) -> list[SearchResult]:
    outcomes = await asyncio.gather(
        *(p.search(query, k) for p in providers), return_exceptions=True
    )
    results: list[SearchResult] = []
    for provider, outcome in zip(providers, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, Exception):
                raise outcome  # cancellation and friends are not provider failures
            # Only ProviderError messages are known to be credential-free.
            errors[provider.provider_id] = (
                str(outcome)
                if isinstance(outcome, ProviderError)
                else f"{provider.provider_id} failed ({type(outcome).__name__})"
            )
            log.warning("search provider %s failed: %s", provider.provider_id, outcome)
            continue
        results.extend(outcome)
    return results


def _domain(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


async def search(
    query: str,
    providers: Sequence[SearchProvider] | None = None,
    *,
    k: int = 5,
    max_results: int = 10,
    fetch: bool = True,
    fetch_top_n: int = 3,
    fetch_options: dict[str, Any] | None = None,
    fallback: SearchProvider | None = None,
    enable_ddg_fallback: bool | None = None,
    entropy_floor: float | None = None,
    curated_domains: Collection[str] | None = None,
) -> SearchResponse:
    """Search with `providers` (default: curated only), fetch the top hits, attach provenance.

    DuckDuckGo (`fallback`, default a DuckDuckGoProvider) is only asked when enabled and
    the results are too uniform (domain entropy below the floor) or empty.
    """
    if providers is None:
        providers = [CuratedProvider()]
    if enable_ddg_fallback is None:
        enable_ddg_fallback = bool(getattr(settings, "HAL_WEBFETCH_DDG_FALLBACK", False))
    if entropy_floor is None:
        entropy_floor = float(
            getattr(settings, "HAL_WEBFETCH_ENTROPY_FLOOR", DEFAULT_ENTROPY_FLOOR)
        )
    if curated_domains is None:
        curated_domains = await load_curated_domains()
    searched_at = datetime.now(UTC).isoformat(timespec="seconds")
    errors: dict[str, str] = {}
    used = [p.provider_id for p in providers]

    # 1. SEARCH
    raw = await _run_providers(providers, query, k, errors)
    entropy = metrics.domain_entropy(r.url for r in raw)
    fallback_used = False
    if enable_ddg_fallback and (entropy < entropy_floor or not raw):
        ddg = fallback if fallback is not None else DuckDuckGoProvider()
        raw.extend(await _run_providers([ddg], query, k, errors))
        used.append(ddg.provider_id)
        fallback_used = True
        entropy = metrics.domain_entropy(r.url for r in raw)
    metrics.record_search(entropy)

    # 2. DEDUPE + RANK
    ranked = dedupe_and_rank(raw, curated_domains)[:max_results]

    # 3. FETCH (the shared pipeline; no provider fetches)
    pages: dict[str, FetchResult] = {}
    if fetch and fetch_top_n > 0 and ranked:
        top = [m.url for m in ranked[:fetch_top_n]]
        opts = {"curated_domains": curated_domains, **(fetch_options or {})}
        for url, result in zip(top, await fetch_many(top, **opts), strict=True):
            pages[url] = result

    # 4. PARSE: provenance on every hit
    hits = []
    for m in ranked:
        page = pages.get(m.url)
        ok_page = page if page is not None and page.ok else None  # narrowed for the reads below
        fetched = ok_page is not None
        hits.append(
            SearchHit(
                url=m.url,
                title=(ok_page.title if ok_page and ok_page.title else m.title),
                snippet=m.snippet,
                score=round(m.score, 4),
                providers=tuple(m.providers),
                provenance=Provenance(
                    providers_used=tuple(m.providers),
                    domain=_domain(m.url),
                    fetch_ok=fetched,
                    depth=1 if fetched else 0,
                    content_type=ok_page.content_type if ok_page else "",
                    retrieved_at=page.retrieved_at if page is not None else searched_at,
                    trust_tier="curated"
                    if m.trust_tier == "curated" or (ok_page and ok_page.trust_tier == "curated")
                    else "web",
                ),
                text=ok_page.text if ok_page else "",
                failure_reason=page.failure_reason if page is not None else None,
            )
        )
    return SearchResponse(
        query=query,
        hits=hits,
        providers_used=used,
        errors=errors,
        domain_entropy=round(entropy, 4),
        fallback_used=fallback_used,
    )
