"""Module health checks go through the SSRF guard with an explicit fleet allowance, re-checked
on every redirect (issue 11, item 13). Real loopback servers on 127.0.0.x stand in for hosts."""

from __future__ import annotations

import asyncio
import http.server
import ipaddress
import threading

import pytest

from hal.actions import jobs, releases, servers
from hal.agent import ops
from hal.models import Job
from tests.fleet.conftest import configure_module
from webfetch import fleet
from webfetch.guard import Allowance, GuardError, guard_url

pytestmark = pytest.mark.django_db


class Site:
    """A loopback HTTP server on a given 127.0.0.x address that records what it was asked."""

    def __init__(self, host: str, routes: dict[str, tuple[int, dict]]):
        self.hits: list[str] = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                site.hits.append(self.path)
                code, headers = routes.get(self.path, (404, {}))
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.srv = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def sites():
    made: list[Site] = []

    def make(host: str, routes: dict) -> Site:
        site = Site(host, routes)
        made.append(site)
        return site

    yield make
    for site in made:
        site.close()


def fleet_server(op, hostname: str, address: str):
    s = servers.check_register_server(actor=op, hostname=hostname, address=address)
    return servers.check_approve_server(actor=op, server=s.pk)


def run_hal_health(op, url: str) -> Job:
    configure_module(op, "portal", health_check_url=url)
    job = releases.check_module_health(actor=op, module="portal")
    jobs.run_hal_job.call(job.pk)
    job.refresh_from_db()
    return job


def test_fleet_address_is_allowed_and_a_redirect_within_the_fleet_followed(op, sites):
    target = sites("127.0.0.3", {"/ok": (200, {})})
    origin = sites("127.0.0.1", {"/health": (302, {"Location": target.url + "/ok"})})
    fleet_server(op, "web1.example.test", "127.0.0.1")
    fleet_server(op, "web3.example.test", "127.0.0.3")
    job = run_hal_health(op, origin.url + "/health")
    assert job.status == Job.SUCCEEDED, job.result
    assert job.result["status_code"] == 200 and job.result["final_url"] == target.url + "/ok"
    assert origin.hits == ["/health"] and target.hits == ["/ok"]


def test_redirect_to_a_non_fleet_address_is_refused(op, sites):
    outside = sites("127.0.0.2", {"/secret": (200, {})})
    origin = sites("127.0.0.1", {"/health": (302, {"Location": outside.url + "/secret"})})
    fleet_server(op, "web1.example.test", "127.0.0.1")
    job = run_hal_health(op, origin.url + "/health")
    assert job.status == Job.FAILED
    assert job.result["error_code"] == "blocked_address" and not job.result["healthy"]
    assert origin.hits == ["/health"]
    assert outside.hits == []  # the guard refused before connecting


def test_a_pending_or_isolated_server_is_not_part_of_the_fleet(op, sites):
    outside = sites("127.0.0.4", {"/x": (200, {})})
    origin = sites("127.0.0.1", {"/health": (302, {"Location": outside.url + "/x"})})
    fleet_server(op, "web1.example.test", "127.0.0.1")
    servers.check_register_server(actor=op, hostname="new.example.test", address="127.0.0.4")
    job = run_hal_health(op, origin.url + "/health")
    assert job.status == Job.FAILED and outside.hits == []


def test_the_configured_url_is_allowed_even_without_a_registered_server(op, sites):
    # Setting the URL is itself the high-risk, re-authenticated admin decision.
    site = sites("127.0.0.5", {"/health": (200, {})})
    job = run_hal_health(op, site.url + "/health")
    assert job.status == Job.SUCCEEDED, job.result
    assert site.hits == ["/health"]


def test_allowance_never_covers_metadata_or_unspecified_addresses():
    meta = ipaddress.ip_address("169.254.169.254")
    allowance = Allowance(
        addresses=frozenset({meta, ipaddress.ip_address("0.0.0.0")}),
        hosts=frozenset({"metadata.google.internal"}),
    )
    for url in ("http://169.254.169.254/latest", "http://0.0.0.0:8080/"):
        with pytest.raises(GuardError) as exc:
            asyncio.run(guard_url(url, allowance=allowance))
        assert exc.value.reason == "blocked_address"


def test_allowance_ignores_the_tests_only_loopback_switch(settings):
    settings.HAL_WEBFETCH_ALLOW_LOOPBACK = True
    allowance = Allowance(addresses=frozenset({ipaddress.ip_address("127.0.0.1")}))
    assert asyncio.run(guard_url("http://127.0.0.1:8080/", allowance=allowance)).port == 8080
    with pytest.raises(GuardError):
        asyncio.run(guard_url("http://127.0.0.2:8080/", allowance=allowance))


def test_fleet_allowance_lists_serving_servers_and_configured_urls(op):
    fleet_server(op, "web1.example.test", "10.1.2.3")
    fleet_server(op, "db1.internal", "")
    servers.check_register_server(actor=op, hostname="pending.example.test", address="10.9.9.9")
    configure_module(op, "portal", health_check_url="http://portal-vip.internal:8080/health")
    allowance = fleet.fleet_allowance()
    assert ipaddress.ip_address("10.1.2.3") in allowance.addresses
    assert ipaddress.ip_address("10.9.9.9") not in allowance.addresses
    assert {"web1.example.test", "db1.internal"} <= allowance.hosts
    assert ("portal-vip.internal", 8080) in allowance.origins


# --- the node agent: never follows a redirect ---------------------------------------------------


def test_agent_health_check_does_not_follow_redirects(sites):
    outside = sites("127.0.0.2", {"/secret": (200, {})})
    origin = sites("127.0.0.1", {"/health": (302, {"Location": outside.url + "/secret"})})
    result = ops.health_check(origin.url + "/health")
    assert result["status_code"] == 302 and result["redirect_to"] == outside.url + "/secret"
    assert outside.hits == []


# --- the seam: hal never imports webfetch; webfetch fills hal's hook ----------------------------


def test_hals_health_check_is_the_guarded_one_registered_by_webfetch():
    from hal.hooks.fleet_http import health_fetcher

    assert health_fetcher() is fleet.http_health_check


def test_without_a_registered_fetch_a_health_check_fails_closed(op, sites):
    from hal.hooks import fleet_http as seam

    site = sites("127.0.0.6", {"/health": (200, {})})
    registered = seam.health_fetcher()
    seam.unregister_health_fetcher()
    try:
        job = run_hal_health(op, site.url + "/health")
    finally:
        assert registered is not None
        seam.register_health_fetcher(registered)
    assert job.status == Job.FAILED
    assert job.error_code == "job_error" and "No guarded fetch is registered" in job.reason
    assert site.hits == []  # never an unguarded request
