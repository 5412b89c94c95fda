"""Typed console settings: a registry (name, type, default, validation) and the high-risk
`settings.change` action with its change history.

Other parts of HAL declare their knobs with `register_setting(...)` and read them with
`get_setting(name)`; changing one goes through the three-step confirmation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.confirm import Impact, consume_confirmation, register_high_risk
from hal.actions.oneline import check_one_line
from hal.errors import InvalidInput, NotFound
from hal.i18n.labels import SETTING_TYPE_NAMES
from hal.live.events import OPS_GROUP, publish
from hal.models import Setting, SettingChange

TYPES = ("int", "bool", "str", "choice", "duration")
CHANGE_CODE = "settings.change"
_DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class SettingDef:
    """A registered setting: its type, default, bounds and what it controls."""

    name: str
    type: str
    default: Any
    description: str
    controls: str = ""
    choices: tuple[str, ...] = ()
    min_value: int | None = None
    max_value: int | None = None
    max_length: int = 500
    validator: Callable[[Any], None] | None = field(default=None, compare=False)
    # Values offered by a select when the set is only known at run time (e.g. connections):
    # a callable returning (value, label) pairs. The validator still decides what is valid.
    options: Callable[[], list[tuple[str, Any]]] | None = field(default=None, compare=False)

    def option_pairs(self) -> list[tuple[str, Any]]:
        """The (value, label) pairs the settings page offers, or [] for a free field."""
        return list(self.options()) if self.options is not None else []

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "description": self.description,
            "controls": self.controls,
            "choices": list(self.choices),
            "min": self.min_value,
            "max": self.max_value,
        }


REGISTRY: dict[str, SettingDef] = {}


def register_setting(
    name: str,
    *,
    type: str,
    default: Any,
    description: str,
    controls: str = "",
    choices: tuple[str, ...] | list[str] = (),
    min_value: int | None = None,
    max_value: int | None = None,
    max_length: int = 500,
    validator: Callable[[Any], None] | None = None,
    options: Callable[[], list[tuple[str, Any]]] | None = None,
) -> SettingDef:
    """Declare a setting (idempotent for the same definition); returns its definition."""
    if type not in TYPES:
        raise ValueError(f"unknown setting type {type!r}")
    if type == "choice" and not choices:
        raise ValueError("a choice setting needs choices")
    definition = SettingDef(
        name=name,
        type=type,
        default=default,
        description=description,
        controls=controls or description,
        choices=tuple(choices),
        min_value=min_value,
        max_value=max_value,
        max_length=max_length,
        validator=validator,
        options=options,
    )
    # The default must itself be valid, or get_setting could return nonsense.
    coerce(definition, default)
    REGISTRY[name] = definition
    return definition


def get_definition(name: Any) -> SettingDef:
    """The definition of a registered setting, or 404 setting_not_found."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise NotFound(
            format_lazy(_("Unknown setting {name!r}."), name=name), code="setting_not_found"
        )
    return REGISTRY[name]


