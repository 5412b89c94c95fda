"""FetchPipeline against real loopback servers: guard, robots, types, caps, timeouts, cache."""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
import zlib
from datetime import datetime

import pytest

from tests.webfetch.conftest import send
from webfetch import metrics
from webfetch.cache import shared_cache
from webfetch.pipeline import FetchResult, fetch_many

PAGE = (
    b"<html><head><title>Runbook</title><script>var TOKENISH = 1;</script></head><body>"
    b"<article><h1>Disk alerts</h1>"
    + b"".join(
        b"<p>When the disk alarm fires on a storage node, drain it first. %d</p>" % i
        for i in range(10)
    )
    + b"</article></body></html>"
)

NO_ROBOTS = {"robots": False}


def html_route(server, path, body=PAGE, status=200, ctype="text/html; charset=utf-8", headers=None):
    async def handler(req, writer):
        await send(writer, status, body, ctype, headers)

    server.routes[path] = handler


async def one(url, **kw) -> FetchResult:
    (result,) = await fetch_many([url], **kw)
    return result


async def test_fetches_html_with_provenance(allow_loopback, server):
    html_route(server, "/page")
    r = await one(server.url("/page"), **NO_ROBOTS)
    assert r.ok and r.failure_reason is None
    assert r.status == 200
    assert r.content_type == "text/html"
    assert r.final_url == server.url("/page")
    assert r.title == "Runbook"
    assert "drain it first" in r.text and "TOKENISH" not in r.text
    assert r.bytes_read == len(PAGE) and not r.truncated
    assert r.trust_tier == "web"
    assert datetime.fromisoformat(r.retrieved_at).tzinfo is not None


async def test_loopback_is_refused_when_the_switch_is_off(server):
    html_route(server, "/page")
    r = await one(server.url("/page"))
    assert not r.ok and r.failure_reason == "blocked_address"
    assert server.requests == []


@pytest.mark.parametrize(
    "url,reason",
    [
        ("file:///etc/passwd", "blocked_address"),
        ("gopher://example.com/", "blocked_address"),
        ("http://[::169.254.169.254]/", "blocked_address"),
        ("not a url", "invalid_url"),
    ],
)
async def test_refusals_come_back_as_results(url, reason):
    r = await one(url)
    assert (r.ok, r.failure_reason) == (False, reason)
    assert r.text == "" and r.detail


async def test_robots_disallow_and_per_run_cache(allow_loopback, server):
    async def robots(req, writer):
        await send(writer, 200, b"User-agent: *\nDisallow: /private\n", "text/plain")

    server.routes["/robots.txt"] = robots
    html_route(server, "/private/x")
    html_route(server, "/public")
    blocked, allowed = await fetch_many([server.url("/private/x"), server.url("/public")])
    assert blocked.failure_reason == "robots" and not blocked.ok
    assert allowed.ok
    assert server.paths().count("/robots.txt") == 1
    assert "/private/x" not in server.paths()


@pytest.mark.parametrize("status,allowed", [(404, True), (403, True), (500, False), (503, False)])
async def test_robots_status_semantics(allow_loopback, server, status, allowed):
    async def robots(req, writer):
        await send(writer, status, b"Disallow: /", "text/plain")

    server.routes["/robots.txt"] = robots
    html_route(server, "/page")
    r = await one(server.url("/page"))
    assert r.ok is allowed
    if not allowed:
        assert r.failure_reason == "robots"


async def test_robots_unreachable_disallows(allow_loopback, server):
    async def robots(req, writer):
        writer.transport.abort()

    server.routes["/robots.txt"] = robots
    html_route(server, "/page")
    r = await one(server.url("/page"))
    assert r.failure_reason == "robots"
    assert "/page" not in server.paths()


@pytest.mark.parametrize(
    "ctype,ok",
    [
        ("image/png", False),
        ("application/octet-stream", False),
        (None, False),
        ("application/json", True),
        ("application/ld+json; charset=utf-8", True),
        ("text/plain; charset=utf-8", True),
        ("application/xhtml+xml", True),
    ],
)
async def test_content_type_allowlist(allow_loopback, server, ctype, ok):
    html_route(server, "/x", body=b'{"a": 1}', ctype=ctype)
    r = await one(server.url("/x"), **NO_ROBOTS)
    assert r.ok is ok
    if not ok:
        assert r.failure_reason == "content_type"
        assert r.text == ""


@pytest.mark.parametrize(
    "status,reason", [(404, "http_4xx"), (410, "http_4xx"), (500, "http_5xx"), (503, "http_5xx")]
)
async def test_http_errors(allow_loopback, server, status, reason):
    html_route(server, "/x", status=status)
    r = await one(server.url("/x"), **NO_ROBOTS)
    assert (r.ok, r.status, r.failure_reason) == (False, status, reason)


