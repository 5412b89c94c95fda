"""Operator preference actions: language, AI panel state, URL pre-fetch switch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.oneline import check_one_line
from hal.errors import InvalidInput
from hal.models import OperatorProfile
from hal.web.ids import as_id


def _no_rooms(user: Any, room_id: Any) -> bool:
    return False  # without the chat app there is no room to name


# Whether a room is this operator's: the chat app (above hal) registers the answer in its
# AppConfig.ready(), so hal does not import it.
_room_is_theirs: Callable[[Any, Any], bool] = _no_rooms


def register_room_owner_check(check: Callable[[Any, Any], bool]) -> None:
    """Called by chatrooms: `check(user, room_id)` is True when the room is the user's."""
    global _room_is_theirs
    _room_is_theirs = check


def get_profile(user: Any) -> OperatorProfile:
    """Return the operator's profile, creating the default one on first use."""
    profile, _ = OperatorProfile.objects.get_or_create(user=user)
    return profile


@action("operator.language")
def check_set_language(*, actor: Actor, language: Any) -> OperatorProfile:
    """Choose the console language for this operator (every browser follows)."""
    require_perm(actor, "view")
    if language not in dict(settings.LANGUAGES):
        raise InvalidInput(
            format_lazy(_("Unsupported language {language!r}."), language=language),
            code="invalid_language",
        )
    with transaction.atomic():
        profile = OperatorProfile.objects.select_for_update().get(pk=get_profile(actor.user).pk)
        before = profile.language
        profile.language = language
        profile.save(update_fields=["language"])
        record_audit(
            actor,
            "operator.language",
            target=actor.user,
            before={"language": before},
            after={"language": language},
        )
    return profile


@action("operator.auto_fetch_urls")
def check_set_auto_fetch(*, actor: Actor, enabled: Any) -> OperatorProfile:
    """Turn URL pre-fetch of this operator's messages on or off (setting autoFetchUrls)."""
    require_perm(actor, "view")
    if not isinstance(enabled, bool):
        raise InvalidInput(_("enabled must be true or false."))
    with transaction.atomic():
        profile = OperatorProfile.objects.select_for_update().get(pk=get_profile(actor.user).pk)
        before = profile.auto_fetch_urls
        profile.auto_fetch_urls = enabled
        profile.save(update_fields=["auto_fetch_urls"])
        record_audit(
            actor,
            "operator.auto_fetch_urls",
            target=actor.user,
            before={"auto_fetch_urls": before},
            after={"auto_fetch_urls": enabled},
        )
    return profile


# Audit codes of per-operator view preferences: never "activity" (Recent activity hides
# them; rows of this kind written before panel state stopped being audited remain).
PREFERENCE_ACTIONS = ("operator.panel_state",)

PANEL_DEFAULTS: dict[str, Any] = {
    "open": True,
    "width": 400,
    "active_room_id": None,
    "theme": "auto",
}
# The console's colour theme: "auto" follows the browser's prefers-color-scheme.
THEMES = ("auto", "light", "dark")
PANEL_WIDTH_MIN = 280
PANEL_WIDTH_MAX = 1600
PANEL_TITLES_MAX = 50


def panel_state_for(profile: OperatorProfile) -> dict[str, Any]:
    """The operator's AI panel state with defaults filled in."""
    return {**PANEL_DEFAULTS, **(profile.panel_state or {})}


def _clean_panel_state(state: Any) -> dict[str, Any]:
    if not isinstance(state, dict):
        raise InvalidInput(_("The panel state must be an object."), code="invalid_panel_state")
    unknown = set(state) - {"open", "width", "active_room_id", "tab_titles", "theme"}
    if unknown:
        raise InvalidInput(
            format_lazy(_("Unknown panel field(s): {unknown}."), unknown=sorted(unknown)),
            code="invalid_panel_state",
        )
    out: dict[str, Any] = {}
    if "open" in state:
        if not isinstance(state["open"], bool):
            raise InvalidInput(_("open must be true or false."), code="invalid_panel_state")
        out["open"] = state["open"]
    if "width" in state:
        width = state["width"]
        if isinstance(width, bool) or not isinstance(width, int | float):
            raise InvalidInput(_("width must be a number of pixels."), code="invalid_panel_state")
        out["width"] = int(min(max(width, PANEL_WIDTH_MIN), PANEL_WIDTH_MAX))
    if "active_room_id" in state:
        room = state["active_room_id"]
        if room is not None and (not isinstance(room, int) or as_id(room) is None):
            raise InvalidInput(_("active_room_id must be a room id."), code="invalid_panel_state")
        out["active_room_id"] = room
    if "theme" in state:
        if state["theme"] not in THEMES:
            raise InvalidInput(_("theme must be auto, light or dark."), code="invalid_panel_state")
        out["theme"] = state["theme"]
    if "tab_titles" in state:
        # Display hints only; a room's real title is renamed through PATCH /api/ai/rooms/<id>.
        titles = state["tab_titles"]
        if not isinstance(titles, dict) or len(titles) > PANEL_TITLES_MAX:
            raise InvalidInput(_("tab_titles must be a small object."), code="invalid_panel_state")
        out["tab_titles"] = {
            check_one_line(str(k), "tab_titles")[:20]: check_one_line(str(v), "tab_titles")[:60]
            for k, v in titles.items()
        }
    return out


@action("operator.panel_state")
def check_save_panel_state(*, actor: Actor, state: Any) -> OperatorProfile:
    """Save the AI panel's open/width/active tab for this operator (restored after reload).

    A view preference, stored without an audit row: it changes nothing anyone else sees,
    is written on every resize and tab switch (an audit row each flooded Recent activity
    and the audit log), and the input is validated and bound to the operator's own profile.
    Refusals are still audited by @action."""
    require_perm(actor, "view")
    changes = _clean_panel_state(state)
    if "active_room_id" in changes and changes["active_room_id"] is not None:
        if not _room_is_theirs(actor.user, changes["active_room_id"]):
            raise InvalidInput(_("No such room."), code="invalid_panel_state")
    with transaction.atomic():
        profile = OperatorProfile.objects.select_for_update().get(pk=get_profile(actor.user).pk)
        before = dict(profile.panel_state or {})
        profile.panel_state = {**before, **changes}
        profile.save(update_fields=["panel_state"])
    return profile
