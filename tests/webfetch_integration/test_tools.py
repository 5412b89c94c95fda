"""fetch_url (read on the allowlist, a proposal elsewhere, 2 per turn), web_search, web_metrics."""

from __future__ import annotations

import secrets

import pytest
from asgiref.sync import sync_to_async

from hal.actions.base import Actor
from hal.errors import ReauthRequired
from hal.models import AuditEntry, Proposal
from hal.tools import Tool, ToolArgs, get_tool, register_tool, run_tool_call, unregister_tool
from hal.tools.registry import READS_HAL
from tests.webfetch.test_search import tavily_server
from tests.webfetch_integration.conftest import add_page, ai_actor, approver, named

pytestmark = pytest.mark.django_db(transaction=True)

PROVENANCE_KEYS = {
    "providers_used",
    "domain",
    "fetch_ok",
    "depth",
    "content_type",
    "retrieved_at",
    "trust_tier",
}


def _allow(domain: str) -> None:
    from webfetch.models import FetchAllowDomain

    FetchAllowDomain.objects.create(domain=domain)


call = sync_to_async(run_tool_call)


@pytest.fixture
def names(resolver):
    resolver.table.update({"docs.allowed.test": ["127.0.0.1"], "elsewhere.test": ["127.0.0.1"]})
    return resolver


def test_fetch_url_is_listed_as_write_with_a_per_call_tier():
    tool = get_tool("fetch_url")
    assert tool.tier == "write" and tool.max_per_turn == 2
    assert "proposal" in tool.description.lower()
    assert get_tool("web_search").tier == "read" and get_tool("web_metrics").tier == "read"


async def test_allowlisted_domain_runs_as_a_read(server, allow_loopback, names, operator):
    await sync_to_async(_allow)("allowed.test")
    add_page(server, "/guide", "Guide", "Rotate logs weekly.")
    url = named(server, "docs.allowed.test", "/guide")
    outcome = await call(
        "fetch_url", {"url": url}, actor=ai_actor(operator), origin={"turn_id": "t1"}
    )
    assert outcome.ok and outcome.proposal is None
    result = outcome.result
    assert result["ok"] is True
    assert "Rotate logs weekly." in result["block"]
    assert result["block"].startswith("<web_page ")
    assert result["provenance"]["trust_tier"] == "curated"
    assert result["provenance"]["domain"] == "docs.allowed.test"
    assert await sync_to_async(Proposal.objects.count)() == 0


async def test_other_domain_becomes_a_proposal_then_fetches_once_approved(
    server, allow_loopback, names, operator
):
    await sync_to_async(_allow)("allowed.test")
    add_page(server, "/x", "X", "Outside page text.")
    url = named(server, "elsewhere.test", "/x?q=" + secrets.token_hex(4))
    outcome = await call(
        "fetch_url", {"url": url}, actor=ai_actor(operator), origin={"turn_id": "t1", "room_id": 9}
    )
    proposal = outcome.proposal
    assert proposal is not None and proposal.tier == "write" and proposal.status == "pending"
    assert proposal.target_identifier == url
    assert url in proposal.impact["summary"]
    assert proposal.arguments == {"url": url}
    assert server.requests == []  # nothing left HAL before an operator decided

    # Approval needs a recent re-auth, like every write.
    from hal.actions.proposals import check_approve_proposal

    with pytest.raises(ReauthRequired):
        await sync_to_async(check_approve_proposal)(
            actor=Actor(user=operator, via="api"), proposal_id=proposal.pk
        )
    assert server.requests == []
    done = await sync_to_async(check_approve_proposal)(
        actor=approver(operator), proposal_id=proposal.pk
    )
    assert done.status == "executed", (done.error_code, done.error_message)
    assert "Outside page text." in done.result["block"]
    assert done.result["provenance"]["trust_tier"] == "web"
    assert [p for p in server.paths() if p.startswith("/x")] == [url.split(str(server.port), 1)[1]]


async def test_a_lookalike_domain_is_not_allowlisted(server, allow_loopback, resolver, operator):
    resolver.table["notallowed.test"] = ["127.0.0.1"]
    await sync_to_async(_allow)("allowed.test")
    url = named(server, "notallowed.test", "/")
    outcome = await call("fetch_url", {"url": url}, actor=ai_actor(operator))
    assert outcome.proposal is not None


