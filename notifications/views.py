"""The Notifications page and JSON API; views only translate HTTP to check_* and reads."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext_noop
from django.views.decorators.http import require_http_methods

from hal.actions.base import Actor
from hal.errors import HalError
from hal.web.api import dispatch, json_body
from notifications import actions
from notifications.models import EVENT_KINDS, Channel
from notifications.queries import deliveries_of

# The kinds as the page names them (translated in the template).
KIND_LABELS = {
    "proposal_pending": gettext_noop("A proposal awaits approval"),
    "proposal_expiring": gettext_noop("A proposal expires in 10 minutes"),
    "incident_opened": gettext_noop("An incident opened or reopened"),
    "incident_escalated": gettext_noop("An incident escalated"),
    "incident_summary": gettext_noop("An investigation summary posted"),
    "connection_paused": gettext_noop("A connection paused by its budget"),
    "connection_failed": gettext_noop("A connection failed verification"),
    "reply_failed": gettext_noop("A model reply failed in my room"),
}


def _actor(request: HttpRequest, via: str = "web") -> Actor:
    return Actor.from_request(request, via=via)


def _overview(request: HttpRequest) -> dict[str, Any]:
    channels = Channel.objects.filter(owner_id=request.user.pk).order_by("pk")
    return {
        "channels": [c.as_dict() for c in channels],
        "preferences": actions.preferences_of(request.user).as_dict(),
        "deliveries": deliveries_of(request.user),
        "kinds": list(EVENT_KINDS),
    }


def _post_action(request: HttpRequest) -> tuple[str, Any]:
    """Run the form's action; → (a notice for the page, the signing secret to show once)."""
    actor, post, op = _actor(request), request.POST, request.POST.get("op", "")
    if op == "add":
        added = actions.check_add_channel(
            actor=actor,
            kind=post.get("kind"),
            name=post.get("name"),
            address=post.get("address"),
            body_format=post.get("format") or Channel.JSON,
            digest_minutes=post.get("digest_minutes") or 0,
        )
        notice = "code_sent" if added.code_sent else "code_not_sent"
        return notice, {"secret": added.signing_secret, "detail": added.detail}
    if op == "verify":
        actions.check_verify_channel(
            actor=actor, channel_id=post.get("channel"), code=post.get("code")
        )
        return "verified", None
    if op == "resend":
        sent = actions.check_send_code(actor=actor, channel_id=post.get("channel"))
        return ("code_sent" if sent.ok else "code_not_sent"), {"detail": sent.detail}
    if op == "digest":
        actions.check_update_channel(
            actor=actor, channel_id=post.get("channel"), digest_minutes=post.get("digest_minutes")
        )
        return "saved", None
    if op == "remove":
        actions.check_remove_channel(actor=actor, channel_id=post.get("channel"))
        return "removed", None
    if op == "preferences":
        actions.check_set_preferences(
            actor=actor,
            disabled_kinds=[k for k in EVENT_KINDS if not post.get(f"want_{k}")],
            time_zone=post.get("time_zone") or "UTC",
            quiet_start=post.get("quiet_start") or None,
            quiet_end=post.get("quiet_end") or None,
        )
        return "saved", None
    raise HalError("Unknown form.", code="invalid_input", http_status=400)


@login_required
@require_http_methods(["GET", "POST"])
def page(request: HttpRequest) -> HttpResponse:
    """Your channels (add, verify, digest, remove), preferences, and the delivery log."""
    error: HalError | None = None
    notice, extra = "", None
    if request.method == "POST":
        try:
            notice, extra = _post_action(request)
        except HalError as exc:
            error = exc
    data = _overview(request)
    prefs = data["preferences"]
    return render(
        request,
        "notifications/page.html",
        {
            **data,
            "kind_rows": [
                (k, KIND_LABELS[k], k not in prefs["disabled_kinds"]) for k in EVENT_KINDS
            ],
            "notice": notice,
            "extra": extra or {},
            "error": error,
            "page": "notifications",
            # Product names and a JSON shape: the same in every language.
            "slack_name": "Slack/Mattermost",
            "slack_preset": 'Slack/Mattermost {"text": …}',
        },
        status=error.http_status if error else 200,
    )


# --- JSON API --------------------------------------------------------------------------------


def _api_overview(request: HttpRequest) -> dict[str, Any]:
    """GET /api/notifications: your channels, preferences and latest deliveries."""
    actions.operator_of(_actor(request, "api"))
    return _overview(request)


def _api_add(request: HttpRequest) -> tuple[dict[str, Any], int]:
    """POST /api/notifications/channels {kind, name, address, format, digest_minutes}"""
    data = json_body(request)
    added = actions.check_add_channel(
        actor=_actor(request, "api"),
        kind=data.get("kind"),
        name=data.get("name"),
        address=data.get("address"),
        body_format=data.get("format") or Channel.JSON,
        digest_minutes=data.get("digest_minutes", 0),
    )
    body: dict[str, Any] = {
        "channel": added.channel.as_dict(),
        "code_sent": added.code_sent,
        "detail": added.detail,
    }
    if added.signing_secret:
        body["signing_secret"] = added.signing_secret  # shown once; the vault keeps it
    return body, 201


def _api_channel_get(request: HttpRequest, channel_id: int) -> dict[str, Any]:
    return {"channel": actions.load_channel(_actor(request, "api"), channel_id).as_dict()}


def _api_channel_update(request: HttpRequest, channel_id: int) -> dict[str, Any]:
    """POST /api/notifications/channels/<id> {digest_minutes}"""
    data = json_body(request)
    channel = actions.check_update_channel(
        actor=_actor(request, "api"),
        channel_id=channel_id,
        digest_minutes=data.get("digest_minutes"),
    )
    return {"channel": channel.as_dict()}


def _api_channel_delete(request: HttpRequest, channel_id: int) -> dict[str, Any]:
    """DELETE /api/notifications/channels/<id>"""
    actions.check_remove_channel(actor=_actor(request, "api"), channel_id=channel_id)
    return {"removed": channel_id}


def _api_verify(request: HttpRequest, channel_id: int) -> dict[str, Any]:
    """POST /api/notifications/channels/<id>/verify {code}"""
    data = json_body(request)
    channel = actions.check_verify_channel(
        actor=_actor(request, "api"), channel_id=channel_id, code=data.get("code")
    )
    return {"channel": channel.as_dict()}


def _api_send_code(request: HttpRequest, channel_id: int) -> dict[str, Any]:
    """POST /api/notifications/channels/<id>/code: a fresh verification code."""
    sent = actions.check_send_code(actor=_actor(request, "api"), channel_id=channel_id)
    return {"code_sent": sent.ok, "detail": sent.detail}


def _api_preferences(request: HttpRequest) -> dict[str, Any]:
    """POST /api/notifications/preferences {disabled_kinds, time_zone, quiet_start, quiet_end}"""
    data = json_body(request)
    prefs = actions.check_set_preferences(
        actor=_actor(request, "api"),
        disabled_kinds=data.get("disabled_kinds"),
        time_zone=data.get("time_zone", "UTC"),
        quiet_start=data.get("quiet_start"),
        quiet_end=data.get("quiet_end"),
    )
    return {"preferences": prefs.as_dict()}


api_overview = dispatch(GET=_api_overview)
api_channels = dispatch(POST=_api_add)
api_channel = dispatch(GET=_api_channel_get, POST=_api_channel_update, DELETE=_api_channel_delete)
api_verify = dispatch(POST=_api_verify)
api_send_code = dispatch(POST=_api_send_code)
api_preferences = dispatch(POST=_api_preferences)
