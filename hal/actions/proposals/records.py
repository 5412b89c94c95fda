"""Proposal records: expiry, the tool behind one, integrity, origins, precheck, events."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.confirm import params_hash
from hal.actions.precheck import PrecheckResult, run_precheck
from hal.errors import Conflict, HalError, InvalidInput
from hal.live.events import OPS_GROUP, publish
from hal.models import Proposal

DEFAULT_EXPIRY_MINUTES = 60


def expiry_minutes() -> int:
    """Minutes a pending proposal stays approvable (setting proposals.expiry_minutes)."""
    try:
        from hal.actions.settings import get_setting

        return int(get_setting("proposals.expiry_minutes"))
    except (ImportError, HalError):
        return int(getattr(settings, "HAL_PROPOSAL_EXPIRY_MINUTES", DEFAULT_EXPIRY_MINUTES))


def room_group(room_id: Any) -> str:
    """The channel-layer group of one chat room."""
    return f"room.{room_id}"


def publish_proposal(proposal: Proposal, event: str) -> None:
    # Every console gets the summary (the shared approval queue); operators allowed to see
    # the details fetch them from the API. The room's group is its owner's only. The
    # precheck is not sent: its message is rendered in each reader's language by the API.
    origin = origins_for([proposal]).get(proposal.pk)
    publish(OPS_GROUP, event, {**proposal.as_dict(details=False), "origin": origin})
    if proposal.room_id is not None:
        publish(room_group(proposal.room_id), event, {**proposal.as_dict(), "origin": origin})


def find_tool(name: str) -> Any:
    from hal.tools.registry import get_tool

    tool = get_tool(name)
    if tool is None:
        raise InvalidInput(
            format_lazy(_("There is no tool {name!r}."), name=name), code="unknown_tool"
        )
    return tool


_TIER_RANK = {"read": 0, Proposal.WRITE: 1, Proposal.HIGH_RISK: 2}


def verify_integrity(proposal: Proposal, tool: Any) -> dict[str, Any]:
    """The proposal's arguments, re-validated, if the stored row is still what was proposed.

    Every tier, before any confirmation step or approval: the arguments must still match
    their sha256 and the tool's schema, and the tier and action code must still be the
    tool's (a row lowered from high_risk to write would skip the three steps)."""
    arguments = proposal.arguments if isinstance(proposal.arguments, dict) else None
    clean: dict[str, Any] | None = None
    if arguments is not None and params_hash(arguments) == proposal.arguments_sha256:
        try:
            clean = tool.validate(arguments)
        except Exception:  # pydantic.ValidationError: the stored arguments are not a call
            clean = None
    if (
        clean is None
        or arguments is None  # never, when clean is set; `!=` below would widen clean to None
        or clean != arguments
        or proposal.tier not in (Proposal.WRITE, Proposal.HIGH_RISK)
        or _TIER_RANK[proposal.tier] < _TIER_RANK.get(tool.call_tier(clean), 2)
        or (proposal.tier == Proposal.HIGH_RISK and proposal.action_code != tool.action_code)
    ):
        raise Conflict(
            _(
                "This proposal's stored arguments no longer match what the model proposed; "
                "it will not run. Reject it."
            ),
            code="proposal_tampered",
        )
    return clean


def proposal_precheck(proposal: Proposal) -> PrecheckResult | None:
    """Would the proposal's action be refused now? None when not pending or not checkable.

    Runs the action's registered precheck (hal.actions.precheck) with the proposal's
    arguments: the same state checks as its check_*, without running anything."""
    if proposal.status != Proposal.PENDING or not proposal.action_code:
        return None
    if not isinstance(proposal.arguments, dict):
        return None
    return run_precheck(proposal.action_code, proposal.arguments)


def origins_for(rows: list[Proposal]) -> dict[int, dict[str, Any]]:
    """Who proposed each proposal: the model (@connection) and whose room, which room.

    `{"model": "gpt", "room_kind": "unified"|"individual", "room_title": ...,
    "room_owner": "admin"}` — with None for what is unknown (a deleted room or connection,
    or a proposal made outside a room)."""
    room_ids = {p.room_id for p in rows if p.room_id is not None}
    conn_ids = {p.connection_id for p in rows if p.connection_id is not None}
    rooms: dict[int, Any] = {}
    names: dict[int, str] = {}
    if room_ids and apps.is_installed("chatrooms"):
        room_model = apps.get_model("chatrooms", "Room")
        for row in room_model.objects.filter(pk__in=room_ids).select_related(
            "operator", "connection"
        ):
            rooms[row.pk] = row
    if conn_ids and apps.is_installed("providers"):
        connection_model = apps.get_model("providers", "AIConnection")
        names = dict(connection_model.objects.filter(pk__in=conn_ids).values_list("pk", "name"))
    owners: dict[int, str | None] = {
        p.requested_by_id: None for p in rows if p.requested_by_id and p.room_id not in rooms
    }
    if owners:
        owners.update(
            get_user_model().objects.filter(pk__in=list(owners)).values_list("pk", "username")
        )
    out: dict[int, dict[str, Any]] = {}
    for p in rows:
        room = rooms.get(p.room_id) if p.room_id is not None else None
        owner = owners.get(p.requested_by_id) if p.requested_by_id is not None else None
        out[p.pk] = {
            "model": names.get(p.connection_id) if p.connection_id is not None else None,
            "room_kind": room.kind if room else None,
            "room_title": room.display_title() if room else None,
            "room_owner": (room.operator.get_username() if room and room.operator_id else owner)
            or p.requested_label
            or None,
        }
    return out