async def test_truncation_is_not_a_failure(allow_loopback, server):
    html_route(server, "/big", body=b"a" * 50_000, ctype="text/plain")
    r = await one(server.url("/big"), max_bytes=10_000, **NO_ROBOTS)
    assert r.ok and r.truncated and r.bytes_read == 10_000
    assert r.failure_reason is None
    exact = await one(server.url("/big"), max_bytes=50_000, use_cache=False, **NO_ROBOTS)
    assert exact.ok and not exact.truncated and exact.bytes_read == 50_000


def gzip_bomb(decoded_mb: int) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\0" * (1 << 20)
    return b"".join([*(comp.compress(chunk) for _ in range(decoded_mb)), comp.flush()])


async def test_gzip_bomb_stops_at_the_cap_with_bounded_memory(allow_loopback, server):
    bomb = gzip_bomb(300)  # 300 MB decoded, ~300 KB on the wire
    assert len(bomb) < 1_000_000
    html_route(server, "/bomb", body=bomb, ctype="text/plain", headers={"Content-Encoding": "gzip"})
    tracemalloc.start()
    try:
        r = await one(server.url("/bomb"), max_bytes=200_000, **NO_ROBOTS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.ok and r.truncated and r.bytes_read == 200_000
    assert peak < 8_000_000, peak


async def test_gzip_and_deflate_are_decoded(allow_loopback, server):
    html_route(server, "/gz", body=gzip.compress(PAGE), headers={"Content-Encoding": "gzip"})
    html_route(server, "/df", body=zlib.compress(PAGE), headers={"Content-Encoding": "deflate"})
    gz, df = await fetch_many([server.url("/gz"), server.url("/df")], robots=False)
    assert gz.ok and df.ok and gz.bytes_read == df.bytes_read == len(PAGE)
    assert gz.title == df.title == "Runbook"


async def test_endless_body_ends_at_the_cap(allow_loopback, server):
    async def endless(req, writer):
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        piece = b"y" * 8192
        while True:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()

    server.routes["/endless"] = endless
    started = time.monotonic()
    r = await one(server.url("/endless"), max_bytes=300_000, **NO_ROBOTS)
    assert r.ok and r.truncated and r.bytes_read == 300_000
    assert time.monotonic() - started < 5


async def test_huge_content_length_ends_at_the_cap(allow_loopback, server):
    async def huge(req, writer):
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000000000000\r\n\r\n"
        )
        writer.write(b"z" * 200_000)
        await writer.drain()
        await asyncio.sleep(30)  # then never finish

    server.routes["/huge"] = huge
    tracemalloc.start()
    try:
        r = await one(server.url("/huge"), max_bytes=100_000, **NO_ROBOTS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.ok and r.truncated and r.bytes_read == 100_000
    assert peak < 8_000_000


async def test_slow_server_hits_the_overall_deadline(allow_loopback, server):
    async def trickle(req, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n")
        for _ in range(100):
            writer.write(b"s")
            await writer.drain()
            await asyncio.sleep(0.2)

    server.routes["/slow"] = trickle
    started = time.monotonic()
    r = await one(server.url("/slow"), total_timeout=1.0, read_timeout=5.0, **NO_ROBOTS)
    elapsed = time.monotonic() - started
    assert (r.ok, r.failure_reason) == (False, "timeout")
    assert elapsed < 2.5


async def test_silent_server_hits_the_read_timeout(allow_loopback, server):
    async def silent(req, writer):
        await asyncio.sleep(30)

    server.routes["/silent"] = silent
    started = time.monotonic()
    r = await one(server.url("/silent"), read_timeout=0.5, **NO_ROBOTS)
    assert r.failure_reason == "timeout"
    assert time.monotonic() - started < 2


def redirect(server, path, location, status=302, headers=None):
    async def handler(req, writer):
        await send(writer, status, b"", None, {"Location": location, **(headers or {})})

    server.routes[path] = handler


async def test_redirect_to_a_private_address_is_refused(allow_loopback, server):
    redirect(server, "/go", "http://169.254.169.254/latest/meta-data/")
    r = await one(server.url("/go"), **NO_ROBOTS)
    assert (r.ok, r.failure_reason) == (False, "blocked_address")
    redirect(server, "/go2", "http://10.1.2.3/")
    assert (await one(server.url("/go2"), **NO_ROBOTS)).failure_reason == "blocked_address"


async def test_redirect_chains(allow_loopback, server):
    for i in range(6):
        redirect(server, f"/r{i}", f"/r{i + 1}")
    html_route(server, "/r6")
    six = await one(server.url("/r0"), **NO_ROBOTS)
    assert (six.ok, six.failure_reason) == (False, "too_many_redirects")
    assert "/r6" not in server.paths()
    five = await one(server.url("/r1"), **NO_ROBOTS)
    assert five.ok and five.final_url == server.url("/r6")


async def test_redirect_hop_is_checked_by_robots(allow_loopback, server, server2):
    async def robots(req, writer):
        await send(writer, 200, b"User-agent: *\nDisallow: /\n", "text/plain")

    server2.routes["/robots.txt"] = robots
    html_route(server2, "/target")
    redirect(server, "/hop", server2.url("/target"))
    r = await one(server.url("/hop"))
    assert r.failure_reason == "robots"
    assert "/target" not in server2.paths()


async def test_no_credentials_or_cookies_are_sent_or_forwarded(allow_loopback, server, server2):
    html_route(server2, "/dest")
    redirect(
        server,
        "/start",
        server2.url("/dest"),
        headers={"Set-Cookie": "sid=abc; Path=/", "WWW-Authenticate": "Basic"},
    )
    r = await one(server.url("/start"), **NO_ROBOTS)
    assert r.ok and r.final_url == server2.url("/dest")
    for req in server.requests + server2.requests:
        assert "cookie" not in req.headers
        assert "authorization" not in req.headers
        assert "proxy-authorization" not in req.headers
    assert server2.requests[0].headers["host"] == f"127.0.0.1:{server2.port}"


async def test_the_resolved_address_is_pinned(allow_loopback, server, resolver):
    resolver.table["site.test"] = ["127.0.0.1"]
    html_route(server, "/p")
    r = await one(f"http://site.test:{server.port}/p", **NO_ROBOTS)
    assert r.ok
    assert resolver.calls == ["site.test"]  # resolved once, then that address was used
    assert server.requests[0].headers["host"] == f"site.test:{server.port}"


async def test_cache_hit_and_failures_not_cached(allow_loopback, server):
    html_route(server, "/ok")
    html_route(server, "/bad", status=503)
    first = await one(server.url("/ok"), **NO_ROBOTS)
    again = await one(server.url("/ok#section"), **NO_ROBOTS)
    assert first.ok and again.ok and again.from_cache and not first.from_cache
    assert server.paths().count("/ok") == 1
    await one(server.url("/bad"), **NO_ROBOTS)
    await one(server.url("/bad"), **NO_ROBOTS)
    assert server.paths().count("/bad") == 2
    assert shared_cache().stats()["hits"] == 1
    snap = metrics.snapshot()
    assert snap["fetches"] == 3 and snap["fetch_ok"] == 1
    assert snap["failures"] == {"http_5xx": 2}


async def test_concurrent_and_in_order_with_duplicates(allow_loopback, server):
    # Concurrency proven by overlap, not by a clock: each handler waits until all three
    # distinct requests are in flight at once — fetched one by one, none would see that.
    arrived, all_in = [], asyncio.Event()
    overlapped = []

    async def slow(req, writer):
        arrived.append(req)
        if len(arrived) == 3:
            all_in.set()
        try:
            await asyncio.wait_for(all_in.wait(), timeout=5)
            overlapped.append(True)
        except TimeoutError:
            overlapped.append(False)
        await send(writer, 200, PAGE)

    for p in ("/a", "/b", "/c"):
        server.routes[p] = slow
    urls = [server.url("/a"), server.url("/b"), server.url("/c"), server.url("/a")]
    results = await fetch_many(urls, **NO_ROBOTS)
    assert overlapped == [True, True, True]
    assert [r.url for r in results] == urls
    assert all(r.ok for r in results)
    assert server.paths().count("/a") == 1


async def test_minimum_interval_per_domain(allow_loopback, server):
    html_route(server, "/1")
    html_route(server, "/2")
    started = time.monotonic()
    await fetch_many([server.url("/1"), server.url("/2")], min_interval=0.5, **NO_ROBOTS)
    assert time.monotonic() - started >= 0.5


async def test_trust_tier_from_curated_domains(allow_loopback, server, resolver):
    resolver.table["docs.site.test"] = ["127.0.0.1"]
    html_route(server, "/p")
    r = await one(
        f"http://docs.site.test:{server.port}/p", curated_domains={"site.test"}, **NO_ROBOTS
    )
    assert r.trust_tier == "curated"
    other = await one(server.url("/p"), curated_domains={"site.test"}, **NO_ROBOTS)
    assert other.trust_tier == "web"


@pytest.mark.django_db(transaction=True)
async def test_trust_tier_from_the_allowlist_model(allow_loopback, server, resolver):
    from asgiref.sync import sync_to_async

    from webfetch.models import FetchAllowDomain

    await sync_to_async(FetchAllowDomain.objects.create)(domain="site.test")
    resolver.table["site.test"] = ["127.0.0.1"]
    html_route(server, "/p")
    r = await one(f"http://site.test:{server.port}/p", **NO_ROBOTS)
    assert r.trust_tier == "curated"