def coerce(definition: SettingDef, value: Any) -> Any:
    """Validate `value` for the setting and return its stored form (400 on a bad value)."""

    def bad(why: Any) -> InvalidInput:
        return InvalidInput(
            format_lazy(_("{name}: {why}"), name=definition.name, why=why),
            code="invalid_setting_value",
        )

    kind = definition.type
    if kind == "bool":
        # Forms send text; JSON sends booleans. Nothing else is a boolean here.
        if isinstance(value, bool):
            result: Any = value
        elif isinstance(value, str) and value.strip().lower() in ("true", "false"):
            result = value.strip().lower() == "true"
        else:
            raise bad(_("expected true or false."))
    elif kind in ("int", "duration"):
        if isinstance(value, bool):
            raise bad(_("expected a number."))
        if isinstance(value, int):
            result = value
        elif isinstance(value, str) and kind == "int" and re.fullmatch(r"\s*-?\d+\s*", value):
            result = int(value)
        elif isinstance(value, str) and kind == "duration" and (m := _DURATION.match(value)):
            result = int(m.group(1)) * _UNITS[m.group(2)]
        else:
            raise bad(
                _("expected a whole number of seconds (or 90s, 15m, 2h, 1d).")
                if kind == "duration"
                else _("expected a whole number.")
            )
        if definition.min_value is not None and result < definition.min_value:
            raise bad(
                format_lazy(_("must be at least {min_value}."), min_value=definition.min_value)
            )
        if definition.max_value is not None and result > definition.max_value:
            raise bad(
                format_lazy(_("must be at most {max_value}."), max_value=definition.max_value)
            )
    elif kind == "str":
        if not isinstance(value, str):
            raise bad(_("expected text."))
        result = check_one_line(value.strip(), definition.name)
        if len(result) > definition.max_length:
            raise bad(
                format_lazy(
                    _("longer than {max_length} characters."), max_length=definition.max_length
                )
            )
    else:  # choice
        if not isinstance(value, str) or value not in definition.choices:
            raise bad(
                format_lazy(_("expected one of {choices}."), choices=", ".join(definition.choices))
            )
        result = value
    if definition.validator is not None:
        # A validator may raise InvalidInput with its own stable code (it passes through);
        # a ValueError becomes invalid_setting_value.
        try:
            definition.validator(result)
        except ValueError as exc:
            raise bad(str(exc)) from None
    return result


def get_setting(name: str) -> Any:
    """The current value of a registered setting (the stored value, else the default)."""
    definition = get_definition(name)
    row = Setting.objects.filter(name=name).only("value").first()
    if row is None:
        return definition.default
    try:
        return coerce(definition, row.value)
    except InvalidInput:
        # A stored value that no longer validates (bounds tightened) falls back safely.
        return definition.default


def describe(name: str) -> dict[str, Any]:
    definition = get_definition(name)
    row = Setting.objects.filter(name=name).first()
    options = [{"value": v, "label": i18n.render(label)} for v, label in definition.option_pairs()]
    return {
        **definition.as_dict(),
        **({"options": options} if definition.options is not None else {}),
        "value": get_setting(name),
        "is_default": row is None,
        "updated_at": row.updated_at.isoformat() if row else None,
        "updated_by": row.updated_by if row else "",
    }


def describe_all() -> list[dict[str, Any]]:
    return [describe(name) for name in sorted(REGISTRY)]


# --- the high-risk change ---------------------------------------------------------------


