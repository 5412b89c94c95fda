"""Korean complete: every console page (listed from the URL confs) rendered for an operator
whose language is Korean shows no run of ASCII letters outside a tight allowlist.

What is exempt, and why:
- text inside <code>, <pre>, <kbd>, <samp>, <script>, <style>, <time>: code, identifiers,
  timestamps — machine text by design (error codes stay in `error.code`, shown as <code>);
- elements with a `lang` attribute other than ko (the language switcher names each
  language in its own tongue: "English") or `translate="no"` (the HTML attribute for
  content that is not UI text: what operators and models wrote, names, identifiers);
- identifiers and paths: a token with a digit, `_`, `.` or `/` in it (INC-3, sev2,
  HAL_SMTP_HOST, docs/DR.md, a release file name) is code, not prose;
- NAMES: what the operator or the fixtures named (usernames, hosts, modules, connections);
- WORDS: product and protocol names and units that Korean UIs write in Latin letters.
Anything else is an untranslated string: add it to the Korean catalogue.
"""

from __future__ import annotations

import re
import secrets
import string
import time
from html.parser import HTMLParser

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db

# Product, protocol and format names, units: written in Latin letters in Korean too.
WORDS = {
    "HAL",
    "AI",
    "API",
    "OAuth",
    "MCP",
    "URL",
    "URI",
    "DR",
    "CLI",
    "SMTP",
    "JSON",
    "ID",
    "UTC",
    "CPU",
    "PKCE",
    "HTTP",
    "HTTPS",
    "TLS",
    "SSH",
    "DNS",
    "Markdown",
    "Anthropic",
    "OpenAI",
    "Claude",
    "Code",
    # MCP clients the MCP access page names (Claude Desktop, VS Code, Cursor, MCP Inspector)
    "Desktop",
    "VS",
    "Cursor",
    "Inspector",
    "Tavily",
    "PostgreSQL",
    "SQLite",
    "Redis",
    "sha",
    "v",
    "s",
    "ms",
    "KB",
    "MB",
    "GB",
    "px",
    "min",
    "h",
    "d",
    "ok",
    "TOTP",
}
# Code words quoted inside translated sentences (a command, a JSON key the operator types):
# EHLO (the SMTP greeting HAL checks), argv (the restart command's argument list), vN and
# the runbook scope keys id/servers/jobs (what a model cites and an operator writes).
WORDS |= {"EHLO", "argv", "vN", "id", "servers", "jobs", "DuckDuckGo", "bits"}
WORDS |= {"Prometheus", "Alertmanager", "Grafana", "HMAC"}  # product names (alerts/)
# Names the fixtures below give to things (shown as names, never translated).
NAMES = {"ops", "web", "payments", "alpha", "runbook"}
EXEMPT_TAGS = {"code", "pre", "kbd", "samp", "script", "style", "time", "textarea"}
VOID = {"br", "hr", "img", "input", "link", "meta", "source", "wbr", "col", "area", "base"}
TOKEN = re.compile(r"[A-Za-z0-9_./:-]*[A-Za-z]{2,}[A-Za-z0-9_./:-]*")
# A token with a digit, `_`, `.` or `/` is code or a path; an MCP client's id is HAL's own
# identifier even when its random part happens to be letters only.
IDENTIFIER = re.compile(r"[0-9_./]|^hal-client-")

# Routes that are not pages to look at (actions answered with a redirect, POST only).
NOT_PAGES = {
    "logout",  # logs out
    "language",  # POST: switch language
    "archive_delete",  # POST actions on an archive
    "archive_restore",
    "archive_continue",
    "server_op",  # POST operations
    "module_op",
    "job_op",
    "release_upload",  # POST upload
    "server_enrolment_token",  # POST: issue a token
    "oauth_callback",  # the provider's redirect target
    "oidc_login",  # SSO: redirects to the identity provider
    "oidc_callback",  # SSO: the identity provider's redirect target
    "oidc_reauth",  # SSO step-up: redirects to the identity provider
    "server_register",  # POST only
    "form",  # POST: start or stop an incident's investigation (investigations/)
    "postmortem_action",  # POST: catch up, edit or publish a postmortem (alerts/)
    "export",  # a postmortem's Markdown file, not a page (alerts/)
    # MCP OAuth: JSON metadata and endpoints for clients (the consent page, oauth_authorize,
    # is a page: `objects` gives it a registered client's request).
    "oauth_protected_resource",
    "oauth_protected_resource_mcp",
    "oauth_authorization_server",
    "oauth_token",
    "oauth_register",
    "oauth_revoke",
    "share_new",  # POST: create a chat share link (chatrooms/share.py)
    "share_revoke",  # POST: revoke one
}


