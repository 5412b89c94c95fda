"""Alert source actions: create (administer + recent re-auth), revoke, authenticate a post.

A source's token is `hal-alerts-` + 32 random bytes (url-safe); only its sha256 is stored,
so it is shown once, at creation. With `hmac` the source also signs each body: HAL makes
the key, shows it once and keeps it in the vault (owner `alertsource:<id>`).
"""

from __future__ import annotations

import hashlib
import hmac as hmaclib
import secrets
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from alerts.models import AlertSource
from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.actions.oneline import check_one_line
from hal.errors import Conflict, InvalidInput, NotAuthenticated, NotFound
from hal.models import Incident

PREFIX = "hal-alerts-"
HMAC_PURPOSE = "alerts.hmac_key"
OWNER_TYPE = "alertsource"
NAME_MAX = 100
# Alertmanager's and Grafana's usual severity labels → HAL's severities.
DEFAULT_SEVERITY_MAP = {
    "critical": "sev1",
    "page": "sev1",
    "error": "sev2",
    "high": "sev2",
    "warning": "sev3",
    "medium": "sev3",
    "info": "sev4",
    "low": "sev4",
    "none": "sev4",
}
DEFAULT_SEVERITY = "sev3"


def hash_token(raw: str) -> str:
    """The stored form of a source token."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _clean_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(_("Give the alert source a name."), code="invalid_name")
    cleaned = " ".join(check_one_line(name.strip(), "name").split())
    if len(cleaned) > NAME_MAX:
        raise InvalidInput(
            _("The name must be at most 100 printable characters."), code="invalid_name"
        )
    return cleaned


def _clean_map(value: Any) -> dict[str, str]:
    if value in (None, ""):
        return {}
    if not isinstance(value, dict) or len(value) > 50:
        raise InvalidInput(
            _("The severity map must map label values to sev1–sev4."), code="invalid_severity_map"
        )
    out: dict[str, str] = {}
    for key, sev in value.items():
        if not isinstance(key, str) or not key or len(key) > 100 or sev not in Incident.SEVERITIES:
            raise InvalidInput(
                _("The severity map must map label values to sev1–sev4."),
                code="invalid_severity_map",
            )
        out[key.lower()] = sev
    return out


def _clean_label(value: Any) -> str:
    if value in (None, ""):
        return "severity"
    if not isinstance(value, str) or not value.isidentifier() or len(value) > 100:
        raise InvalidInput(_("The severity label must be a label name."), code="invalid_label")
    return value


@action("alerts.source_create")
def check_create_source(
    *,
    actor: Actor,
    name: Any,
    kind: Any,
    severity_label: Any = None,
    severity_map: Any = None,
    hmac: Any = False,
) -> tuple[AlertSource, str, str]:
    """Create an alert source; returns (row, raw token, HMAC key or "") — both shown once."""
    require_perm(actor, "administer")
    require_recent(actor)
    name = _clean_name(name)
    if kind not in AlertSource.KINDS:
        raise InvalidInput(_("kind must be alertmanager or grafana."), code="invalid_kind")
    if not isinstance(hmac, bool):
        raise InvalidInput(_("hmac must be true or false."), code="invalid_hmac")
    label, mapping = _clean_label(severity_label), _clean_map(severity_map)
    if AlertSource.objects.filter(name=name).exists():
        raise Conflict(_("An alert source has this name already."), code="name_taken")
    return do_create_source(actor, name, kind, label, mapping, hmac)


def do_create_source(
    actor: Actor, name: str, kind: str, label: str, mapping: dict[str, str], with_hmac: bool
) -> tuple[AlertSource, str, str]:
    from vault.api import put_secret

    raw = PREFIX + secrets.token_urlsafe(32)
    key = secrets.token_urlsafe(32) if with_hmac else ""
    with transaction.atomic():
        row = AlertSource.objects.create(
            name=name,
            kind=kind,
            token_hash=hash_token(raw),
            hint=raw[-4:],
            hmac_required=with_hmac,
            severity_label=label,
            severity_map=mapping,
            created_by=actor.label[:150],
        )
        if key:
            put_secret(
                purpose=HMAC_PURPOSE,
                owner_type=OWNER_TYPE,
                owner_id=row.pk,
                plaintext=key,
                actor=actor,
            )
        record_audit(
            actor,
            "alerts.source_create",
            target_type="alertsource",
            target_id=row.pk,
            target_label=f"{name} (…{row.hint})",
            after={"name": name, "kind": kind, "hmac": with_hmac, "severity_map": mapping},
        )
    return row, raw, key


@action("alerts.source_revoke")
def check_revoke_source(*, actor: Actor, source_id: Any) -> AlertSource:
    """Revoke an alert source's token (its posts get 401 from now on); idempotent."""
    require_perm(actor, "administer")
    require_recent(actor)
    try:
        pk = int(source_id)
    except (TypeError, ValueError):
        pk = 0
    row = AlertSource.objects.filter(pk=pk).first() if pk > 0 else None
    if row is None:
        raise NotFound(_("No such alert source."), code="alert_source_not_found")
    if row.revoked_at is not None:
        return row
    return do_revoke_source(actor, row)


def do_revoke_source(actor: Actor, row: AlertSource) -> AlertSource:
    from vault.api import delete_secrets_for

    with transaction.atomic():
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
        delete_secrets_for(owner_type=OWNER_TYPE, owner_id=row.pk, actor=actor)
        record_audit(
            actor,
            "alerts.source_revoke",
            target_type="alertsource",
            target_id=row.pk,
            target_label=f"{row.name} (…{row.hint})",
            after={"revoked_at": row.revoked_at.isoformat()},
        )
    return row


def authenticate(authorization: str, kind: str) -> AlertSource:
    """The active source of `kind` whose token is the bearer in `authorization`."""
    scheme, _sep, raw = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip().startswith(PREFIX):
        raise NotAuthenticated(_("A valid alert source token is required."), code="bad_token")
    row = AlertSource.objects.filter(token_hash=hash_token(raw.strip())).first()
    if row is None or row.revoked_at is not None or row.kind != kind:
        raise NotAuthenticated(_("A valid alert source token is required."), code="bad_token")
    return row


def check_signature(source: AlertSource, body: bytes, signature: str) -> None:
    """Refuse a body whose HMAC-SHA256 (hex, optionally `sha256=`-prefixed) is not right."""
    if not source.hmac_required:
        return
    from vault.api import find_secret, get_plaintext

    secret = find_secret(purpose=HMAC_PURPOSE, owner_type=OWNER_TYPE, owner_id=source.pk)
    given = (signature or "").strip().removeprefix("sha256=")
    if secret is None or not given:
        raise NotAuthenticated(_("The body's signature is missing or wrong."), code="bad_signature")
    key = get_plaintext(secret, purpose=HMAC_PURPOSE, actor_label=f"alerts:{source.name}")
    want = hmaclib.new(key.reveal().encode("utf-8"), body, hashlib.sha256).hexdigest()
    if not hmaclib.compare_digest(want, given.lower()):
        raise NotAuthenticated(_("The body's signature is missing or wrong."), code="bad_signature")
