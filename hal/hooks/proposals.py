"""Hooks run around proposals by apps above hal (the second-opinion reviewer).

`proposal_created(proposal)` is called after the creating transaction commits;
`proposal_created_in_transaction(proposal)` inside it (a hook's rows — the notifications'
outbox — commit or roll back with the proposal's); an extra adds keys to a proposal's API
JSON. Neither hal nor chatrooms imports the registering apps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("hal.proposals")

CreatedFn = Callable[[Any], None]
# rows, {proposal id: details visible?} -> {proposal id: {key: value}}
ExtraFn = Callable[[list[Any], dict[int, bool]], dict[int, dict[str, Any]]]
_CREATED: dict[str, CreatedFn] = {}
_IN_TRANSACTION: dict[str, CreatedFn] = {}
_EXTRAS: dict[str, ExtraFn] = {}


def register_on_proposal_created(name: str, fn: CreatedFn) -> None:
    """Call `fn(proposal)` after each new proposal commits (replaces a hook of that name)."""
    _CREATED[name] = fn


def register_in_proposal_transaction(name: str, fn: CreatedFn) -> None:
    """Call `fn(proposal)` inside the creating transaction (replaces a hook of that name)."""
    _IN_TRANSACTION[name] = fn


def register_proposal_extra(name: str, fn: ExtraFn) -> None:
    """Add keys to proposals' JSON (one call per list of rows, to batch its query)."""
    _EXTRAS[name] = fn


def unregister(name: str) -> None:
    """Remove both kinds of hook of this name (tests)."""
    _CREATED.pop(name, None)
    _IN_TRANSACTION.pop(name, None)
    _EXTRAS.pop(name, None)


def proposal_created(proposal: Any) -> None:
    """Run the hooks; a failing hook is logged and never undoes or blocks the proposal."""
    for name, fn in list(_CREATED.items()):
        try:
            fn(proposal)
        except Exception:
            log.exception("proposal hook %s failed for proposal %s", name, proposal.pk)


def proposal_created_in_transaction(proposal: Any) -> None:
    """Run the in-transaction hooks, each in a savepoint: a failing hook is logged and its
    own rows roll back, never the proposal."""
    from django.db import transaction

    for name, fn in list(_IN_TRANSACTION.items()):
        try:
            with transaction.atomic():
                fn(proposal)
        except Exception:
            log.exception("proposal hook %s failed for proposal %s", name, proposal.pk)


def proposal_extras(rows: list[Any], visible: dict[int, bool]) -> dict[int, dict[str, Any]]:
    """The extra JSON keys of each proposal; a failing extra is left out, and logged."""
    out: dict[int, dict[str, Any]] = {p.pk: {} for p in rows}
    for name, fn in list(_EXTRAS.items()):
        try:
            for pk, extra in fn(rows, visible).items():
                out.setdefault(pk, {}).update(extra)
        except Exception:
            log.exception("proposal extra %s failed", name)
    return out
