"""Three-step confirmation for high-risk actions: impact → retype target → execute.

One server-side state machine serves human clicks and AI proposals alike: a
high-risk `check_*` function takes a `confirmation` token and calls
`consume_confirmation`, which succeeds once, for the operator and session that
confirmed, for exactly the action, subject and arguments that were shown.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.errors import ConfirmationError, InvalidInput, NotFound
from hal.i18n import english, is_text
from hal.models import Confirmation

MAX_TARGET_ATTEMPTS = 5

# The AI proposal whose confirmation steps or approval are running in this context (set
# only by hal.actions.proposals; nothing a request or a model sends can set it).
_FOR_PROPOSAL: ContextVar[int | None] = ContextVar("hal_confirm_for_proposal", default=None)


@contextmanager
def for_proposal(proposal_id: int) -> Iterator[None]:
    """Run confirmation steps on behalf of one proposal (its confirm and approve paths)."""
    reset = _FOR_PROPOSAL.set(int(proposal_id))
    try:
        yield
    finally:
        _FOR_PROPOSAL.reset(reset)


@dataclass(frozen=True)
class Impact:
    """What a high-risk action would touch, and the identifier the operator must retype."""

    subject_type: str
    subject_id: str
    target_identifier: str
    # A plain English string, or a hal.i18n.text() shown in each operator's language.
    summary: Any
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Stored form: `summary` in English (models, audit, scripts), plus `summary_i18n`
        (msgid + params) that hal.i18n.localize() renders for an operator."""
        data = {
            "subject_type": self.subject_type,
            "subject_id": self.subject_id,
            "target_identifier": self.target_identifier,
            "summary": english(self.summary),
            "details": self.details,
        }
        if is_text(self.summary):
            data["summary_i18n"] = self.summary
        return data


@dataclass(frozen=True)
class HighRiskAction:
    """A registered high-risk action: how to describe its impact and how to run it."""

    code: str
    impact: Callable[[Actor, dict[str, Any]], Impact]
    execute: Callable[..., Any]


HIGH_RISK: dict[str, HighRiskAction] = {}


def register_high_risk(
    code: str, *, impact: Callable[[Actor, dict[str, Any]], Impact], execute: Callable[..., Any]
) -> None:
    """Register a high-risk action (its `execute` is a check_* taking `confirmation=`)."""
    HIGH_RISK[code] = HighRiskAction(code=code, impact=impact, execute=execute)


def get_high_risk(code: str) -> HighRiskAction:
    """Return a registered high-risk action or refuse."""
    try:
        return HIGH_RISK[code]
    except KeyError:
        raise InvalidInput(
            format_lazy(_("{code!r} is not a high-risk action."), code=code), code="unknown_action"
        ) from None


def params_hash(params: dict[str, Any]) -> str:
    """A stable hash of an action's arguments (so a confirmation cannot be reused for others)."""
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _load(token: Any, actor: Actor, *, lock: bool = False) -> Confirmation:
    try:
        token_uuid = uuid.UUID(str(token))
    except ValueError:
        raise NotFound(_("No such confirmation."), code="confirmation_not_found") from None
    qs = Confirmation.objects.select_for_update() if lock else Confirmation.objects
    try:
        conf = qs.get(token=token_uuid)
    except Confirmation.DoesNotExist:
        raise NotFound(_("No such confirmation."), code="confirmation_not_found") from None
    # Another operator's (or another session's) confirmation is as good as none.
    if conf.operator_id != getattr(actor.user, "pk", None) or (
        conf.session_key and actor.session_key and conf.session_key != actor.session_key
    ):
        raise NotFound(_("No such confirmation."), code="confirmation_not_found")
    # A proposal's confirmation is spent by that proposal's approve only: never through the
    # generic endpoints or a direct action call (which would run it beside the proposal).
    current = _FOR_PROPOSAL.get()
    if conf.proposal_id is not None and conf.proposal_id != current:
        raise ConfirmationError(
            format_lazy(
                _("This confirmation belongs to AI proposal #{id}; approve it there."),
                id=conf.proposal_id,
            ),
            code="confirmation_for_proposal",
        )
    if current is not None and conf.proposal_id != current:
        raise ConfirmationError(
            _("This proposal has no confirmation of its own; start with its impact step."),
            code="confirmation_incomplete",
        )
    return conf


def get_confirmation(actor: Actor, token: Any) -> Confirmation:
    """This operator's (and session's) confirmation by its token (404 if not theirs)."""
    return _load(token, actor)


