"""Reading proposals: lists, what each operator may see of them, who proposed them, and
whether they can still succeed (the action's precheck).

The approval queue is shared, but a proposal's arguments, impact details and result are
room content: only operators who may approve its tier (and the operator in whose room it
was proposed) see them; everyone else gets the summary view (`Proposal.as_dict`).
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, require_perm
from hal.actions.proposals.lifecycle import load_proposal, sweep_expired_proposals
from hal.actions.proposals.records import origins_for, proposal_precheck
from hal.errors import InvalidInput
from hal.hooks.proposals import proposal_extras
from hal.models import Proposal
from hal.web.ids import parse_id


def list_proposals(
    actor: Actor, *, status: str = "", room_id: Any = None, limit: int = 100
) -> list[Proposal]:
    """Proposals, newest first (due pending ones are expired first)."""
    require_perm(actor, "view")
    sweep_expired_proposals()
    qs = Proposal.objects.all()
    if status:
        if status not in dict(Proposal.STATUS_CHOICES):
            raise InvalidInput(_("Unknown proposal status."), code="invalid_filter")
        qs = qs.filter(status=status)
    if room_id not in (None, ""):
        room = parse_id(room_id, code="invalid_filter", message=_("room_id must be a number."))
        qs = qs.filter(room_id=room)
    return list(qs.order_by("-id")[: max(1, min(int(limit), 500))])


def get_proposal(actor: Actor, proposal_id: Any) -> Proposal:
    """One proposal (404 proposal_not_found)."""
    require_perm(actor, "view")
    return load_proposal(proposal_id)


def proposals_json(actor: Actor, rows: list[Proposal]) -> list[dict[str, Any]]:
    """Proposals as this operator may see them, with who proposed them and, for pending
    ones, their precheck (`{"ok", "code", "message"}` in the reader's language)."""
    origins = origins_for(rows)
    shown = {p.pk: actor.system or p.details_visible_to(actor.user) for p in rows}
    extras = proposal_extras(rows, shown)  # e.g. "review" (the second opinion)
    out = []
    for proposal in rows:
        visible = shown[proposal.pk]
        data = {**proposal.as_dict(details=visible), **extras.get(proposal.pk, {})}
        data["origin"] = origins.get(proposal.pk)
        check = proposal_precheck(proposal)
        data["precheck"] = check.as_dict() if check is not None else None
        out.append(data)
    return out


def proposal_json(actor: Actor, proposal: Proposal) -> dict[str, Any]:
    """One proposal as this operator may see it (see `proposals_json`)."""
    return proposals_json(actor, [proposal])[0]
