"""Actions on the fetch allowlist and curated sources (administer + re-auth, audited).

A domain on either list turns a model's `fetch_url` of it from a proposal into a plain
read (trust tier "curated"), so adding one widens what a model may do without asking:
every change needs `hal.administer` and a recent re-authentication.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.actions.oneline import check_one_line
from hal.errors import InvalidInput, NotFound
from webfetch.models import CuratedSource, FetchAllowDomain, normalize_domain, validate_domain


def _gate(actor: Actor) -> None:
    require_perm(actor, "administer")
    require_recent(actor)


def _text(data: dict, key: str, limit: int, *, one_line: bool = True) -> str:
    value = data.get(key) or ""
    if not isinstance(value, str) or len(value) > limit:
        raise InvalidInput(
            format_lazy(_("{name} is longer than {limit} characters."), name=key, limit=limit),
            code="invalid_input",
        )
    return check_one_line(value.strip(), key) if one_line else value.strip()


def _domain(value: Any) -> str:
    if not isinstance(value, str):
        value = ""
    try:
        validate_domain(value)
    except ValidationError:
        raise InvalidInput(
            format_lazy(_("{value!r} is not a domain name."), value=value), code="invalid_domain"
        ) from None
    return normalize_domain(value)


def allow_snapshot(row: FetchAllowDomain) -> dict[str, Any]:
    """An allowlist row as the audit log records it."""
    return {"domain": row.domain, "note": row.note}


def source_snapshot(row: CuratedSource) -> dict[str, Any]:
    """A curated source as the audit log records it."""
    return {
        "domain": row.domain,
        "url": row.url,
        "title": row.title,
        "tags": row.tags,
        "description": row.description,
        "enabled": row.enabled,
    }


def _load(model: Any, ref: Any, code: str) -> Any:
    if isinstance(ref, model):
        return ref
    try:
        return model.objects.get(pk=int(ref))
    except (TypeError, ValueError, model.DoesNotExist):
        raise NotFound(_("No such entry."), code=code) from None


@action("webfetch.allow_domain_save")
def check_save_allow_domain(*, actor: Actor, row: Any = None, data: Any) -> FetchAllowDomain:
    """Add (row=None) or change an allowlisted domain {domain, note}."""
    _gate(actor)
    if not isinstance(data, dict):
        raise InvalidInput(_("Send a JSON object."), code="invalid_json")
    current = None if row is None else _load(FetchAllowDomain, row, "allow_domain_not_found")
    fields = {"domain": _domain(data.get("domain")), "note": _text(data, "note", 200)}
    taken = FetchAllowDomain.objects.filter(domain=fields["domain"])
    if current is not None:
        taken = taken.exclude(pk=current.pk)
    if taken.exists():
        raise InvalidInput(_("That domain is already on the allowlist."), code="duplicate_domain")
    return do_save_allow_domain(actor, current, fields)


def do_save_allow_domain(
    actor: Actor, row: FetchAllowDomain | None, fields: dict[str, Any]
) -> FetchAllowDomain:
    """Insert or update the row; audited with before/after."""
    try:
        with transaction.atomic():
            if row is None:
                before = None
                row = FetchAllowDomain(**fields)
            else:
                row = FetchAllowDomain.objects.select_for_update().get(pk=row.pk)
                before = allow_snapshot(row)
                for key, value in fields.items():
                    setattr(row, key, value)
            row.save()
            after = allow_snapshot(row)
            record_audit(
                actor, "webfetch.allow_domain_save", target=row, before=before, after=after
            )
    except IntegrityError:
        raise InvalidInput(
            _("That domain is already on the allowlist."), code="duplicate_domain"
        ) from None
    return row


@action("webfetch.allow_domain_delete")
def check_delete_allow_domain(*, actor: Actor, row: Any) -> None:
    """Take a domain off the allowlist."""
    _gate(actor)
    row = _load(FetchAllowDomain, row, "allow_domain_not_found")
    with transaction.atomic():
        record_audit(actor, "webfetch.allow_domain_delete", target=row, before=allow_snapshot(row))
        row.delete()


def _clean_source(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInput(_("Send a JSON object."), code="invalid_json")
    unknown = set(data) - {"domain", "url", "title", "tags", "description", "enabled"}
    if unknown:
        raise InvalidInput(
            format_lazy(_("Unknown field(s): {unknown}."), unknown=sorted(unknown)),
            code="unknown_field",
        )
    url = _text(data, "url", 500)
    if url:
        try:
            URLValidator(schemes=["http", "https"])(url)
        except ValidationError:
            raise InvalidInput(_("Enter an http(s) URL."), code="invalid_url") from None
    title = _text(data, "title", 200)
    if not title:
        raise InvalidInput(_("Enter a title."), code="invalid_input")
    enabled = data.get("enabled", True)
    if not isinstance(enabled, bool):
        raise InvalidInput(_("enabled must be true or false."), code="invalid_input")
    return {
        "domain": _domain(data.get("domain")),
        "url": url,
        "title": title,
        "tags": _text(data, "tags", 300),
        "description": _text(data, "description", 5000, one_line=False),
        "enabled": enabled,
    }


@action("webfetch.curated_source_save")
def check_save_curated_source(*, actor: Actor, row: Any = None, data: Any) -> CuratedSource:
    """Add (row=None) or change a curated search source."""
    _gate(actor)
    current = None if row is None else _load(CuratedSource, row, "curated_source_not_found")
    return do_save_curated_source(actor, current, _clean_source(data))


def do_save_curated_source(
    actor: Actor, row: CuratedSource | None, fields: dict[str, Any]
) -> CuratedSource:
    """Insert or update the source; audited with before/after."""
    with transaction.atomic():
        if row is None:
            before = None
            row = CuratedSource(**fields)
        else:
            row = CuratedSource.objects.select_for_update().get(pk=row.pk)
            before = source_snapshot(row)
            for key, value in fields.items():
                setattr(row, key, value)
        row.save()
        after = source_snapshot(row)
        record_audit(actor, "webfetch.curated_source_save", target=row, before=before, after=after)
    return row


@action("webfetch.curated_source_delete")
def check_delete_curated_source(*, actor: Actor, row: Any) -> None:
    """Remove a curated source."""
    _gate(actor)
    row = _load(CuratedSource, row, "curated_source_not_found")
    with transaction.atomic():
        record_audit(
            actor, "webfetch.curated_source_delete", target=row, before=source_snapshot(row)
        )
        row.delete()
