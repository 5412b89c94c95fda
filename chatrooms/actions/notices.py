"""Room notices and the failure reasons stored on failed replies."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_noop

from chatrooms.models import Message
from chatrooms.watchdog import IDLE_REASON
from hal import i18n

# Why a provider call failed, by ProviderError kind: stored on failed replies in English;
# Message.as_dict() offers them as msgids (each operator reads their language).
PROVIDER_FAILURE_REASONS = {
    "auth": gettext_noop(
        "The provider refused the credential (re-authorize the connection on /ops/ai)."
    ),
    "rate_limited": gettext_noop(
        "The provider is rate-limiting this connection; try again shortly."
    ),
    "timeout": gettext_noop("The provider did not answer in time."),
    "bad_response": gettext_noop("The provider sent a malformed response."),
    "bad_request": gettext_noop("The provider refused the request."),
    "unavailable": gettext_noop("The provider is unavailable right now."),
}


# A local CLI connection has no credential in HAL: its login belongs to the service user.
CLI_FAILURE_REASONS = {
    "auth": gettext_noop(
        "The Claude Code CLI on the HAL host is not logged in (log the HAL service user in: "
        "run `claude login` as that user)."
    ),
}


FAILURE_REASONS = (
    gettext_noop("HAL stopped while this reply was being written."),
    gettext_noop("HAL could not finish this reply."),
    IDLE_REASON,
    *PROVIDER_FAILURE_REASONS.values(),
    *CLI_FAILURE_REASONS.values(),
)


def provider_failure_reason(error: Any, provider: str) -> str:
    """The English reason stored on a reply failed with ProviderError `error`."""
    if provider == "local_cli" and error.kind in CLI_FAILURE_REASONS:
        return CLI_FAILURE_REASONS[error.kind]
    reason: str = PROVIDER_FAILURE_REASONS.get(error.kind, error.message)
    return reason


def notice_interrupted(name: str | None) -> dict[str, Any]:
    """The notice for a reply cut short by a restart (hal.i18n.text); `name` None when the
    turn's connection was deleted since."""
    if not name:
        return i18n.text(
            gettext_noop("A reply was interrupted because HAL restarted. Retry to ask again.")
        )
    return i18n.text(
        gettext_noop(
            "The reply of @{name} was interrupted because HAL restarted. Retry to ask again."
        ),
        name=name,
    )


def notice_relay_stopped(speaker: str, names: str) -> dict[str, Any]:
    """The second-hop relay notice: models answer each other once automatically."""
    return i18n.text(
        gettext_noop(
            "@{speaker} mentioned {names} in a relayed reply. Models answer each other only "
            "once automatically — send a message to continue."
        ),
        speaker=speaker,
        names=names,
    )


def notice_inactive_mentioned(speaker: str, names: str) -> dict[str, Any]:
    """A model mentioned connections that are not active."""
    return i18n.text(
        gettext_noop("@{speaker} mentioned {names}, which is not active and will not answer."),
        speaker=speaker,
        names=names,
    )


def notice_relay_over_budget(speaker: str, names: str) -> dict[str, Any]:
    """A model mentioned connections whose budget has too little left for the call."""
    return i18n.text(
        gettext_noop(
            "@{speaker} mentioned {names}, whose budget has too little left for another "
            "call; it will not answer (an administrator can raise the budget on /ops/ai)."
        ),
        speaker=speaker,
        names=names,
    )


def notice_tool_round_limit(name: str, limit: int) -> dict[str, Any]:
    """A reply stopped at the per-reply tool round limit."""
    return i18n.text(
        gettext_noop(
            "@{name} reached the limit of {limit} tool rounds in one reply; send a message "
            "to continue."
        ),
        name=name,
        limit=limit,
    )


def do_post_notice(
    room_id: int,
    text: Any,
    *,
    relay_depth: int = 0,
    reply_to_id: int | None = None,
    meta: dict[str, Any] | None = None,
) -> Message:
    """A visible HAL notice in the room (relay stopped, interrupted reply, ...).

    `text` is a hal.i18n.text() (shown in each operator's language; the stored `text`
    column keeps its English rendering for models) or a plain English string."""
    meta = dict(meta or {})
    if i18n.is_text(text):
        meta["text_i18n"] = text
    return Message.objects.create(
        room_id=room_id,
        author_kind=Message.HAL,
        author="HAL",
        text=i18n.english(text),
        status=Message.COMPLETE,
        relay_depth=relay_depth,
        reply_to_id=reply_to_id,
        meta=meta,
    )


def notice_proposals_outlive_reply(name: str, tools: str, *, stopped: bool) -> dict[str, Any]:
    """A local CLI's reply ended (failed or stopped) after it proposed: the proposal is not
    lost — it waits for the operator, and the model is called again with the outcome."""
    if stopped:
        return i18n.text(
            gettext_noop(
                "The reply of @{name} was stopped after it proposed {tools}. The proposal "
                "still waits for your decision; @{name} will be called again with the outcome."
            ),
            name=name,
            tools=tools,
        )
    return i18n.text(
        gettext_noop(
            "The reply of @{name} failed after it proposed {tools}. The proposal still waits "
            "for your decision; @{name} will be called again with the outcome."
        ),
        name=name,
        tools=tools,
    )