@action("confirmation.start")
def check_start_confirmation(
    *, actor: Actor, action_code: str, params: dict[str, Any], proposal_id: int | None = None
) -> Confirmation:
    """Step 1: compute and show the impact of a high-risk action with these arguments.

    `proposal_id` binds the confirmation to an AI proposal (see `for_proposal`)."""
    require_perm(actor, "high_risk")
    entry = get_high_risk(action_code)
    if not isinstance(params, dict):
        raise InvalidInput(_("params must be an object."))
    impact = entry.impact(actor, params)
    with transaction.atomic():
        conf = Confirmation.objects.create(
            operator=actor.user,
            session_key=actor.session_key or "",
            action=action_code,
            subject_type=impact.subject_type,
            subject_id=str(impact.subject_id),
            target_identifier=impact.target_identifier,
            params_hash=params_hash(params),
            proposal_id=proposal_id,
            impact={**impact.as_dict(), "params": params},
            expires_at=timezone.now() + timedelta(seconds=settings.HAL_CONFIRMATION_TTL_SECONDS),
        )
        record_audit(
            actor,
            "confirmation.start",
            target_type=impact.subject_type,
            target_id=impact.subject_id,
            target_label=impact.target_identifier,
            # The id, never the token: every operator reads the audit log.
            after={"action": action_code, "confirmation_id": conf.pk},
        )
    return conf


@action("confirmation.target")
def check_confirm_target(*, actor: Actor, token: Any, typed: Any) -> Confirmation:
    """Step 2: the operator retypes the target's identifier, exactly (`target_matches`)."""
    require_perm(actor, "high_risk")
    if not isinstance(typed, str):
        raise InvalidInput(_("Type the target's identifier."), code="confirmation_mismatch")
    with transaction.atomic():
        conf = _load(token, actor, lock=True)
        _refuse_if_unusable(conf)
        if conf.state != Confirmation.IMPACT_SHOWN:
            raise ConfirmationError(
                _("This confirmation is past the retype step."), code="confirmation_out_of_order"
            )
        if not target_matches(typed, conf.target_identifier):
            conf.attempts += 1
            if conf.attempts >= MAX_TARGET_ATTEMPTS:
                conf.state = Confirmation.CANCELLED
            conf.save(update_fields=["attempts", "state"])
            mismatch = True
        else:
            conf.state = Confirmation.TARGET_CONFIRMED
            conf.confirmed_at = timezone.now()
            conf.save(update_fields=["state", "confirmed_at"])
            mismatch = False
            record_audit(
                actor,
                "confirmation.target",
                target_type=conf.subject_type,
                target_id=conf.subject_id,
                target_label=conf.target_identifier,
                after={"action": conf.action, "confirmation_id": conf.pk},
            )
    if mismatch:
        raise ConfirmationError(
            _("The identifier you typed does not match the target."),
            code="confirmation_mismatch",
            http_status=400,
        )
    return conf


def target_matches(typed: str, identifier: str) -> bool:
    """Whether a retyped identifier names the target: code point for code point, after
    dropping the whitespace around it (a phone keyboard adds a space after a word, or
    pastes one) — never case folding or Unicode normalisation (identifiers are
    case-sensitive; a look-alike such as Cyrillic 'о' or full-width letters must fail)."""
    return hmac.compare_digest(typed.strip().encode(), identifier.strip().encode())


def _refuse_if_unusable(conf: Confirmation) -> None:
    if conf.state in (Confirmation.CONSUMED, Confirmation.CANCELLED):
        raise ConfirmationError(
            _("This confirmation was already used or cancelled."), code="confirmation_used"
        )
    if conf.expires_at <= timezone.now():
        raise ConfirmationError(_("This confirmation has expired."), code="confirmation_expired")


def consume_confirmation(
    actor: Actor,
    *,
    token: Any,
    action_code: str,
    subject_type: str,
    subject_id: Any,
    params: dict[str, Any],
) -> Confirmation:
    """Step 3 gate, called by every high-risk check_*: valid once, for exactly this action.

    Must run inside the action's transaction so the confirmation is spent only if
    the action commits.
    """
    require_perm(actor, "high_risk")
    require_recent(actor)
    if actor.system:
        # A system actor executes an operator's already-consumed decision (e.g. a job).
        return None  # type: ignore[return-value]
    if not token:
        raise ConfirmationError(
            _("High-risk actions need the three-step confirmation."), code="confirmation_incomplete"
        )
    conf = _load(token, actor, lock=True)
    _refuse_if_unusable(conf)
    if conf.state != Confirmation.TARGET_CONFIRMED:
        raise ConfirmationError(
            _("Retype the target's identifier before executing."), code="confirmation_incomplete"
        )
    if (
        conf.action != action_code
        or conf.subject_type != subject_type
        or conf.subject_id != str(subject_id)
        or conf.params_hash != params_hash(params)
    ):
        raise ConfirmationError(
            _("This confirmation was made for another action, target or arguments."),
            code="confirmation_wrong_target",
        )
    updated = Confirmation.objects.filter(pk=conf.pk, state=Confirmation.TARGET_CONFIRMED).update(
        state=Confirmation.CONSUMED, consumed_at=timezone.now()
    )
    if updated != 1:
        raise ConfirmationError(_("This confirmation was already used."), code="confirmation_used")
    return conf


@action("confirmation.execute")
def check_execute_confirmation(*, actor: Actor, token: Any) -> Any:
    """Step 3 for human clicks: run the confirmed action with the arguments that were shown."""
    conf = _load(token, actor)
    entry = get_high_risk(conf.action)
    params = dict(conf.impact.get("params") or {})
    return entry.execute(actor=actor, confirmation=str(conf.token), **params)
