"""Template filters: `{{ code|status_label }}`, `|provider_label`, `|auth_label`."""

from __future__ import annotations

from django import template

from hal import labels

register = template.Library()
register.filter("status_label", labels.status_label)
register.filter("provider_label", labels.provider_label)
register.filter("auth_label", labels.auth_label)
register.filter("setting_type_label", labels.setting_type_label)
register.filter("tier_label", labels.tier_label)
register.filter("bool_label", labels.bool_label)
register.filter("room_title_label", labels.room_title_label)
