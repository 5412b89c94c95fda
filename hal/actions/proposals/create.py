"""Creating a proposal from a model's write or high-risk tool call."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.confirm import (
    get_high_risk,
    params_hash,
)
from hal.actions.oneline import flatten
from hal.actions.proposals.records import expiry_minutes, find_tool, publish_proposal
from hal.errors import InvalidInput
from hal.hooks.proposals import proposal_created, proposal_created_in_transaction
from hal.i18n import english, is_text
from hal.models import Proposal


@action("proposals.create")
def check_create_proposal(
    *,
    actor: Actor,
    tool: str,
    arguments: dict[str, Any],
    origin: Any = None,
    runbook: dict[str, Any] | None = None,
) -> Proposal:
    """Record a model's write/high-risk call as a pending proposal (nothing runs)."""
    from hal.tools.origin import Origin
    from hal.tools.registry import READ

    require_perm(actor, "view")
    definition = find_tool(tool)
    if definition.tier == READ:
        raise InvalidInput(
            format_lazy(_("{tool} is a read tool; it needs no proposal."), tool=tool),
            code="not_proposable",
        )
    # Re-validate: whoever calls this (dispatch, a test, a future path) gets the same gate.
    try:
        clean = definition.validate(arguments)
    except Exception as exc:  # pydantic.ValidationError
        raise InvalidInput(
            format_lazy(_("The arguments do not match {tool}'s schema."), tool=tool),
            code="invalid_arguments",
        ) from exc
    where = Origin.coerce(origin)
    if definition.tier == "high_risk":
        impact = get_high_risk(definition.action_code).impact(actor, dict(clean))
        impact_json = impact.as_dict()
        target = impact.target_identifier
    else:
        target = definition.target(clean) if definition.target else ""
        summary = definition.summarize(clean) if definition.summarize else definition.description
        impact_json = {"summary": english(summary), "details": {"arguments": clean}}
        if is_text(summary):
            impact_json["summary_i18n"] = summary
    user = actor.user if getattr(actor.user, "pk", None) else None
    with transaction.atomic():
        proposal = Proposal.objects.create(
            tool=definition.name,
            tier=definition.tier,
            action_code=definition.action_code,
            arguments=clean,
            arguments_sha256=params_hash(clean),
            # A label made from the model's arguments: one line (a subject, a card's title).
            target_identifier=flatten(str(target))[:255],
            impact=impact_json,
            connection_id=where.connection_id,
            room_id=where.room_id,
            message_id=where.message_id,
            turn_id=(where.turn_id or "")[:64] if where.turn_id is not None else "",
            tool_call_id=(where.tool_call_id or "")[:128],
            requested_by=user,
            requested_label=actor.label[:150],
            requested_via=actor.via,
            expires_at=timezone.now() + timedelta(minutes=expiry_minutes()),
            runbook=runbook or None,
        )
        record_audit(
            actor,
            "proposals.create",
            target=proposal,
            target_label=f"{definition.name} {proposal.target_identifier}"[:255],
            # Not the arguments: the audit log is read by every operator, and arguments are
            # room content (shown only to who may approve the tier). Their hash pins them.
            after={
                "tool": definition.name,
                "tier": definition.tier,
                "arguments_sha256": params_hash(clean),
                **({"runbook": runbook} if runbook else {}),
            },
        )
        publish_proposal(proposal, "proposal.created")
        proposal_created_in_transaction(proposal)  # e.g. the notifications' outbox
        transaction.on_commit(lambda: proposal_created(proposal))  # e.g. the second opinion
    return proposal
