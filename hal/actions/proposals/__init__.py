"""Proposal actions: create (from a model's tool call), confirm, approve, reject, cancel, expire.

A proposal runs only through `check_approve_proposal`, under the console's own rules:
recent re-auth for every tier, plus the three-step confirmation for high-risk tools.
A conditional UPDATE picks exactly one winner among concurrent approvals; the winner
runs the tool's handler (the same `check_*` the web UI calls) as the approving
operator through the `ai` path, and stores the result or the error.

records (expiry, integrity, origins, events) < lifecycle (load, reject, cancel, expire,
sweep) < create, approve, reads. Other apps import from this package.
"""

from hal.actions.proposals.approve import check_approve_proposal, check_confirm_proposal
from hal.actions.proposals.create import check_create_proposal
from hal.actions.proposals.lifecycle import (
    check_cancel_room_proposals,
    check_reject_proposal,
    expire_if_due,
    load_proposal,
    sweep_expired_proposals,
    sweep_interrupted_executions,
)
from hal.actions.proposals.reads import (
    get_proposal,
    list_proposals,
    proposal_json,
    proposals_json,
)
from hal.actions.proposals.records import (
    DEFAULT_EXPIRY_MINUTES,
    expiry_minutes,
    origins_for,
    proposal_precheck,
    room_group,
    verify_integrity,
)

__all__ = [
    "DEFAULT_EXPIRY_MINUTES",
    "check_approve_proposal",
    "check_cancel_room_proposals",
    "check_confirm_proposal",
    "check_create_proposal",
    "check_reject_proposal",
    "expire_if_due",
    "expiry_minutes",
    "get_proposal",
    "list_proposals",
    "load_proposal",
    "origins_for",
    "proposal_json",
    "proposal_precheck",
    "proposals_json",
    "room_group",
    "sweep_expired_proposals",
    "sweep_interrupted_executions",
    "verify_integrity",
]