async def test_third_fetch_url_in_one_turn_is_refused(server, allow_loopback, names, operator):
    await sync_to_async(_allow)("allowed.test")
    for i in range(4):
        add_page(server, f"/p{i}", f"P{i}", f"page {i}")
    actor = ai_actor(operator)
    origin = {"turn_id": "42", "connection_id": None}
    first = await call(
        "fetch_url", {"url": named(server, "docs.allowed.test", "/p0")}, actor=actor, origin=origin
    )
    second = await call(
        "fetch_url", {"url": named(server, "elsewhere.test", "/p1")}, actor=actor, origin=origin
    )
    third = await call(
        "fetch_url", {"url": named(server, "docs.allowed.test", "/p2")}, actor=actor, origin=origin
    )
    assert first.ok and first.proposal is None
    assert second.proposal is not None  # a proposal counts as a call too
    assert not third.ok and third.error["code"] == "tool_call_limit"
    assert "/p2" not in server.paths()
    refused = await sync_to_async(
        AuditEntry.objects.filter(action="tools.call", error_code="tool_call_limit").count
    )()
    assert refused == 1
    # Another turn has its own two calls.
    other = await call(
        "fetch_url",
        {"url": named(server, "docs.allowed.test", "/p3")},
        actor=actor,
        origin={"turn_id": "43"},
    )
    assert other.ok and "page 3" in other.result["block"]


async def test_fetch_url_refuses_non_http_arguments(operator):
    for bad in ("file:///etc/passwd", "gopher://x.test/", "javascript:alert(1)", "http://"):
        outcome = await call("fetch_url", {"url": bad}, actor=ai_actor(operator))
        assert outcome.error["code"] == "invalid_arguments", bad
    assert await sync_to_async(Proposal.objects.count)() == 0


async def test_web_search_with_tavily_and_curated(
    server, allow_loopback, names, operator, settings
):
    from vault.api import put_secret
    from webfetch.models import CuratedSource

    key = secrets.token_urlsafe(24)
    await sync_to_async(put_secret)(
        purpose="search.tavily_key",
        owner_type="webfetch",
        owner_id="tavily",
        plaintext=key,
        actor=Actor.for_system("cli", "test"),
    )
    settings.HAL_TAVILY_BASE_URL = server.base
    add_page(server, "/disk", "Disk alarms", "How to read disk alarms.")
    add_page(server, "/guide", "Disk guide", "Curated disk guide.")
    tavily_server(
        server,
        [
            ("Disk alarms", named(server, "elsewhere.test", "/disk"), "snippet a", 0.9),
            ("Gone", named(server, "elsewhere.test", "/gone"), "snippet b", 0.4),
        ],
    )
    await sync_to_async(CuratedSource.objects.create)(
        domain="allowed.test",
        url=named(server, "docs.allowed.test", "/guide"),
        title="Disk guide",
        tags="disk, storage",
    )
    outcome = await call(
        "web_search", {"query": "disk alarms", "max_results": 5}, actor=ai_actor(operator)
    )
    assert outcome.ok, outcome.error
    data = outcome.result
    assert data["providers_used"] == ["curated", "tavily"]
    assert data["errors"] == {}
    auth = [r.headers.get("authorization") for r in server.requests if r.path == "/search"]
    assert auth == [f"Bearer {key}"]
    assert len(data["results"]) == 3
    for hit in data["results"]:
        assert set(hit["provenance"]) == PROVENANCE_KEYS
        assert hit["provenance"]["retrieved_at"]
        assert hit["provenance"]["providers_used"]
    by_url = {h["url"]: h for h in data["results"]}
    curated = by_url[named(server, "docs.allowed.test", "/guide")]
    assert curated["provenance"]["trust_tier"] == "curated"
    assert curated["provenance"]["depth"] == 1 and "Curated disk guide." in curated["text"]
    page = by_url[named(server, "elsewhere.test", "/disk")]
    assert page["provenance"] == {
        **page["provenance"],
        "domain": "elsewhere.test",
        "fetch_ok": True,
        "depth": 1,
        "content_type": "text/html",
        "trust_tier": "web",
    }
    gone = by_url[named(server, "elsewhere.test", "/gone")]
    assert gone["provenance"]["fetch_ok"] is False and gone["provenance"]["depth"] == 0
    assert gone["failure_reason"] == "http_4xx"
    assert key not in str(data)


