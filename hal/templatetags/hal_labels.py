"""Template filters: `{{ code|status_label }}`, `|provider_label`, `|auth_label`."""

from __future__ import annotations

from typing import Any

from django import template

from hal.i18n import labels

register = template.Library()
register.filter("status_label", labels.status_label)
register.filter("provider_label", labels.provider_label)
register.filter("auth_label", labels.auth_label)
register.filter("setting_type_label", labels.setting_type_label)
register.filter("tier_label", labels.tier_label)
register.filter("bool_label", labels.bool_label)
register.filter("room_title_label", labels.room_title_label)
register.filter("audit_action_label", labels.audit_action_label)
register.filter("via_label", labels.via_label)
register.filter("job_kind_label", labels.job_kind_label)
register.filter("incident_event_label", labels.incident_event_label)


@register.filter
def audit_target(entry: Any) -> str:
    """{{ entry|audit_target }}: the target label of an audit row (dict or model)."""
    get = entry.get if isinstance(entry, dict) else lambda k, d="": getattr(entry, k, d)
    return labels.audit_target_label(get("target_type", ""), get("target_label", ""))
