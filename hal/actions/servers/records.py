"""Server records: lookup, input cleaning, events."""

from __future__ import annotations

import re
from typing import Any

from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.oneline import one_line
from hal.errors import InvalidInput, NotFound
from hal.live.events import OPS_GROUP, publish
from hal.models import Server
from hal.web.ids import as_id

# RFC 1123 host names (labels of letters, digits and hyphens), lower-cased on input.
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$"
)
AGENT_VERSION = re.compile(r"[A-Za-z0-9._+-]{1,40}")  # fullmatch: `$` lets "\n" through
ENROLMENT_TTL_DEFAULT = 3600


def resolve_server(ref: Any, *, include_deleted: bool = False) -> Server:
    """Find a server by Server, id or hostname; unknown → 404 `server_not_found`."""
    if isinstance(ref, Server):
        return ref
    qs = Server.objects.all() if include_deleted else Server.objects.exclude(status=Server.DELETED)
    server = None
    if (pk := as_id(ref)) is not None:  # str.isdigit() also takes "²", which int() refuses
        server = qs.filter(pk=pk).first()
    if server is None and isinstance(ref, str) and ref:
        server = qs.filter(hostname=ref.strip().lower()).order_by("-id").first()
    if server is None:
        raise NotFound(format_lazy(_("No server {ref!r}."), ref=ref), code="server_not_found")
    return server


def locked_server(server: Server) -> Server:
    return Server.objects.select_for_update().get(pk=server.pk)


def server_snapshot(server: Server) -> dict[str, Any]:
    return {"status": server.status, "reason": server.status_reason}


def publish_server(server: Server) -> None:
    publish(OPS_GROUP, "server.updated", server.as_dict())


def clean_hostname(hostname: Any) -> str:
    """Validate and normalise a hostname (lower case, RFC 1123)."""
    if not isinstance(hostname, str) or not _HOSTNAME.match(hostname.strip().lower()):
        raise InvalidInput(_("hostname must be a valid DNS host name."), code="invalid_hostname")
    return hostname.strip().lower()


def required_reason(value: Any) -> str:
    reason = clean_text(value, "reason", 500)
    if not reason:
        raise InvalidInput(_("Give a reason."), code="reason_required")
    return reason


def clean_text(value: Any, name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(format_lazy(_("{name} must be text."), name=name), code="invalid_input")
    text = value.strip()
    if len(text) > limit:
        raise InvalidInput(
            format_lazy(_("{name} is longer than {limit} characters."), name=name, limit=limit),
            code="invalid_input",
        )
    return text


def clean_line(value: Any, name: str, limit: int) -> str:
    """A one-line field (an address, a description, a note): no control characters."""
    return one_line(value, name, limit=limit)
