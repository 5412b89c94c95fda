"""The room side of connection budgets: the 80 % / paused notice in the room of the call
that crossed it, and the notice when a broadcast skips a paused model.

Apart from chatrooms/integration.py (which the actions import) so that the notices can use
the actions without an import circle.
"""

from __future__ import annotations

from typing import Any


def post_budget_notice(sender: Any, *, room_id: int, text: Any, **kw: Any) -> None:
    """A budget's 80 % / paused notice, in the room of the call that crossed it."""
    from chatrooms.actions.notices import do_post_notice
    from chatrooms.actions.rooms import room_group
    from hal.live.events import publish

    notice = do_post_notice(room_id, text)
    publish(room_group(room_id), "notice", notice.as_dict())


def notice_budget_skips(room: Any, text: str, everyone: list[Any]) -> None:
    """A broadcast in the unified room skips paused connections: say so in the room."""
    from django.utils.translation import gettext_noop

    from chatrooms.actions.notices import do_post_notice
    from chatrooms.actions.rooms import room_group
    from chatrooms.addressing import parse_addressees
    from chatrooms.integration import participant
    from hal import i18n
    from hal.live.events import publish
    from providers.models import AIConnection

    paused = [c for c in everyone if c.status == AIConnection.PAUSED]
    if not paused or not parse_addressees(text, [participant(c) for c in everyone]).broadcast:
        return
    for conn in paused:
        notice = do_post_notice(
            room.pk,
            i18n.text(
                gettext_noop(
                    "@{name} is paused (budget exhausted) and did not answer; an "
                    "administrator can raise its budget on /ops/ai."
                ),
                name=conn.name,
            ),
        )
        publish(room_group(room.pk), "notice", notice.as_dict())