def _reason(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 500:
        raise InvalidInput(
            _("reason must be text (at most 500 characters)."), code="invalid_reason"
        )
    return value.strip()


def shown_value(definition: SettingDef, value: Any) -> Any:
    """A value as the operator picked it — an option's label (a connection's "@gpt", not
    its id; "off"), yes/no for a switch — as a storable text or string; None when the
    value is shown as it is (a number, free text)."""
    if definition.type == "bool":
        return i18n.text(gettext_noop("yes") if value else gettext_noop("no"))
    for option, label in definition.option_pairs():
        if option == value:
            return label if i18n.is_text(label) else str(label)
    return None


def _in_sentence(shown: Any, value: Any) -> Any:
    # A picked label as it is; free text quoted (an empty value stays visible); numbers bare.
    if shown is not None:
        return shown
    return repr(value) if isinstance(value, str) else value


def change_impact(actor: Actor, params: dict[str, Any]) -> Impact:
    """Step 1 of the confirmation: what changing this setting would do (the values and what
    the setting controls in the reader's language; the stored raw values for the record)."""
    definition = get_definition(params.get("name"))
    new = coerce(definition, params.get("value"))
    _reason(params.get("reason"))
    current = get_setting(definition.name)
    before, after = shown_value(definition, current), shown_value(definition, new)
    details: dict[str, Any] = {
        "controls": definition.controls,
        "controls_i18n": i18n.text(definition.controls),
        "before": current,
        "after": new,
        "type": definition.type,
        "type_i18n": i18n.text(SETTING_TYPE_NAMES.get(definition.type, definition.type)),
    }
    if before is not None:
        details["before_i18n"] = before
    if after is not None:
        details["after_i18n"] = after
    return Impact(
        subject_type="setting",
        subject_id=definition.name,
        target_identifier=definition.name,
        summary=i18n.text(
            gettext_noop("Change {name} from {before} to {after}."),
            name=definition.name,
            before=_in_sentence(before, current),
            after=_in_sentence(after, new),
        ),
        details=details,
    )


@action(CHANGE_CODE)
def check_change_setting(
    *, actor: Actor, name: Any, value: Any, reason: Any = None, confirmation: Any = None
) -> Setting:
    """Change a setting (high-risk: administer permission, re-auth and the three steps)."""
    require_perm(actor, "administer")
    definition = get_definition(name)
    new = coerce(definition, value)
    clean_reason = _reason(reason)
    # Exactly the arguments step 1 was shown, as the caller sent them (reason optional).
    shown: dict[str, Any] = {"name": name, "value": value}
    if reason is not None:
        shown["reason"] = reason
    with transaction.atomic():
        consume_confirmation(
            actor,
            token=confirmation,
            action_code=CHANGE_CODE,
            subject_type="setting",
            subject_id=definition.name,
            params=shown,
        )
        return do_change_setting(actor, definition, new, reason=clean_reason)


def do_change_setting(actor: Actor, definition: SettingDef, new: Any, *, reason: str) -> Setting:
    with transaction.atomic():
        row = Setting.objects.select_for_update().filter(name=definition.name).first()
        before = get_setting(definition.name)
        if row is None:
            row = Setting(name=definition.name)
        row.value = new
        row.updated_by = actor.label[:150]
        row.save()
        entry = record_audit(
            actor,
            CHANGE_CODE,
            target_type="setting",
            target_id=definition.name,
            target_label=definition.name,
            before={"value": before},
            after={"value": new},
            message=reason,
        )
        SettingChange.objects.create(
            name=definition.name,
            before=before,
            after=new,
            reason=reason,
            actor=actor.user if getattr(actor.user, "pk", None) else None,
            actor_label=actor.label[:150],
            via=actor.via,
            audit=entry,
        )
        publish(OPS_GROUP, "setting.changed", {"name": definition.name, "value": new})
    return row


register_high_risk(CHANGE_CODE, impact=change_impact, execute=check_change_setting)


# --- settings other parts of HAL read ---------------------------------------------------

register_setting(
    "proposals.expiry_minutes",
    type="int",
    default=60,
    min_value=1,
    max_value=7 * 24 * 60,
    # Marked only: the settings page translates it; the API and AI keep English.
    description=gettext_noop("Minutes after which a pending AI proposal expires unapproved."),
    controls=gettext_noop("How long an AI model's proposed change stays approvable."),
)
register_setting(
    "webfetch.auto_fetch_default",
    type="bool",
    default=True,
    description=gettext_noop("Whether new operators pre-fetch URLs they paste into the AI chat."),
    controls=gettext_noop("The default of the per-operator web pre-fetch switch."),
)
register_setting(
    "mail.check_timeout_seconds",
    type="duration",
    default=5,
    min_value=1,
    max_value=60,
    description=gettext_noop("How long a mail relay check waits for the SMTP server."),
    controls=gettext_noop("The timeout of the SMTP relay reachability check."),
)
register_setting(
    "dr.keep_snapshots",
    type="int",
    default=14,
    min_value=1,
    max_value=1000,
    description=gettext_noop("How many successful DR snapshots to keep; older ones are pruned."),
    controls=gettext_noop("DR snapshot retention (older snapshot directories are deleted)."),
)
register_setting(
    "tracing.record_content",
    type="bool",
    default=False,
    description=gettext_noop(
        "Whether OpenTelemetry traces carry prompt and reply text (off: sizes and tokens only)."
    ),
    controls=gettext_noop("Prompt and reply text in the traces HAL exports (OTEL_* variables)."),
)
