"""AI proposals: the JSON API of SPEC §10 and the console's approvals page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from hal.actions import proposals
from hal.actions.base import Actor
from hal.errors import HalError
from hal.i18n import localize
from hal.web.api import api, json_body


def _actor(request: HttpRequest) -> Actor:
    return Actor.from_request(request, via="api")


@login_required
@require_GET
def proposals_page(request: HttpRequest) -> HttpResponse:
    """Pending and recent proposals with approve / reject (and the three steps)."""
    actor = Actor.from_request(request)
    error = None
    try:
        pending = proposals.list_proposals(actor, status="pending", limit=200)
        recent = [p for p in proposals.list_proposals(actor, limit=50) if p.status != "pending"]
    except HalError as exc:
        pending, recent, error = [], [], exc
    # The cards are drawn by the same ES module as the panel's (static/hal/proposal_card.js)
    # from the API's JSON: what this operator may see, with the precheck in their language.
    return render(
        request,
        "hal/proposals.html",
        {
            "pending": localize(proposals.proposals_json(actor, pending)),
            "recent": localize(proposals.proposals_json(actor, recent)),
            "error": error,
            "page": "proposals",
        },
        status=error.http_status if error else 200,
    )


@require_GET
@api()
def api_list(request: HttpRequest) -> dict:
    """GET /api/ai/proposals?status=pending&room_id=&limit="""
    actor = _actor(request)
    rows = proposals.list_proposals(
        actor,
        status=request.GET.get("status", ""),
        room_id=request.GET.get("room_id"),
        limit=_limit(request.GET.get("limit")),
    )
    return {"proposals": proposals.proposals_json(actor, rows)}


def _limit(value: str | None) -> int:
    try:
        return int(value) if value else 100
    except ValueError:
        return 100


@require_GET
@api()
def api_detail(request: HttpRequest, proposal_id: int) -> dict:
    """GET /api/ai/proposals/<id>"""
    actor = _actor(request)
    return {"proposal": proposals.proposal_json(actor, proposals.get_proposal(actor, proposal_id))}


@require_POST
@api()
def api_confirm(request: HttpRequest, proposal_id: int) -> dict:
    """POST /api/ai/proposals/<id>/confirm {step: "impact"} | {step: "target", target}"""
    body = json_body(request)
    actor = _actor(request)
    proposal, conf = proposals.check_confirm_proposal(
        actor=actor,
        proposal_id=proposal_id,
        step=body.get("step"),
        target=body.get("target"),
    )
    # Never the token: a proposal's confirmation is spent by its approve only.
    return {
        "proposal": proposals.proposal_json(actor, proposal),
        "confirmation": conf.as_dict(with_token=False),
    }


@require_POST
@api()
def api_approve(request: HttpRequest, proposal_id: int) -> dict:
    """POST /api/ai/proposals/<id>/approve — runs it once (re-auth; three steps if high-risk)."""
    actor = _actor(request)
    proposal = proposals.check_approve_proposal(actor=actor, proposal_id=proposal_id)
    return {"proposal": proposals.proposal_json(actor, proposal)}


@require_POST
@api()
def api_reject(request: HttpRequest, proposal_id: int) -> dict:
    """POST /api/ai/proposals/<id>/reject {reason?} — nothing runs."""
    body = json_body(request)
    actor = _actor(request)
    proposal = proposals.check_reject_proposal(
        actor=actor, proposal_id=proposal_id, reason=body.get("reason", "")
    )
    return {"proposal": proposals.proposal_json(actor, proposal)}
