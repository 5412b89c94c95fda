"""One model answer without tools (a status, a postmortem draft): the investigator's
connection, its input redacted like every model call, its tokens charged to the connection."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from hal.errors import Conflict


def writer_connection() -> Any:
    """The connection that writes (the incident investigator's), or writer_off."""
    from chatrooms.integration import addressable
    from investigations.actions import OFF, investigator_setting
    from providers.models import AIConnection

    choice = investigator_setting()
    connection = (
        AIConnection.objects.filter(pk=int(choice)).first()
        if choice != OFF and choice.isdigit()
        else None
    )
    if connection is None or not addressable(connection):
        raise Conflict(
            _("No model writes for incidents: set ai.incident_investigator to a connection."),
            code="writer_off",
        )
    return connection


async def write(connection: Any, system: str, prompt: str, scope: str) -> str:
    """The model's text for `prompt` (no tools: nothing it says can run anything)."""
    from chatrooms.integration import provider_for, record_usage
    from providers import redaction
    from providers.base import ChatMessage, TextDelta, Usage

    redaction.set_scope(scope)
    provider = provider_for(connection)
    text: list[str] = []
    used = [0, 0]
    iterator = aiter(
        provider.stream(
            system=system,
            messages=[ChatMessage.user(prompt)],
            tools=[],
            model=connection.model,
            operator=None,
        )
    )
    try:
        async for event in iterator:
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, Usage):
                used[0] += event.input_tokens
                used[1] += event.output_tokens
    finally:
        closer = getattr(iterator, "aclose", None)
        if closer is not None:
            await closer()
    if used[0] or used[1]:
        await record_usage(int(connection.pk), used[0], used[1], model=connection.model)
    return "".join(text).strip()
