"""Reading proposals: lists, what each operator may see of them, who proposed them, and
whether they can still succeed (the action's precheck).

The approval queue is shared, but a proposal's arguments, impact details and result are
room content: only operators who may approve its tier (and the operator in whose room it
was proposed) see them; everyone else gets the summary view (`Proposal.as_dict`).
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, require_perm
from hal.actions.precheck import PrecheckResult, run_precheck
from hal.errors import InvalidInput
from hal.models import Proposal


def list_proposals(
    actor: Actor, *, status: str = "", room_id: Any = None, limit: int = 100
) -> list[Proposal]:
    """Proposals, newest first (due pending ones are expired first)."""
    from hal.actions.proposals import sweep_expired_proposals

    require_perm(actor, "view")
    sweep_expired_proposals()
    qs = Proposal.objects.all()
    if status:
        if status not in dict(Proposal.STATUS_CHOICES):
            raise InvalidInput(_("Unknown proposal status."), code="invalid_filter")
        qs = qs.filter(status=status)
    if room_id not in (None, ""):
        try:
            qs = qs.filter(room_id=int(room_id))
        except (TypeError, ValueError):
            raise InvalidInput(_("room_id must be a number."), code="invalid_filter") from None
    return list(qs.order_by("-id")[: max(1, min(int(limit), 500))])


def get_proposal(actor: Actor, proposal_id: Any) -> Proposal:
    """One proposal (404 proposal_not_found)."""
    from hal.actions.proposals import load_proposal

    require_perm(actor, "view")
    return load_proposal(proposal_id)


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
        for room in room_model.objects.filter(pk__in=room_ids).select_related(
            "operator", "connection"
        ):
            rooms[room.pk] = room
    if conn_ids and apps.is_installed("providers"):
        connection_model = apps.get_model("providers", "AIConnection")
        names = dict(connection_model.objects.filter(pk__in=conn_ids).values_list("pk", "name"))
    owners = {p.requested_by_id: None for p in rows if p.requested_by_id and p.room_id not in rooms}
    if owners:
        owners.update(
            get_user_model().objects.filter(pk__in=list(owners)).values_list("pk", "username")
        )
    out: dict[int, dict[str, Any]] = {}
    for p in rows:
        room = rooms.get(p.room_id)
        out[p.pk] = {
            "model": names.get(p.connection_id),
            "room_kind": room.kind if room else None,
            "room_title": room.display_title() if room else None,
            "room_owner": (room.operator.get_username() if room else owners.get(p.requested_by_id))
            or p.requested_label
            or None,
        }
    return out


def proposals_json(actor: Actor, rows: list[Proposal]) -> list[dict[str, Any]]:
    """Proposals as this operator may see them, with who proposed them and, for pending
    ones, their precheck (`{"ok", "code", "message"}` in the reader's language)."""
    origins = origins_for(rows)
    out = []
    for proposal in rows:
        visible = actor.system or proposal.details_visible_to(actor.user)
        data = proposal.as_dict(details=visible)
        data["origin"] = origins.get(proposal.pk)
        check = proposal_precheck(proposal)
        data["precheck"] = check.as_dict() if check is not None else None
        out.append(data)
    return out


def proposal_json(actor: Actor, proposal: Proposal) -> dict[str, Any]:
    """One proposal as this operator may see it (see `proposals_json`)."""
    return proposals_json(actor, [proposal])[0]
