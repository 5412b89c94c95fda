"""Search: providers behind one protocol, SEARCH → FETCH → PARSE, provenance everywhere."""

from __future__ import annotations

import json
import secrets

import pytest

from tests.webfetch.conftest import send
from webfetch.search import (
    CuratedEntry,
    CuratedProvider,
    ProviderError,
    SearchResult,
    TavilyProvider,
    dedupe_and_rank,
    normalize_url,
    search,
)

PAGE = b"<html><head><title>%s</title></head><body><article><p>%s</p></article></body></html>"


def tavily_server(server, results, status=200):
    """A fake Tavily speaking its real /search JSON."""

    async def handler(req, writer):
        if status != 200:
            await send(
                writer,
                status,
                json.dumps({"detail": {"error": "Unauthorized"}}).encode(),
                "application/json",
            )
            return
        body = json.loads(req.body)
        payload = {
            "query": body["query"],
            "follow_up_questions": None,
            "answer": None,
            "images": [],
            "results": [
                {"title": t, "url": u, "content": c, "score": s, "raw_content": None}
                for (t, u, c, s) in results[: body.get("max_results", 5)]
            ],
            "response_time": 0.42,
            "request_id": secrets.token_hex(8),
        }
        await send(writer, 200, json.dumps(payload).encode(), "application/json")

    server.routes["/search"] = handler


class FakeDDG:
    provider_id = "ddg"

    def __init__(self, results):
        self.results = results
        self.calls = 0

    async def search(self, query, k):
        self.calls += 1
        return self.results[:k]


async def test_tavily_wire_format_and_auth(server):
    key = secrets.token_urlsafe(24)
    tavily_server(
        server,
        [
            ("A", "https://a.example/1", "snippet a", 0.9),
            ("B", "https://b.example/2", "snippet b", 0.5),
        ],
    )
    provider = TavilyProvider(key, base_url=server.base)
    results = await provider.search("disk alarms", k=5)
    req = server.requests[0]
    assert (req.method, req.path) == ("POST", "/search")
    assert req.headers["authorization"] == f"Bearer {key}"
    sent = json.loads(req.body)
    assert sent["query"] == "disk alarms" and sent["max_results"] == 5
    assert "api_key" not in sent
    assert [(r.url, r.snippet, r.score, r.provider_id) for r in results] == [
        ("https://a.example/1", "snippet a", 0.9, "tavily"),
        ("https://b.example/2", "snippet b", 0.5, "tavily"),
    ]
    assert key not in repr(provider)


async def test_tavily_errors_never_carry_the_key(server):
    key = secrets.token_urlsafe(24)
    tavily_server(server, [], status=401)
    provider = TavilyProvider(key, base_url=server.base)
    with pytest.raises(ProviderError) as exc:
        await provider.search("q", k=3)
    assert "401" in str(exc.value) and key not in str(exc.value)
    response = await search("q", providers=[provider], fetch=False)
    assert response.hits == [] and "tavily" in response.errors
    assert key not in json.dumps(response.as_dict())


async def test_curated_matches_tags_without_network():
    provider = CuratedProvider(
        [
            CuratedEntry(
                domain="www.postgresql.org",
                url="https://www.postgresql.org/docs/",
                title="PostgreSQL docs",
                tags=["postgres", "backup"],
                description="Manual",
            ),
            CuratedEntry(domain="nginx.org", url="", title="nginx", tags=["proxy"], description=""),
        ]
    )
    results = await provider.search("How do I take a Postgres backup?", k=5)
    assert [r.url for r in results] == ["https://www.postgresql.org/docs/"]
    assert results[0].trust_tier == "curated" and results[0].provider_id == "curated"
    assert await provider.search("nothing relevant", k=5) == []
    assert [r.url for r in await provider.search("proxy", k=5)] == ["https://nginx.org/"]


@pytest.mark.django_db(transaction=True)
async def test_curated_reads_the_admin_model():
    from asgiref.sync import sync_to_async

    from webfetch.models import CuratedSource

    await sync_to_async(CuratedSource.objects.create)(
        domain="docs.example.org", title="Runbooks", tags="disk, alarms", description="d"
    )
    await sync_to_async(CuratedSource.objects.create)(
        domain="off.example.org", title="Off", tags="disk", enabled=False
    )
    results = await CuratedProvider().search("disk alarms", k=5)
    assert [r.url for r in results] == ["https://docs.example.org/"]


