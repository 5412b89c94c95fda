"""What reaches a provider's wire: no canary secret, in any encoding (issue 44)."""

from __future__ import annotations

import pytest

from hal.tools.placeholders import PLACEHOLDER
from providers.base import ChatMessage, Redacted, ToolCall, ToolResult
from tests.fakes.script import Reply
from tests.redaction.canaries import embed, forms, shaped

from .helpers import collect, text_of


def wire_leaks(fake, values: dict[str, str]) -> list[str]:
    """Every canary form found in anything the fake received (bodies and headers)."""
    seen = "\n".join(
        r.raw_body.decode("utf-8", "replace") + repr(r.headers) + r.path for r in fake.requests
    )
    found = []
    for value in values.values():
        for part in value.splitlines():
            found += [form for form in forms(part) if form in seen]
    return found


@pytest.mark.django_db(transaction=True)
async def test_no_canary_reaches_the_wire_from_any_part_of_a_call(wire, settings):
    _, fake, factory = wire
    values = shaped()
    lines = embed(values)
    settings.SECRET_KEY = "django-" + values["assign"] * 3
    values["django"] = settings.SECRET_KEY
    fake.replies.push(Reply(text="Seen it."))
    provider, _ = factory()
    messages = [
        ChatMessage.user(lines["aws"] + "\n" + settings.SECRET_KEY, speaker="operator"),
        ChatMessage.assistant("Looking.", tool_calls=[ToolCall("c1", "get_job", {"id": 1})]),
        ChatMessage.results(ToolResult("c1", lines["url"] + "\n" + lines["pem"])),
        ChatMessage.user(f"[relay from beta]: {lines['github']} {lines['jwt']}", speaker="beta"),
        ChatMessage.user(lines["bearer"] + " " + lines["hal"]),
    ]
    events = await collect(
        provider.stream(system=lines["assign"], messages=messages, tools=[], model="m-1")
    )
    assert text_of(events) == "Seen it."
    assert wire_leaks(fake, values) == []
    (held,) = [e for e in events if isinstance(e, Redacted)]
    assert held.tool_call_ids == ("c1",)
    assert sum(held.counts.values()) == len(values)
    body = fake.requests[-1].raw_body.decode()
    assert len(set(PLACEHOLDER.findall(body))) == len(values)


@pytest.mark.django_db(transaction=True)
async def test_a_call_without_secrets_is_sent_unchanged(wire):
    _, fake, factory = wire
    fake.replies.push(Reply(text="ok"))
    provider, _ = factory()
    text = "web-1.example.com is up; sha256 " + "ab" * 32
    events = await collect(
        provider.stream(system="s", messages=[ChatMessage.user(text)], tools=[], model="m-1")
    )
    assert not [e for e in events if isinstance(e, Redacted)]
    assert text in fake.requests[-1].raw_body.decode()
