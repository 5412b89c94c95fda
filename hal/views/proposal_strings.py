"""UI strings of the proposal cards (AI panel and Approvals page), in the operator's language."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _


def proposal_strings() -> dict[str, Any]:
    """Strings for static/hal/proposal_card.js (placeholders in braces are filled there),
    with the labels of the fields and coded values its cards show."""
    from hal.i18n.fields import field_labels
    from hal.i18n.labels import JOB_KIND_LABELS, SETTING_TYPE_LABELS, TIER_LABELS, VIA_LABELS

    def rendered(labels: dict[str, Any]) -> dict[str, str]:
        return {code: str(label) for code, label in labels.items()}

    return {
        # name → label of arguments, impact details and results; coded values by field
        # (statuses come with the page: hal-status-labels).
        "fields": field_labels(),
        "values": {
            "kind": rendered(JOB_KIND_LABELS),
            "via": rendered(VIA_LABELS),
            "type": rendered(SETTING_TYPE_LABELS),
            "tier": rendered(TIER_LABELS),
        },
        "yes": _("yes"),
        "no": _("no"),
        "proposed_by": _("Proposed by {model} in {owner}'s {room} room"),
        "proposed_by_model": _("Proposed by {model}"),
        "proposed_in": _("Proposed in {owner}'s {room} room"),
        "unified": _("Unified"),
        "high_risk": _("High risk"),
        "write": _("Write"),
        "read": _("Read"),
        "target": _("Target"),
        "runbook": _("Following runbook"),
        "runbook_archived": _("archived"),
        "expires": _("Expires"),
        "impact": _("Impact"),
        "arguments": _("Arguments"),
        "no_arguments": _("No arguments."),
        "result": _("Result"),
        "show_json": _("Show as JSON"),
        "details_hidden": _(
            "Arguments and result are shown only to operators who may approve this tier."
        ),
        "cannot_succeed": _("Cannot succeed now"),
        "step_impact": _("Show impact"),
        "step_retype": _("Retype the target"),
        "retype": _("Type the target's identifier to confirm"),
        "retype_case": _("Case-sensitive: type it exactly as shown."),
        "confirm_target": _("Confirm target"),
        "execute": _("Execute"),
        "approve": _("Approve"),
        "reject": _("Reject"),
        "decided_by": _("Decided by"),
        "reauth_cancelled": _("Re-authentication cancelled."),
        # The second opinion (reviews app): advice of another model, never a decision.
        "review_by": _("Second opinion by {model}"),
        "review_streaming": _("Reviewing…"),
        "review_truncated": _("…truncated: the answer was longer than HAL keeps."),
        "review_failed": _("Review failed: {reason}"),
        "review_unparseable": _("The review was not a valid structured answer; its text:"),
        "review_reasons": _("Reasons"),
        "review_check_first": _("Check first"),
        "review_advice": _("Advice only: a review never approves, rejects or delays this."),
        "verdict_agree": _("Agrees"),
        "verdict_concerns": _("Has concerns"),
        "verdict_disagree": _("Disagrees"),
    }
