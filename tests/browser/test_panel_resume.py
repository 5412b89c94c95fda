"""The panel's socket dropped mid-reply, in a real browser: it reconnects, asks to resume,
and a reply streamed across the gap is shown whole and in order before it completes."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.bounds import WAIT_MS
from tests.browser.conftest import login
from tests.browser.helpers import connect_model, wait_until
from tests.fakes.script import Reply

pytestmark = pytest.mark.django_db(transaction=True)

READY = "#ai-panel[data-ready=true]"
LIVE = "#ai-panel[data-live=true]"
DEAD = "#ai-panel[data-live=false]"


def each_event(handle):
    """A relay's handler of server messages: the panel asks for `hal.events` (several events
    in one message); the relay judges and passes each event on its own, which the panel
    reads as well."""

    def unbundle(raw: str) -> None:
        message = json.loads(raw)
        if message.get("type") == "events":
            for event in message["events"]:
                handle(json.dumps(event))
        else:
            handle(raw)

    return unbundle


class SocketRelay:
    """Stands between the panel and /ws/ai/: the first socket is cut after three deltas;
    on the second, the first answers to a resume are lost (so the panel meets a gap in
    the deltas and must ask again); `message.completed` is held until released."""

    def __init__(self) -> None:
        self.sockets = 0
        self.deltas_before_cut = 0
        self.sent: list[dict] = []  # what the panel sent, over every socket
        self.lost: list[str] = []  # types of the answers this relay dropped
        self.held: list[tuple[object, str]] = []  # (socket, frame) of message.completed
        self.released = False  # after release(), a message.completed passes at once

    def route(self, ws) -> None:
        number = self.sockets
        self.sockets += 1
        server = ws.connect_to_server()

        def from_page(frame: str) -> None:
            self.sent.append({**json.loads(frame), "socket": number})
            server.send(frame)

        def from_server_one(frame: str) -> None:
            kind = json.loads(frame).get("type")
            if number == 0 and kind == "message.delta":
                self.deltas_before_cut += 1
                if self.deltas_before_cut > 3:
                    return
                ws.send(frame)
                if self.deltas_before_cut == 3:
                    ws.close()  # the network drops; the reply goes on streaming
                    server.close()
                return
            if number == 1 and kind in ("resume", "message.snapshot") and kind not in self.lost:
                self.lost.append(kind)
                return
            if kind == "message.completed" and not self.released:
                self.held.append((ws, frame))
                return
            ws.send(frame)

        ws.on_message(from_page)
        server.on_message(each_event(from_server_one))

    def release(self) -> None:
        # The reply's whole text can be shown before its end has left the server (the end
        # follows the turn's last DB trip): an end that arrives after this passes too.
        self.released = True
        for ws, frame in self.held:
            ws.send(frame)


def test_a_reply_streamed_across_a_dropped_socket_is_shown_whole(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    relay = SocketRelay()
    page.route_web_socket("**/ws/ai/", relay.route)
    # Long enough to still be streaming after the panel's reconnect (0.5 s after the cut).
    full = "Alpha reads the fleet: " + " ".join(f"server{i} answers." for i in range(120))
    fake_anthropic.replies.push(Reply(text=full, token_delay=0.04))
    page.goto(base + "/")
    page.wait_for_selector(READY, state="attached")
    page.wait_for_selector(LIVE, state="attached")
    page.fill("#ai-input", "Read the fleet.")
    page.press("#ai-input", "Enter")

    reply = page.locator("#ai-log .ai-msg.from-model")
    page.wait_for_selector(DEAD, state="attached", timeout=WAIT_MS)
    page.wait_for_selector(LIVE, state="attached", timeout=WAIT_MS)
    # The whole text arrives through resume, snapshot and deltas alone: the completed
    # message, which would carry it too, is held back.
    expect(reply.locator(".ai-text")).to_have_text(full, timeout=WAIT_MS)
    expect(reply).to_have_attribute("data-status", "streaming")
    assert relay.lost == ["resume", "message.snapshot"]
    resumes = [m for m in relay.sent if m.get("type") == "resume"]
    # The first socket resumed at its open, from what the history showed (nothing
    # streaming yet); then one resume when the socket came back, one when a delta showed
    # the gap.
    assert [(m["socket"], m["open"]) for m in resumes[:1]] == [(0, [])], relay.sent
    resumes = [m for m in resumes if m["socket"] > 0]
    assert len(resumes) == 2, relay.sent
    reply_id = int(reply.get_attribute("data-message-id"))
    room_id, last_seen = next(iter(resumes[0]["rooms"].items()))
    assert last_seen == reply_id and room_id.isdigit()

    relay.release()
    expect(reply).to_have_attribute("data-status", "complete", timeout=WAIT_MS)
    expect(reply.locator(".ai-text")).to_have_text(full)


class SlowReconnect:
    """Cuts the first socket after two deltas and keeps the page offline until `back` is
    set: the reply finishes while no socket listens, so its `message.completed` is lost."""

    def __init__(self) -> None:
        self.sockets = 0
        self.sent: list[dict] = []
        self.back = False

    def route(self, ws) -> None:
        number = self.sockets
        self.sockets += 1
        if number > 0 and not self.back:
            ws.close()  # still offline: the panel retries with backoff
            return
        server = ws.connect_to_server()
        deltas = [0]

        def from_page(frame: str) -> None:
            self.sent.append({**json.loads(frame), "socket": number})
            server.send(frame)

        def from_server(frame: str) -> None:
            if number == 0 and json.loads(frame).get("type") == "message.delta":
                deltas[0] += 1
                if deltas[0] > 2:
                    return
                ws.send(frame)
                if deltas[0] == 2:
                    ws.close()
                    server.close()
                return
            ws.send(frame)

        ws.on_message(from_page)
        server.on_message(from_server)


def test_a_reply_that_finished_while_the_socket_was_away_shows_complete(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    relay = SlowReconnect()
    page.route_web_socket("**/ws/ai/", relay.route)
    full = "Alpha is done: " + " ".join(f"item{i}." for i in range(30))
    fake_anthropic.replies.push(Reply(text=full, token_delay=0.02))
    page.goto(base + "/")
    page.wait_for_selector(READY, state="attached")
    page.wait_for_selector(LIVE, state="attached")
    page.fill("#ai-input", "Finish while I am away.")
    page.press("#ai-input", "Enter")

    reply = page.locator("#ai-log .ai-msg.from-model")
    page.wait_for_selector(DEAD, state="attached", timeout=WAIT_MS)
    expect(reply).to_have_attribute("data-status", "streaming")
    # Offline until the reply is complete in the database.
    from chatrooms.models import Message

    reply_id = int(reply.get_attribute("data-message-id"))
    # (page.wait_for_timeout lets Playwright run the relay meanwhile; it returns None.)
    wait_until(
        lambda: (
            Message.objects.get(pk=reply_id).status == Message.COMPLETE
            or page.wait_for_timeout(100)
        )
    )
    relay.back = True
    expect(reply).to_have_attribute("data-status", "complete", timeout=WAIT_MS)
    expect(reply.locator(".ai-text")).to_have_text(full)
    # The socket that came back (the first one resumed at its open, nothing streaming).
    resume = next(m for m in relay.sent if m.get("type") == "resume" and m["socket"] > 0)
    assert resume["open"] == [reply_id]


class ToolsLostRelay:
    """The first socket never passes `message.tools` and is cut after two deltas; the next
    one passes everything but `message.completed`, held until released."""

    def __init__(self) -> None:
        self.sockets = 0
        self.held: list[tuple[object, str]] = []
        self.released = False  # after release(), a message.completed passes at once

    def route(self, ws) -> None:
        number = self.sockets
        self.sockets += 1
        server = ws.connect_to_server()
        deltas = [0]

        def from_server_one(frame: str) -> None:
            kind = json.loads(frame).get("type")
            if number == 0:
                if kind == "message.tools":
                    return
                if kind == "message.delta":
                    deltas[0] += 1
                    if deltas[0] > 2:
                        return
                    ws.send(frame)
                    if deltas[0] == 2:
                        ws.close()
                        server.close()
                    return
            if kind == "message.completed" and not self.released:
                self.held.append((ws, frame))
                return
            ws.send(frame)

        ws.on_message(server.send)
        server.on_message(each_event(from_server_one))

    def release(self) -> None:
        # The reply's whole text can be shown before its end has left the server (the end
        # follows the turn's last DB trip): an end that arrives after this passes too.
        self.released = True
        for ws, frame in self.held:
            ws.send(frame)


def test_a_resumed_streaming_reply_shows_the_tool_chips_it_missed(
    live_asgi, page_factory, operator, fake_anthropic, provider_api_key
):
    from tests.fakes.script import ScriptedToolCall

    base = live_asgi.url
    page = page_factory()
    login(page, base, operator)
    connect_model(page, base, operator, "alpha", fake_anthropic, provider_api_key)
    relay = ToolsLostRelay()
    page.route_web_socket("**/ws/ai/", relay.route)
    full = "The fleet: " + " ".join(f"server{i} answers." for i in range(120))
    fake_anthropic.replies.push(
        Reply(text="", tool_calls=[ScriptedToolCall("list_servers", {})]),
        Reply(text=full, token_delay=0.04),
    )
    page.goto(base + "/")
    page.wait_for_selector(READY, state="attached")
    page.wait_for_selector(LIVE, state="attached")
    page.fill("#ai-input", "Which servers are there?")
    page.press("#ai-input", "Enter")
    page.wait_for_selector(DEAD, state="attached", timeout=WAIT_MS)
    page.wait_for_selector(LIVE, state="attached", timeout=WAIT_MS)
    # The chip's `message.tools` never reached the panel; the resume's snapshot brings it
    # while the reply still streams (its completion, which carries it too, is held).
    streaming = page.locator("#ai-log .ai-msg.from-model[data-status=streaming]")
    expect(streaming.locator(".ai-tool-chip.ok", has_text="list_servers")).to_be_visible(
        timeout=WAIT_MS
    )
    expect(streaming.locator(".ai-text")).to_have_text(full, timeout=WAIT_MS)
    wait_until(lambda: relay.held or page.wait_for_timeout(100))  # the completion is held
    relay.release()
    done = page.locator("#ai-log .ai-msg.from-model[data-status=complete]")
    expect(done.locator(".ai-tool-chip", has_text="list_servers")).to_have_count(1, timeout=WAIT_MS)
