"""The Prometheus metrics token (issue 47, ADR 0023): made or replaced by an administrator
after re-auth, shown once; only its sha256 is stored (a Setting row), and every change
writes an audit row. GET /metrics accepts it as a bearer (or HAL_METRICS_TOKEN_SHA256)."""

from __future__ import annotations

import hmac
import secrets

from django.db import transaction

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.models.fleet import hash_token
from hal.models.ops import Setting

PREFIX = "hal-metrics-"
SETTING = "metrics.token_sha256"  # not a registered setting: never shown on /settings


@action("metrics_token.rotate")
def check_rotate_metrics_token(*, actor: Actor) -> str:
    """Make a new metrics token (the old one stops working); returns it, shown once."""
    require_perm(actor, "administer")
    require_recent(actor)
    return do_rotate_metrics_token(actor)


def do_rotate_metrics_token(actor: Actor) -> str:
    raw = PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        before = Setting.objects.filter(name=SETTING).exists()
        Setting.objects.update_or_create(
            name=SETTING, defaults={"value": hash_token(raw), "updated_by": actor.label}
        )
        record_audit(
            actor,
            "metrics_token.rotate",
            target_type="setting",
            target_id=SETTING,
            target_label="metrics token",
            before={"token": "set" if before else "none"},
            after={"token": f"…{raw[-4:]}"},
        )
    return raw


@action("metrics_token.revoke")
def check_revoke_metrics_token(*, actor: Actor) -> bool:
    """Remove the metrics token (True if there was one)."""
    require_perm(actor, "administer")
    require_recent(actor)
    with transaction.atomic():
        deleted, _rows = Setting.objects.filter(name=SETTING).delete()
        record_audit(
            actor,
            "metrics_token.revoke",
            target_type="setting",
            target_id=SETTING,
            target_label="metrics token",
            before={"token": "set" if deleted else "none"},
            after={"token": "none"},
        )
    return bool(deleted)


def metrics_token_exists() -> bool:
    """Whether a console-made metrics token is set (the MCP access page says so)."""
    return Setting.objects.filter(name=SETTING).exists()


def metrics_token_matches(raw: str) -> bool:
    """True when `raw` is the console-made metrics token (one indexed read)."""
    stored = Setting.objects.filter(name=SETTING).values_list("value", flat=True).first()
    return isinstance(stored, str) and hmac.compare_digest(stored, hash_token(raw))
