"""The SSRF guard: schemes, ports, userinfo, numeric hosts and every non-global range."""

from __future__ import annotations

import ipaddress

import pytest

from webfetch.guard import BLOCKED, INVALID, GuardError, classify_address, guard_url

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:4700::1111"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.1/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0177.0.0.1/",
        "http://127.0.0.1./",
        "http://[::ffff:127.0.0.1]/",
        "http://[::169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[64:ff9b::808:808]/",
        "http://[2002:7f00:1::]/",
        "http://[2001::1]/",
        "http://localhost/",
        "http://LOCALHOST./x",
        "http://app.localhost/",
        "http://metadata.google.internal/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://100.100.100.200/",
        "http://100.64.0.1/",
        "http://198.18.0.1/",
        "http://224.0.0.1/",
        "http://239.255.255.250/",
        "http://0.0.0.0/",
        "http://240.0.0.1/",
        "http://255.255.255.255/",
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.1.1/",
        "http://[::1]/",
        "http://[::]/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://[fec0::1]/",
        "http://[ff02::1]/",
        "http://[2001:db8::1]/",
        "file:///etc/passwd",
        "gopher://example.com:70/_stats",
        "ftp://example.com/",
        "dict://example.com:11211/",
        "http://user:secret@example.com/",
        "http://user@example.com/",
        "http://example.com:6379/",
        "https://example.com:8443/",
        "http://127.0.0.1:6379/",
    ],
)
async def test_ssrf_matrix_is_refused_as_blocked_address(url, resolver):
    resolver.table["example.com"] = [PUBLIC_V4]
    with pytest.raises(GuardError) as exc:
        await guard_url(url)
    assert exc.value.reason == BLOCKED, exc.value.detail


@pytest.mark.parametrize(
    "url",
    [
        "http://",
        "http:///path",
        "not a url",
        "http://exa mple.com/",
        "http://256.1.1.1/",
        "http://1.2.3.4.5/",
        "http://[fe80::1%25eth0]/",
        "http://[::1/",
        "",
    ],
)
async def test_malformed_urls_are_invalid(url, resolver):
    with pytest.raises(GuardError) as exc:
        await guard_url(url)
    assert exc.value.reason == INVALID


async def test_numeric_hosts_never_reach_dns(resolver):
    for url in ("http://127.1/", "http://2130706433/", "http://0x7f000001/"):
        with pytest.raises(GuardError):
            await guard_url(url)
    assert resolver.calls == []


async def test_embedded_v4_is_named_in_the_detail():
    with pytest.raises(GuardError) as exc:
        await guard_url("http://[::ffff:127.0.0.1]/")
    assert "127.0.0.1" in exc.value.detail
    with pytest.raises(GuardError) as exc:
        await guard_url("http://[64:ff9b::a9fe:a9fe]/")
    assert "169.254.169.254" in exc.value.detail


async def test_a_name_with_one_private_address_among_public_ones_is_refused(resolver):
    resolver.table["mixed.example"] = [PUBLIC_V4, "10.0.0.5"]
    with pytest.raises(GuardError) as exc:
        await guard_url("https://mixed.example/page")
    assert exc.value.reason == BLOCKED
    assert "10.0.0.5" in exc.value.detail


async def test_unresolvable_name_is_a_network_failure(resolver):
    with pytest.raises(GuardError) as exc:
        await guard_url("https://nowhere.example/")
    assert exc.value.reason == "network"


async def test_public_name_resolves_once_and_is_pinned(resolver):
    resolver.table["public.example"] = [PUBLIC_V4, PUBLIC_V6]
    target = await guard_url("https://Public.Example/a/b?q=1#frag")
    assert resolver.calls == ["public.example"]
    assert target.scheme == "https"
    assert target.host == "public.example"
    assert target.port == 443
    assert target.target == "/a/b?q=1"
    assert [str(a) for a in target.addresses] == [PUBLIC_V4, PUBLIC_V6]


async def test_idn_host_is_encoded(resolver):
    resolver.table["xn--3e0b707e.example"] = [PUBLIC_V4]
    target = await guard_url("https://한국.example/")
    assert target.host == "xn--3e0b707e.example"


async def test_configured_ports(resolver, settings):
    resolver.table["example.com"] = [PUBLIC_V4]
    settings.HAL_WEBFETCH_ALLOWED_PORTS = [443, 8443]
    assert (await guard_url("https://example.com:8443/")).port == 8443
    with pytest.raises(GuardError):
        await guard_url("http://example.com/")


async def test_loopback_flag_allows_only_plain_loopback(allow_loopback, resolver):
    assert (await guard_url("http://127.0.0.1:8080/")).port == 8080
    resolver.table["site.test"] = ["127.0.0.1"]
    assert (await guard_url("http://site.test:9999/")).addresses[0].is_loopback
    for url in (
        "http://10.0.0.1/",
        "http://169.254.169.254/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0:8080/",
    ):
        with pytest.raises(GuardError):
            await guard_url(url)
    # a non-standard port is fine for loopback only
    resolver.table["example.com"] = [PUBLIC_V4]
    with pytest.raises(GuardError):
        await guard_url("http://example.com:6379/")


@pytest.mark.parametrize(
    "addr,ok",
    [
        ("8.8.8.8", True),
        (PUBLIC_V6, True),
        ("::ffff:8.8.8.8", False),
        ("100.127.255.255", False),
        ("198.19.255.255", False),
        ("192.0.0.8", False),
        ("203.0.113.9", False),
    ],
)
def test_classify_address(addr, ok):
    assert (classify_address(ipaddress.ip_address(addr)) is None) is ok
