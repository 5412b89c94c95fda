"""Emergency-recovery mode: a console-wide flag with reason and who/when, shown on every
page. Entering it needs a recent re-authentication; both directions are audited."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.actions.precheck import register_precheck
from hal.errors import Conflict, InvalidInput
from hal.live.events import OPS_GROUP, publish
from hal.models import EmergencyState


def _reason(value: Any, *, required: bool) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str) or len(value) > 500:
        raise InvalidInput(
            _("reason must be text (at most 500 characters)."), code="invalid_reason"
        )
    text = value.strip()
    if required and not text:
        raise InvalidInput(_("Say why (reason is required)."), code="invalid_reason")
    return text


def _locked_state() -> EmergencyState:
    EmergencyState.objects.get_or_create(pk=1)
    return EmergencyState.objects.select_for_update().get(pk=1)


@action("emergency.enter")
def check_enter_emergency(*, actor: Actor, reason: Any) -> EmergencyState:
    """Enter emergency-recovery mode (write, needs recent re-auth); reason required."""
    require_perm(actor, "operate")
    require_recent(actor)
    reason = _reason(reason, required=True)
    with transaction.atomic():
        state = _locked_state()
        _require_inactive(state)
        return do_enter_emergency(actor, state, reason=reason)


def _require_inactive(state: EmergencyState) -> None:
    if state.active:
        raise Conflict(_("Emergency recovery is already active."), code="emergency_already_active")


def do_enter_emergency(actor: Actor, state: EmergencyState, *, reason: str) -> EmergencyState:
    with transaction.atomic():
        now = timezone.now()
        before = state.as_dict()
        state.active = True
        state.reason = reason
        state.changed_by = state.entered_by = actor.label[:150]
        state.changed_at = state.entered_at = now
        _save_and_record(actor, "emergency.enter", state, before=before, reason=reason)
    return state


@action("emergency.leave")
def check_leave_emergency(*, actor: Actor, reason: Any = "") -> EmergencyState:
    """Leave emergency-recovery mode (write)."""
    require_perm(actor, "operate")
    reason = _reason(reason, required=False)
    with transaction.atomic():
        state = _locked_state()
        _require_active(state)
        return do_leave_emergency(actor, state, reason=reason)


def _require_active(state: EmergencyState) -> None:
    if not state.active:
        raise Conflict(_("Emergency recovery is not active."), code="emergency_not_active")


def do_leave_emergency(actor: Actor, state: EmergencyState, *, reason: str) -> EmergencyState:
    with transaction.atomic():
        before = state.as_dict()
        state.active = False
        state.reason = reason
        state.changed_by = actor.label[:150]
        state.changed_at = timezone.now()
        _save_and_record(actor, "emergency.leave", state, before=before, reason=reason)
    return state


def _save_and_record(
    actor: Actor, code: str, state: EmergencyState, *, before: dict[str, Any], reason: str
) -> None:
    """Save the state row, audit the change and tell every console page (one transaction)."""
    state.save()
    record_audit(
        actor,
        code,
        target_type="emergency",
        target_id="1",
        target_label="emergency recovery",
        before=before,
        after=state.as_dict(),
        message=reason,
    )
    publish(OPS_GROUP, "emergency.changed", state.as_dict())


def _current_state() -> EmergencyState:
    return EmergencyState.objects.filter(pk=1).first() or EmergencyState(pk=1)


# Prechecks (hal.actions.precheck): the same state checks, read without a lock or a write.
register_precheck("emergency.enter", lambda params: _require_inactive(_current_state()))
register_precheck("emergency.leave", lambda params: _require_active(_current_state()))