async def test_web_search_without_a_tavily_key_uses_curated_only(operator):
    from webfetch.models import CuratedSource

    await sync_to_async(CuratedSource.objects.create)(
        domain="docs.example.org", title="Backup guide", tags="backup"
    )
    outcome = await call(
        "web_search", {"query": "backup", "max_results": 3}, actor=ai_actor(operator)
    )
    data = outcome.result
    assert data["providers_used"] == ["curated"]
    # Loopback is off and the name is not resolvable here: the page fetch fails honestly.
    (hit,) = data["results"]
    assert hit["provenance"]["trust_tier"] == "curated" and hit["provenance"]["depth"] == 0


def test_web_metrics_returns_metrics_and_budgets(operator):
    outcome = run_tool_call("web_metrics", {}, actor=ai_actor(operator))
    assert outcome.ok
    assert {"fetch_success_rate", "bytes_read", "cache_hit_rate", "domain_entropy"} <= set(
        outcome.result["metrics"]
    )
    assert "budgets" in outcome.result["budgets"]


class _EchoArgs(ToolArgs):
    word: str


def test_registry_per_call_tier_and_turn_limit(operator):
    calls = []

    def handler(actor, a, confirmation=None):
        calls.append(a["word"])
        return {"echo": a["word"]}

    register_tool(
        Tool(
            name="echo_tiered",
            tier="write",
            description="Echo a word; 'safe' is a read, anything else a proposal.",
            args=_EchoArgs,
            handler=handler,
            tier_for=lambda a: "read" if a["word"] == "safe" else "write",
            max_per_turn=1,
            hints=READS_HAL,
        )
    )
    try:
        actor = ai_actor(operator)
        assert run_tool_call("echo_tiered", {"word": "safe"}, actor=actor).result == {
            "echo": "safe"
        }
        assert run_tool_call("echo_tiered", {"word": "other"}, actor=actor).proposal is not None
        assert calls == ["safe"]
        assert run_tool_call(
            "echo_tiered", {"word": "safe"}, actor=actor, origin={"turn_id": "a"}
        ).ok
        refused = run_tool_call(
            "echo_tiered", {"word": "safe"}, actor=actor, origin={"turn_id": "a"}
        )
        assert refused.error["code"] == "tool_call_limit"
    finally:
        unregister_tool("echo_tiered")


async def test_an_open_redirect_on_an_allowlisted_site_cannot_leave_the_allowlist(
    server, allow_loopback, names, operator
):
    """A read-tier fetch runs unseen: a redirect to another domain is refused."""
    from tests.webfetch.test_pipeline import redirect

    await sync_to_async(_allow)("allowed.test")
    leak = "/collect?d=" + secrets.token_hex(6)
    add_page(server, leak, "Sink", "data received")
    redirect(server, "/go", named(server, "elsewhere.test", leak))
    outcome = await call(
        "fetch_url",
        {"url": named(server, "docs.allowed.test", "/go")},
        actor=ai_actor(operator),
        origin={"turn_id": "t-redirect"},
    )
    assert outcome.ok and outcome.proposal is None
    assert outcome.result["ok"] is False
    assert outcome.result["failure_reason"] == "redirect_blocked"
    assert [r.path for r in server.requests] == ["/robots.txt", "/go"]


async def test_an_approved_fetch_is_charged_to_the_connection_that_asked(
    server, allow_loopback, names, operator
):
    from hal.actions.proposals import check_approve_proposal
    from tests.webfetch_integration.conftest import make_connection
    from webfetch.models import BudgetUsage

    conn = await sync_to_async(make_connection)("asker")
    add_page(server, "/report", "Report", "Quarterly numbers.")
    outcome = await call(
        "fetch_url",
        {"url": named(server, "elsewhere.test", "/report")},
        actor=ai_actor(operator),
        origin={"turn_id": "t-charge", "connection_id": conn.pk},
    )
    done = await sync_to_async(check_approve_proposal)(
        actor=approver(operator), proposal_id=outcome.proposal.pk
    )
    assert done.status == "executed"
    usage = await BudgetUsage.objects.aget(connection_id=conn.pk)
    assert usage.fetches == 1 and usage.fetch_bytes > 0
