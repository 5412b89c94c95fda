"""Template context of the ops domain: the emergency-recovery banner on every page."""

from __future__ import annotations

from django.db import DatabaseError
from django.http import HttpRequest

BANNER_TEMPLATE = "hal/_emergency_banner.html"


def emergency(request: HttpRequest) -> dict:
    """Expose the emergency state and, when active, the banner template to the base layout."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    from hal.queries_ops import emergency_state

    try:
        state = emergency_state()
    except DatabaseError:  # a page must still render when the table is not migrated yet
        return {}
    if not state.active:
        return {"hal_emergency": None}
    return {"hal_emergency": state, "emergency_banner_template": BANNER_TEMPLATE}
