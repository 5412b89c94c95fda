"""AI chat rooms: unified and individual rooms, messages, turns, proposals UI."""

from typing import Any

from django.apps import AppConfig


def _on_connection_changed(
    sender: Any, *, connection: Any, deleted: bool = False, **kw: Any
) -> None:
    from chatrooms.actions import sync_connection_rooms
    from chatrooms.integration import forget_connections

    forget_connections()
    sync_connection_rooms(connection, deleted=deleted)


def _on_proposal_decided(sender: Any, *, proposal: Any, result: Any = None, **kw: Any) -> None:
    from chatrooms.orchestrator import get_orchestrator

    get_orchestrator().on_proposal_decided(proposal, result)


def _room_is_theirs(user: Any, room_id: Any) -> bool:
    from chatrooms.models import Room

    return Room.objects.filter(pk=room_id, operator=user).exists()


def _streaming_turn_ids() -> Any:
    from chatrooms.models import Turn

    return Turn.objects.filter(status=Turn.STREAMING).values("pk")


def _archive_sweep(actor: Any) -> None:
    # Archived conversations past HAL_CHAT_ARCHIVE_DAYS are deleted.
    from chatrooms.archive import sweep_expired_archives

    sweep_expired_archives()


class ChatroomsConfig(AppConfig):
    name = "chatrooms"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Signals only: no database access here (DESIGN rule; recovery runs elsewhere).
        from chatrooms import budget_notices, holds, integration
        from chatrooms.run.prompt import estimate_prompt

        # The prompt a budget reservation estimates (chatrooms/holds.py sits below it).
        holds.register_prompt_builder(estimate_prompt)

        integration.connection_signal().connect(
            _on_connection_changed, dispatch_uid="chatrooms.connection_changed"
        )
        integration.proposal_signal().connect(
            _on_proposal_decided, dispatch_uid="chatrooms.proposal_decided"
        )
        integration.budget_signal().connect(
            budget_notices.post_budget_notice, dispatch_uid="chatrooms.budget_notice"
        )
        from hal.hooks.workers import register_sweep

        register_sweep("chatrooms.archives", _archive_sweep)
        # A CLI turn's MCP token is accepted only while its turn streams.
        from hal.actions.mcp_turn_tokens import register_running_turns

        register_running_turns(_streaming_turn_ids)
        # The panel state may name one of the operator's rooms (hal checks through this).
        from hal.actions.operators import register_room_owner_check

        register_room_owner_check(_room_is_theirs)
