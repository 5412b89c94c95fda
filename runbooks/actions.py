"""Runbook actions: create, edit (a new immutable version), archive — audited, administer."""

from __future__ import annotations

import re
from typing import Any

from django.db import IntegrityError, transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.oneline import check_one_line
from hal.errors import Conflict, InvalidInput, NotFound
from hal.web.ids import as_id
from runbooks.models import SCOPE_KINDS, Runbook, RunbookVersion

MAX_TITLE = 200
MAX_BODY = 100_000
MAX_TAGS = 20
MAX_SCOPE_ITEMS = 50
MAX_NOTE = 500
_TAG = re.compile(r"^[\w.:/-]{1,40}$")


def _text(
    value: Any, code: str, name: str, *, limit: int, required: bool, one_line: bool = True
) -> str:
    """A text field; one line unless `one_line=False` (the runbook's body)."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(format_lazy(_("{name} must be text."), name=name), code=code)
    value = value.strip()
    if one_line:
        check_one_line(value, name)
    if required and not value:
        raise InvalidInput(format_lazy(_("{name} is required."), name=name), code=code)
    if len(value) > limit:
        raise InvalidInput(
            format_lazy(_("{name} is longer than {limit} characters."), name=name, limit=limit),
            code=code,
        )
    return value


def _list(value: Any) -> Any:
    if value in (None, ""):
        return []
    if isinstance(value, str):  # a form field: "a, b c"
        return [v for v in value.replace(",", " ").split() if v]
    return value


def clean_tags(value: Any) -> list[str]:
    """Tags: short words (letters, digits, . : / - _), lower-cased, deduplicated."""
    items = _list(value)
    if not isinstance(items, list | tuple) or len(items) > MAX_TAGS:
        raise InvalidInput(
            format_lazy(_("tags must be a list of at most {n} words."), n=MAX_TAGS),
            code="invalid_tags",
        )
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or not _TAG.fullmatch(item.strip()):
            raise InvalidInput(
                _("A tag is a word of letters, digits and . : / - _ (at most 40)."),
                code="invalid_tags",
            )
        tag = item.strip().lower()
        if tag not in out:
            out.append(tag)
    return out


def clean_scopes(value: Any) -> dict[str, list[str]]:
    """Scopes: {"pages": [...], "servers": [...], "modules": [...]}, each optional."""
    if value in (None, ""):
        return {}
    if not isinstance(value, dict) or set(value) - set(SCOPE_KINDS):
        raise InvalidInput(
            _("scopes must be an object with pages, servers and/or modules."),
            code="invalid_scopes",
        )
    out: dict[str, list[str]] = {}
    for kind in SCOPE_KINDS:
        items = _list(value.get(kind))
        if not isinstance(items, list | tuple) or len(items) > MAX_SCOPE_ITEMS:
            raise InvalidInput(
                format_lazy(_("scopes.{kind} must be a list of names."), kind=kind),
                code="invalid_scopes",
            )
        names: list[str] = []
        for item in items:
            if isinstance(item, int) and not isinstance(item, bool):
                item = str(item)  # a server id
            if not isinstance(item, str) or not item.strip() or len(item.strip()) > 253:
                raise InvalidInput(
                    format_lazy(_("scopes.{kind} must be a list of names."), kind=kind),
                    code="invalid_scopes",
                )
            item = check_one_line(item.strip(), f"scopes.{kind}")
            if item not in names:
                names.append(item)
        if names:
            out[kind] = names
    return out


def _content(title: Any, body: Any, tags: Any, scopes: Any) -> dict[str, Any]:
    return {
        "title": _text(title, "invalid_title", "title", limit=MAX_TITLE, required=True),
        "body": _text(body, "invalid_body", "body", limit=MAX_BODY, required=True, one_line=False),
        "tags": clean_tags(tags),
        "scopes": clean_scopes(scopes),
    }


def load_runbook(runbook_id: Any, *, lock: bool = False) -> Runbook:
    """The runbook with this id (404 runbook_not_found)."""
    pk = as_id(runbook_id)
    if pk is None:
        raise NotFound(_("No such runbook."), code="runbook_not_found")
    qs = Runbook.objects.select_for_update() if lock else Runbook.objects
    found = qs.filter(pk=pk).first()
    if found is None:
        raise NotFound(_("No such runbook."), code="runbook_not_found")
    return found


def _require_title_free(title: str, exclude: int | None = None) -> None:
    clash = Runbook.objects.filter(title__iexact=title)
    if exclude is not None:
        clash = clash.exclude(pk=exclude)
    if clash.exists():
        raise Conflict(_("A runbook with this title exists."), code="runbook_exists")


def _apply(runbook: Runbook, content: dict[str, Any]) -> None:
    runbook.title = content["title"]
    runbook.body = content["body"]
    runbook.tags = content["tags"]
    runbook.tags_text = " " + " ".join(content["tags"]) + " " if content["tags"] else ""
    runbook.scopes = content["scopes"]


def _snapshot(runbook: Runbook, actor: Actor, note: str) -> RunbookVersion:
    return RunbookVersion.objects.create(
        runbook=runbook,
        version=runbook.version,
        title=runbook.title,
        body=runbook.body,
        tags=runbook.tags,
        scopes=runbook.scopes,
        author=actor.label[:150],
        note=note,
    )


# --- create ------------------------------------------------------------------------------


@action("runbooks.create")
def check_create_runbook(
    *, actor: Actor, title: Any, body: Any, tags: Any = None, scopes: Any = None
) -> Runbook:
    """Write a new runbook (administer); its first version is v1."""
    require_perm(actor, "administer")
    content = _content(title, body, tags, scopes)
    _require_title_free(content["title"])
    return do_create_runbook(actor, content)


def do_create_runbook(actor: Actor, content: dict[str, Any]) -> Runbook:
    try:
        with transaction.atomic():
            runbook = Runbook(version=1, created_by=actor.label[:150])
            _apply(runbook, content)
            runbook.save()
            _snapshot(runbook, actor, "")
            record_audit(
                actor,
                "runbooks.create",
                target=runbook,
                after={"version": 1, "title": runbook.title, "tags": runbook.tags},
            )
    except IntegrityError:  # a concurrent create with the same title won
        raise Conflict(_("A runbook with this title exists."), code="runbook_exists") from None
    return runbook


# --- edit --------------------------------------------------------------------------------


@action("runbooks.edit")
def check_edit_runbook(
    *,
    actor: Actor,
    runbook_id: Any,
    title: Any,
    body: Any,
    tags: Any = None,
    scopes: Any = None,
    base_version: Any = None,
    note: Any = "",
) -> Runbook:
    """Save a change as the next version (administer). `base_version`: the version the
    editor started from; another edit in between is refused (runbook_stale)."""
    require_perm(actor, "administer")
    content = _content(title, body, tags, scopes)
    note = _text(note, "invalid_note", "note", limit=MAX_NOTE, required=False)
    base = None
    if base_version not in (None, ""):
        base = as_id(base_version if isinstance(base_version, int) else str(base_version))
        if base is None:  # also "²" (str.isdigit() says yes, int() refuses it)
            raise InvalidInput(_("base_version must be a version number."), code="invalid_version")
    with transaction.atomic():
        runbook = load_runbook(runbook_id, lock=True)
        if runbook.archived:
            raise Conflict(_("This runbook is archived."), code="runbook_archived")
        if base is not None and base != runbook.version:
            raise Conflict(
                format_lazy(
                    _("The runbook changed meanwhile (now v{version}); reload it."),
                    version=runbook.version,
                ),
                code="runbook_stale",
            )
        current = {k: getattr(runbook, k) for k in ("title", "body", "tags", "scopes")}
        if current == content:
            raise InvalidInput(_("Nothing changed."), code="nothing_to_change")
        _require_title_free(content["title"], exclude=runbook.pk)
        return do_edit_runbook(actor, runbook, content, note)


def do_edit_runbook(
    actor: Actor, runbook: Runbook, content: dict[str, Any], note: str = ""
) -> Runbook:
    with transaction.atomic():
        before = {"version": runbook.version, "title": runbook.title}
        runbook.version += 1
        _apply(runbook, content)
        runbook.save()
        _snapshot(runbook, actor, note)
        record_audit(
            actor,
            "runbooks.edit",
            target=runbook,
            before=before,
            after={"version": runbook.version, "title": runbook.title, "tags": runbook.tags},
        )
    return runbook


# --- archive -----------------------------------------------------------------------------


@action("runbooks.archive")
def check_archive_runbook(*, actor: Actor, runbook_id: Any) -> Runbook:
    """Archive a runbook (administer): no longer listed to models; its versions stay."""
    require_perm(actor, "administer")
    with transaction.atomic():
        runbook = load_runbook(runbook_id, lock=True)
        if runbook.archived:
            raise Conflict(_("This runbook is archived."), code="runbook_archived")
        return do_archive_runbook(actor, runbook)


def do_archive_runbook(actor: Actor, runbook: Runbook) -> Runbook:
    with transaction.atomic():
        runbook.archived = True
        runbook.save(update_fields=["archived", "updated_at"])
        record_audit(
            actor,
            "runbooks.archive",
            target=runbook,
            before={"version": runbook.version, "archived": False},
            after={"version": runbook.version, "archived": True},
        )
    return runbook