class Leftovers(HTMLParser):
    """Collect ASCII words from text nodes that are not exempt."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        lang = dict(attrs).get("lang")
        exempt = (
            tag in EXEMPT_TAGS
            or (lang is not None and not lang.startswith("ko"))
            or dict(attrs).get("translate") == "no"
        )
        inherited = bool(self.stack and self.stack[-1][1])
        self.stack.append((tag, exempt or inherited))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if self.stack and self.stack[-1][1]:
            return
        for token in TOKEN.findall(data):
            if IDENTIFIER.search(token):
                continue
            for word in re.findall(r"[A-Za-z]{2,}", token):
                if word not in WORDS and word not in NAMES:
                    self.found.append(word)


def leftovers(html: str) -> list[str]:
    parser = Leftovers()
    parser.feed(html)
    return parser.found


def page_routes() -> dict[str, str]:
    """name → route of every HTML route (not API, admin, static, WebSocket)."""
    out: dict[str, str] = {}

    def walk(patterns, prefix: str = "") -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                route = prefix + str(p.pattern)
                if not route.startswith(("api/", "admin", "static", "ws", "healthz")):
                    out[p.name or route] = "/" + route

    walk(get_resolver().url_patterns)
    return out


@pytest.fixture
def korean(client, operator):
    from hal.actions.base import Actor
    from hal.actions.operators import check_set_language

    check_set_language(actor=Actor(user=operator, via="web"), language="ko")
    client.force_login(operator)
    session = client.session
    session["hal_language"] = "ko"  # what logging in puts there from the profile
    session.save()
    return client


@pytest.fixture
def objects(operator):
    """One of each thing a detail page shows, through the actions where that is cheap."""
    from chatrooms.actions import ensure_rooms
    from chatrooms.archive import do_archive_messages
    from chatrooms.models import Message
    from hal.actions.base import Actor
    from hal.models import Incident, Job, Module, Server
    from runbooks.actions import check_create_runbook

    server = Server.objects.create(hostname="web", status="active")
    module = Module.objects.create(name="payments", description="")
    job = Job.objects.create(kind="restart", module=module, server=server)
    incident = Incident.objects.create(severity="sev2", title="payments", opened_by="ops")
    # Every kind of timeline entry an operator adds (issue 41: the kinds and paths showed
    # in English); their words are the operator's ("payments").
    from hal.actions.incidents import (
        check_annotate_incident,
        check_close_incident,
        check_reopen_incident,
    )
    from hal.actions.incidents_escalate import check_escalate_incident

    ops = Actor(user=operator, via="web", reauth_at=time.time())
    check_annotate_incident(actor=ops, incident_id=incident.pk, text="payments")
    check_escalate_incident(actor=ops, incident_id=incident.pk, reason="payments")
    check_close_incident(actor=ops, incident_id=incident.pk, resolution="payments")
    check_reopen_incident(
        actor=Actor.for_system("cli", "ops"), incident_id=incident.pk, reason="payments"
    )
    room = ensure_rooms(operator)[0]
    Message.objects.create(room=room, author_kind="operator", author="ops", text="**hello**")
    _, archive = do_archive_messages(room)
    runbook = check_create_runbook(
        actor=Actor(user=operator, via="web", reauth_at=time.time()), title="runbook", body="x"
    )
    return {
        "oauth_authorize": _consent_request(),
        "shared": _share_link(operator),
        "server_detail": f"/servers/{server.pk}/",
        "module_detail": f"/modules/{module.name}/",
        "job_detail": f"/jobs/{job.pk}/",
        "incident_detail": f"/incidents/{incident.pk}/",
        "room": f"/incidents/{incident.pk}/room/",  # the investigation room (investigations/)
        "archive_detail": f"/ai/archive/{archive.pk}",
        "room_transcript": f"/ai/rooms/{room.pk}/transcript",
        "detail": f"/runbooks/{runbook.pk}/",
    }


def _consent_request() -> str:
    """The consent page's URL: a registered client's pending authorization request (as an
    MCP client sends it, registered through /oauth/register: tests/mcp/test_mcp_oauth.py)."""
    from tests.mcp.test_mcp_oauth import Client, authorize_url, pkce, register

    # A name the client gives itself, in WORDS (a real client's: the MCP access page names it).
    registered = register(Client(), client_name="MCP Inspector")
    return authorize_url(registered["client_id"], pkce()[1])


def _share_link(operator) -> str:
    """A share link another operator made for this one, of a room with words in it."""
    from django.contrib.auth import get_user_model

    from chatrooms.actions import ensure_rooms
    from chatrooms.models import Message
    from chatrooms.share import check_create_share, url_of
    from hal.actions.base import Actor
    from tests.conftest import make_user

    colleague = make_user(get_user_model(), "web", superuser=True)
    room = ensure_rooms(colleague)[0]
    Message.objects.create(room=room, author_kind="operator", author="web", text="payments")
    Message.objects.create(room=room, author_kind="model", author="alpha", text="payments")
    _, token = check_create_share(
        actor=Actor(user=colleague, via="web"), recipient=operator.get_username(), room_id=room.pk
    )
    return url_of(token)


# Pages that need the host their URLs name: authlib serves OAuth over http only on loopback.
HOSTS = {"oauth_authorize": "127.0.0.1"}


def test_every_page_is_korean(korean, objects):
    routes = page_routes()
    pages: dict[str, str] = {}
    for name, route in routes.items():
        if name in NOT_PAGES:
            continue
        if name in objects:
            pages[name] = objects[name]
        else:
            assert "<" not in route, f"give the Korean test an object for {name} ({route})"
            pages[name] = route
    assert {"overview", "settings", "ops_ai", "archive", "proposals", "audit"} <= set(pages)
    assert {"oauth_authorize", "shared"} <= set(pages)
    problems: dict[str, list[str]] = {}
    for name, url in sorted(pages.items()):
        response = korean.get(url, HTTP_HOST=HOSTS.get(name, "testserver"))
        assert response.status_code == 200, (name, url, response.status_code)
        assert 'lang="ko"' in response.content.decode()[:400], name
        found = leftovers(response.content.decode())
        if found:
            problems[url] = sorted(set(found))
    assert problems == {}, "\n".join(f"{u}: {w}" for u, w in problems.items())


def test_the_checker_catches_english():
    assert leftovers("<p>안녕 pending</p>") == ["pending"]
    assert leftovers("<p><code>unknown_addressee</code> 오류</p>") == []
    assert leftovers('<option lang="en">English</option>') == []
    assert leftovers("<p>HAL · 5 s · @alpha · INC-3 · docs/DR.md</p>") == []
    assert leftovers('<td translate="no">Customer portal</td>') == []


def test_the_checker_reads_an_oauth_client_id_as_an_identifier():
    """A registered MCP client's id (`hal/actions/mcp_oauth.py`: "hal-client-" and 16 random
    bytes, urlsafe) names a thing on the overview and the audit log. About one id in forty
    has no digit or `_` (an id is a word list to a reader of prose): the page test failed
    then (CI, 2026-12-07: "client", "hal" and the random part as English words)."""
    letters_only = "hal-client-" + "".join(
        secrets.choice(string.ascii_letters + "-") for _ in range(22)
    )
    assert leftovers(f"<td>{letters_only}</td>") == []
    assert leftovers("<td>the client</td>") == ["the", "client"]
