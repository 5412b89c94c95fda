"""Share links of a conversation: the JSON API, the owner's form and the recipient's page."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from chatrooms import share
from chatrooms.views_export import download
from hal.actions.base import Actor
from hal.errors import HalError
from hal.web.api import dispatch, json_body


def _actor(request: HttpRequest, via: str = "api") -> Actor:
    return Actor.from_request(request, via=via)


def create(request: HttpRequest) -> tuple[dict[str, Any], int]:
    """POST {recipient, room_id | archive_id} → 201 {share, url} (the url is shown once)."""
    body = json_body(request)
    found, token = share.check_create_share(
        actor=_actor(request),
        recipient=body.get("recipient"),
        room_id=body.get("room_id"),
        archive_id=body.get("archive_id"),
    )
    return {"share": found.as_dict(), "url": share.url_of(token)}, 201


def given(request: HttpRequest) -> dict[str, Any]:
    from hal.actions.base import require_perm

    actor = _actor(request)
    require_perm(actor, "view")
    return {"shares": [s.as_dict() for s in share.shares_of(request.user)]}


def revoke(request: HttpRequest, share_id: int) -> dict[str, Any]:
    found = share.check_revoke_share(actor=_actor(request), share_id=share_id)
    return {"share": found.as_dict()}


shares_api = dispatch(GET=given, POST=create)
share_revoke_api = dispatch(POST=revoke)


@login_required
@require_GET
def shared_page(request: HttpRequest, token: str) -> HttpResponse:
    """The recipient's read-only view (?format=md|json: the record as a file)."""
    try:
        doc = share.shared_document(_actor(request, "web"), token)
        fmt = request.GET.get("format")
        if fmt:
            return download(doc, fmt, f"hal-shared-{doc['source']['room_id']}")
    except HalError as exc:
        return render(request, "chatrooms/shared.html", {"error": exc}, status=exc.http_status)
    return render(request, "chatrooms/shared.html", {"page": "ai-archive", "doc": doc})


@login_required
@require_POST
def share_form(request: HttpRequest) -> HttpResponse:
    """The transcript page's form: create a link and show it once (never in a URL)."""
    try:
        found, token = share.check_create_share(
            actor=_actor(request, "web"),
            recipient=request.POST.get("recipient"),
            room_id=request.POST.get("room_id") or None,
            archive_id=request.POST.get("archive_id") or None,
        )
    except HalError as exc:
        return render(request, "chatrooms/shared.html", {"error": exc}, status=exc.http_status)
    link = request.build_absolute_uri(share.url_of(token))
    return render(
        request, "chatrooms/shared.html", {"page": "ai-archive", "created": found, "link": link}
    )


@login_required
@require_POST
def revoke_form(request: HttpRequest, share_id: int) -> HttpResponse:
    try:
        found = share.check_revoke_share(actor=_actor(request, "web"), share_id=share_id)
    except HalError as exc:
        return render(request, "chatrooms/shared.html", {"error": exc}, status=exc.http_status)
    return render(request, "chatrooms/shared.html", {"page": "ai-archive", "revoked": found})