def test_normalize_and_dedupe():
    assert (
        normalize_url("HTTPS://Example.COM:443/a/?utm_source=x&b=1#f")
        == "https://example.com/a?b=1"
    )
    merged = dedupe_and_rank(
        [
            SearchResult("https://a.example/x", "A", "short", 0.4, "tavily"),
            SearchResult("https://a.example/x/#top", "A", "a longer snippet", 0.3, "ddg"),
            SearchResult("https://b.example/", "B", "b", 0.6, "tavily"),
            SearchResult("https://c.example/", "C", "curated", 1.0, "curated", "curated"),
        ]
    )
    assert merged[0].url == "https://c.example/"
    a = next(m for m in merged if m.url.startswith("https://a.example"))
    assert list(a.providers) == ["tavily", "ddg"] and a.snippet == "a longer snippet"
    assert len(merged) == 3


async def test_search_fetch_parse_with_provenance(allow_loopback, server, server2):
    for path, title in (("/one", b"One"), ("/two", b"Two"), ("/three", b"Three")):

        async def page(req, writer, title=title):
            await send(writer, 200, PAGE % (title, b"page body " * 30))

        server2.routes[path] = page
    tavily_server(
        server,
        [
            ("One", server2.url("/one"), "s1", 0.9),
            ("Two", server2.url("/two"), "s2", 0.8),
            ("Three", server2.url("/three"), "s3", 0.1),
            ("Ext", "https://other.example/page", "s4", 0.05),
        ],
    )
    curated = CuratedProvider(
        [
            CuratedEntry(
                domain="127.0.0.1", url=server2.url("/two"), title="Two (curated)", tags=["alarms"]
            )
        ]
    )
    tavily = TavilyProvider(secrets.token_urlsafe(16), base_url=server.base)
    response = await search(
        "disk alarms", providers=[curated, tavily], fetch_top_n=2, fetch_options={"robots": False}
    )
    assert response.providers_used == ["curated", "tavily"]
    urls = [h.url for h in response.hits]
    assert urls[0] == server2.url("/two")  # curated + seen twice ranks first
    assert len(urls) == len(set(urls)) == 4
    top = response.hits[0]
    assert top.providers == ("curated", "tavily")
    for hit in response.hits:
        p = hit.provenance
        assert p.providers_used and p.domain and p.retrieved_at and p.trust_tier
        assert p.depth in (0, 1)
    fetched = [h for h in response.hits if h.provenance.depth == 1]
    assert len(fetched) == 2 and all(h.provenance.fetch_ok for h in fetched)
    assert all(h.provenance.content_type == "text/html" and "page body" in h.text for h in fetched)
    snippet_only = response.hits[-1]
    assert snippet_only.provenance.depth == 0 and not snippet_only.provenance.fetch_ok
    assert snippet_only.provenance.content_type == ""
    assert top.provenance.trust_tier == "curated"
    d = response.as_dict()
    assert d["hits"][0]["provenance"]["depth"] == 1


async def test_ddg_is_off_by_default_and_a_fallback_when_results_are_uniform(settings):
    same_site = CuratedProvider(
        [
            CuratedEntry(
                domain="one.example", url=f"https://one.example/{i}", title=f"t{i}", tags=["alarms"]
            )
            for i in range(3)
        ]
    )
    ddg = FakeDDG(
        [
            SearchResult("https://x.example/", "x", "x", 0.5, "ddg"),
            SearchResult("https://y.example/", "y", "y", 0.4, "ddg"),
        ]
    )
    off = await search("alarms", providers=[same_site], fetch=False, fallback=ddg)
    assert ddg.calls == 0 and not off.fallback_used
    assert off.domain_entropy == 0.0
    on = await search(
        "alarms", providers=[same_site], fetch=False, fallback=ddg, enable_ddg_fallback=True
    )
    assert ddg.calls == 1 and on.fallback_used
    assert "ddg" in on.providers_used
    assert {h.url for h in on.hits} >= {"https://x.example/", "https://y.example/"}
    settings.HAL_WEBFETCH_DDG_FALLBACK = True
    diverse = CuratedProvider(
        [CuratedEntry(domain=f"d{i}.example", title=f"t{i}", tags=["alarms"]) for i in range(4)]
    )
    await search("alarms", providers=[diverse], fetch=False, fallback=ddg)
    assert ddg.calls == 1  # entropy 2 bits ≥ floor: no fallback
