"""Reading proposals: the old import path, kept; the code is in hal.actions.proposals.reads."""

from hal.actions.proposals.reads import (
    get_proposal,
    list_proposals,
    proposal_json,
    proposals_json,
)
from hal.actions.proposals.records import origins_for, proposal_precheck

__all__ = [
    "get_proposal",
    "list_proposals",
    "origins_for",
    "proposal_json",
    "proposal_precheck",
    "proposals_json",
]
