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
    "no_credential": gettext_noop(
        "HAL has no usable API key or OAuth token for this connection: set a key or connect "
        "with OAuth on /ops/ai."
    ),
    "rate_limited": gettext_noop(
        "The provider is rate-limiting this connection; try again shortly."
    ),
    "timeout": gettext_noop("The provider did not answer in time."),
    "bad_response": gettext_noop("The provider sent a malformed response."),
    "bad_request": gettext_noop("The provider refused the request."),
    "unavailable": gettext_noop("The provider is unavailable right now."),
}

# A credential the provider rejected (HTTP 401/403), by the connection's auth method: not
# "re-authorize" for a key, and never "not logged in" (that is `no_credential`).
AUTH_FAILURE_REASONS = {
    "api_key": gettext_noop(
        "The provider rejected this connection's API key (invalid, expired or revoked): set "
        "a new key on /ops/ai."
    ),
    "oauth": gettext_noop(
        "The provider rejected this connection's OAuth access token (expired or revoked): "
        "connect it again with OAuth on /ops/ai."
    ),
}

# A request the provider refused (another 4xx): its own words say why (an unknown model,
# a request too large), so they follow HAL's sentence.
REFUSED_REASON = gettext_noop("The provider refused the request: {detail}")


# A local CLI connection has no credential in HAL: its login belongs to the service user.
# (The CLI's own reasons — which key or login the API rejected, which tools a deny rule
# removed — come with its errors: providers/local_cli/errors.py.)
CLI_FAILURE_REASONS = {
    "no_credential": gettext_noop(
        "The Claude Code CLI on the HAL host is not logged in (log the HAL service user in: "
        "run `claude login` as that user)."
    ),
    "auth": gettext_noop(
        "The API rejected the login of the Claude Code CLI on the HAL host: log the HAL "
        "service user in again (run `claude login` as that user)."
    ),
}


# The failures a person must fix on the connection (or the host), not by asking again:
# recorded as its `last_error` (providers.recheck.do_record_chat_failure) for /ops/ai.
CONNECTION_FAILURE_KINDS = frozenset(
    {"unavailable", "auth", "no_credential", "bad_request", "cli_tools_denied"}
)


FAILURE_REASONS = (
    gettext_noop("HAL stopped while this reply was being written."),
    gettext_noop("HAL could not finish this reply."),
    IDLE_REASON,
    *PROVIDER_FAILURE_REASONS.values(),
    *AUTH_FAILURE_REASONS.values(),
    *CLI_FAILURE_REASONS.values(),
)


def provider_failure_reason(error: Any, provider: str, auth_method: str = "") -> Any:
    """What a reply failed with ProviderError `error` says: the provider's own reason when
    it gave one (a `hal.i18n.text`), else HAL's sentence for its kind (a msgid, or a text
    with the provider's words). Stored English; each operator reads their language."""
    reason = getattr(error, "reason", None)
    if i18n.is_text(reason):
        return reason
    if provider == "local_cli" and error.kind in CLI_FAILURE_REASONS:
        return CLI_FAILURE_REASONS[error.kind]
    if error.kind == "auth" and auth_method in AUTH_FAILURE_REASONS:
        return AUTH_FAILURE_REASONS[auth_method]
    if error.kind == "bad_request" and error.message:
        return i18n.text(REFUSED_REASON, detail=str(error.message)[:300])
    return PROVIDER_FAILURE_REASONS.get(error.kind, error.message)


def with_failure(reply: Message, code: str, message: Any) -> dict[str, Any]:
    """Mark `reply` failed with `code` and `message` (English, or a hal.i18n.text whose
    English is stored and whose msgid and params go to `meta["error_i18n"]`, which
    Message.as_dict() renders in each reader's language); returns its new meta."""
    reply.error_code = code[:64]
    reply.error_message = i18n.english(message)[:500]
    meta = dict(reply.meta or {})
    if i18n.is_text(message):
        meta["error_i18n"] = message
    else:
        meta.pop("error_i18n", None)
    return meta


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
