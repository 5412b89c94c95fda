"""Every state change of the chat rooms: check_* validates and audits, do_* writes.

Views, the WebSocket consumer and the orchestrator call these; nothing else saves rooms,
messages or turns. Operator actions (send, rename, reset, retry) are audited; the
orchestrator's bookkeeping of model replies is not (the messages are the record).

A package of modules named after what they hold: rooms (groups, the operator's rooms,
rename, reset), sending (send, addressing targets, retry), turns (turn state
transitions, relays, recovery), notices (failure reasons and room notices), history
(the prompt history SQL) and web_context (web-context targets of a turn). Every public
name is re-exported here, so `from chatrooms import actions` keeps working.
"""

from __future__ import annotations

from chatrooms.actions.history import (
    HistoryItem,
    history_queryset,
)
from chatrooms.actions.notices import (
    CLI_FAILURE_REASONS,
    CONNECTION_FAILURE_KINDS,
    FAILURE_REASONS,
    PROVIDER_FAILURE_REASONS,
    do_post_notice,
    notice_inactive_mentioned,
    notice_interrupted,
    notice_relay_over_budget,
    notice_relay_stopped,
    notice_tool_round_limit,
    provider_failure_reason,
)
from chatrooms.actions.rooms import (
    check_rename_room,
    check_reset_room,
    do_rename_room,
    do_reset_room,
    ensure_rooms,
    get_room,
    max_message_chars,
    operator_group,
    room_group,
    sort_rooms,
    sync_connection_rooms,
    watchable_room,
)
from chatrooms.actions.sending import (
    CONTEXT_KEYS,
    CONTEXT_SELECTION_MAX,
    Sent,
    _clean_text,
    _inactive,
    check_retry_turn,
    check_send_message,
    clean_context,
    do_retry_turn,
    do_send_message,
    resolve_targets,
)
from chatrooms.actions.turns import (
    do_adopt_continuations,
    do_complete_turn,
    do_fail_turn,
    do_finish_stopped,
    do_queue_relays,
    do_record_decision,
    do_recover_interrupted,
    do_save_partial,
    do_save_partials,
    do_start_turn,
    do_start_turns,
    do_wait_for_approval,
    is_continuation,
    still_claimed,
    stop_requested,
)
from chatrooms.actions.web_context import (
    WebTarget,
    do_attach_web_context,
    web_context_targets,
)

__all__ = [
    "CLI_FAILURE_REASONS",
    "CONNECTION_FAILURE_KINDS",
    "CONTEXT_KEYS",
    "CONTEXT_SELECTION_MAX",
    "FAILURE_REASONS",
    "PROVIDER_FAILURE_REASONS",
    "HistoryItem",
    "Sent",
    "WebTarget",
    "_clean_text",
    "_inactive",
    "check_rename_room",
    "check_reset_room",
    "check_retry_turn",
    "check_send_message",
    "clean_context",
    "do_adopt_continuations",
    "do_attach_web_context",
    "do_complete_turn",
    "do_fail_turn",
    "do_finish_stopped",
    "do_post_notice",
    "do_queue_relays",
    "do_record_decision",
    "do_recover_interrupted",
    "do_rename_room",
    "do_reset_room",
    "do_retry_turn",
    "do_save_partial",
    "do_save_partials",
    "do_send_message",
    "do_start_turn",
    "do_start_turns",
    "do_wait_for_approval",
    "ensure_rooms",
    "get_room",
    "history_queryset",
    "is_continuation",
    "max_message_chars",
    "notice_inactive_mentioned",
    "notice_interrupted",
    "notice_relay_over_budget",
    "notice_relay_stopped",
    "notice_tool_round_limit",
    "operator_group",
    "provider_failure_reason",
    "resolve_targets",
    "room_group",
    "sort_rooms",
    "still_claimed",
    "stop_requested",
    "sync_connection_rooms",
    "watchable_room",
    "web_context_targets",
]
