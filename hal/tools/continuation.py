"""The continuation hook: a decided proposal's outcome, handed back to whoever asked.

When a proposal ends (executed, failed, rejected, cancelled or expired) HAL sends the
`proposal_decided` signal AFTER the deciding transaction commits, with the proposal
and `result` — the tool-result payload to give the model for its original tool call:

    from hal.tools.continuation import proposal_decided

    def on_decided(sender, *, proposal, result, **kwargs):
        ...  # e.g. resume the chat turn proposal.turn_id with tool_call_id's result

    proposal_decided.connect(on_decided)

Listeners run in the deciding request's thread (sync); a failing listener is logged
and never undoes or hides the decision. Long work belongs in a task, not a listener.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

log = logging.getLogger("hal.tools.continuation")

# Sent with sender=Proposal, proposal=<Proposal>, result=<tool_result_payload(proposal)>.
proposal_decided = Signal()

_MESSAGES = {
    "executed": "An operator approved this call; it ran once. The result is the evidence.",
    "failed": "An operator approved this call; it ran and failed with the error below.",
    "rejected": "An operator rejected this call; nothing ran.",
    "cancelled": "This call was cancelled before anyone decided on it; nothing ran.",
    "expired": "Nobody approved this call in time; it expired and nothing ran.",
}
# A cancellation with its reason (a room reset, an abandoned branch, a stopped turn).
_CANCELLED_BECAUSE = "This call was cancelled before anyone decided on it ({reason}); nothing ran."


def tool_result_payload(proposal: Any) -> dict[str, Any]:
    """What the model gets back as the tool result of the call that became `proposal`."""
    payload: dict[str, Any] = {
        "proposal_id": proposal.pk,
        "tool": proposal.tool,
        "status": proposal.status,
        "ok": proposal.status == "executed",
        "message": _message(proposal),
        "decided_by": proposal.decided_label or None,
    }
    if proposal.status == "executed":
        payload["result"] = proposal.result
    if proposal.error_code:
        payload["error"] = {"code": proposal.error_code, "message": proposal.error_message}
    if proposal.decision_reason:
        payload["reason"] = proposal.decision_reason
    return payload


def _message(proposal: Any) -> str:
    """The outcome in a sentence; a cancellation names its own reason (a room reset, an
    abandoned branch, a stopped turn), never one fixed story."""
    if proposal.status == "cancelled" and proposal.decision_reason:
        return _CANCELLED_BECAUSE.format(reason=proposal.decision_reason)
    return _MESSAGES.get(proposal.status, "")


def notify_decided(proposal: Any) -> None:
    """Send `proposal_decided` once the current transaction commits (now if none)."""

    def send() -> None:
        payload = tool_result_payload(proposal)
        for receiver, response in proposal_decided.send_robust(
            sender=type(proposal), proposal=proposal, result=payload
        ):
            if isinstance(response, Exception):
                log.error(
                    "proposal_decided listener %r failed for proposal %s",
                    receiver,
                    proposal.pk,
                    exc_info=response,
                )

    transaction.on_commit(send)
