"""Read-side queries, permission-filtered (no state changes here): the audit log and
operators (this module), the fleet (`fleet`), the ops domain (`ops`), the checks behind
/api/health (`health`) and the live console counters that follow ops events (`counters`).

Imports the core, `web` (ids), `live` (events), `models` and `actions` (the actor and
permission helpers); views, tools and MCP read through it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, require_perm
from hal.errors import InvalidInput
from hal.models import AuditEntry

AUDIT_FILTERS = ("actor", "action", "target_type", "target_id", "since", "until", "result", "via")


def _when(value: str, name: str) -> datetime:
    parsed = parse_datetime(value)
    if parsed is None:
        raise InvalidInput(
            format_lazy(_("{name} must be an ISO 8601 date-time."), name=name),
            code="invalid_filter",
        )
    return parsed


def list_audit(actor: Actor, filters: dict[str, Any], *, limit: int = 100) -> QuerySet:
    """Audit entries matching the filters (actor, action prefix, target, time range)."""
    require_perm(actor, "view")
    qs = AuditEntry.objects.all()
    if value := filters.get("actor"):
        qs = qs.filter(actor_label=value)
    if value := filters.get("action"):
        qs = qs.filter(Q(action=value) | Q(action__startswith=f"{value}."))
    if value := filters.get("target_type"):
        qs = qs.filter(target_type=value)
    if value := filters.get("target_id"):
        qs = qs.filter(target_id=value)
    if value := filters.get("target"):
        qs = qs.filter(Q(target_label__icontains=value) | Q(target_id=value))
    if value := filters.get("result"):
        qs = qs.filter(result=value)
    if value := filters.get("via"):
        qs = qs.filter(via=value)
    if value := filters.get("since"):
        qs = qs.filter(created_at__gte=_when(value, "since"))
    if value := filters.get("until"):
        qs = qs.filter(created_at__lte=_when(value, "until"))
    if value := filters.get("before_id"):
        try:
            qs = qs.filter(id__lt=int(value))
        except ValueError:
            raise InvalidInput(_("before_id must be a number."), code="invalid_filter") from None
    return qs.order_by("-id")[: max(1, min(limit, 500))]
