"""Module actions: configure its commands (high-risk), run its health check, restart it.

A module's restart argv runs as root on whichever server an operator restarts it on, and
its health URL is fetched by HAL or an agent: changing either is the high-risk action
`modules.configure` (administer + high-risk permission, recent re-auth, three-step
confirmation, audited with before/after). A restart job carries the exact argv and its
sha256 as they were when it was queued; the agent API hands out only a job whose stored
argv still matches its hash, and the agent checks the hash again before running it.
Views, AI tools and commands call the `check_*` functions only (`hal.actions.releases`
re-exports them).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.actions.confirm import Impact, consume_confirmation, register_high_risk
from hal.actions.jobs import create_job, open_job_for
from hal.actions.oneline import check_one_line
from hal.actions.servers import resolve_server
from hal.agent.ops import argv_sha256
from hal.errors import Conflict, InvalidInput, NotFound
from hal.live.events import OPS_GROUP, publish
from hal.models import Job, Module, Server
from hal.web.ids import as_id

CONFIGURE_CODE = "modules.configure"
# Fields whose change alters what HAL or an agent runs or fetches: the high-risk part.
COMMAND_FIELDS = ("health_check_url", "restart_command")
CONFIGURABLE = (*COMMAND_FIELDS, "description")
SERVING_STATUSES = (Server.ACTIVE, Server.MAINTENANCE)


def resolve_module(ref: Any) -> Module:
    """Find a module by Module, id or name; unknown → 404 `module_not_found`."""
    if isinstance(ref, Module):
        return ref
    module = None
    if (pk := as_id(ref)) is not None:  # str.isdigit() also takes "²", which int() refuses
        module = Module.objects.filter(pk=pk).first()
    if module is None and isinstance(ref, str):
        module = Module.objects.filter(name=ref.strip()).first()
    if module is None:
        raise NotFound(format_lazy(_("No module {ref!r}."), ref=ref), code="module_not_found")
    return module


def require_serving(server: Server) -> None:
    """Refuse work on a server that is not active or in maintenance."""
    if server.status not in SERVING_STATUSES:
        raise Conflict(
            format_lazy(
                _("{hostname} is {status}; deploy only to active or maintenance servers."),
                hostname=server.hostname,
                status=server.status,
            ),
            code="server_not_active",
        )


# --- configuration (high-risk for commands and URLs) -------------------------------------------


def clean_health_url(value: Any) -> str:
    """An http(s) URL with a host, or '' to clear it."""
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or len(value) > 500:
        raise InvalidInput(_("health_check_url must be an http(s) URL."), code="invalid_url")
    url = check_one_line(value.strip(), "health_check_url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(_("health_check_url must be an http(s) URL."), code="invalid_url")
    return url


def clean_restart_command(value: Any) -> list[str]:
    """An argv list: an absolute executable path and up to 31 plain arguments (no shell)."""
    if value in (None, []):
        return []
    if (
        not isinstance(value, list)
        or not 1 <= len(value) <= 32
        or not all(isinstance(a, str) and a and len(a) <= 1000 and "\0" not in a for a in value)
    ):
        raise InvalidInput(
            _("restart_command must be a list of 1–32 non-empty strings."), code="invalid_command"
        )
    if not os.path.isabs(value[0]):
        raise InvalidInput(
            _("restart_command[0] must be an absolute path to the program."), code="invalid_command"
        )
    return list(value)


def command_sha256(argv: list[str]) -> str:
    """The sha256 binding a job to an argv ('' for no command)."""
    return argv_sha256(argv) if argv else ""


def _clean_changes(given: dict[str, Any]) -> dict[str, Any]:
    unknown = set(given) - set(CONFIGURABLE)
    if unknown:
        raise InvalidInput(format_lazy(_("Unknown fields: {unknown}"), unknown=sorted(unknown)))
    changes: dict[str, Any] = {}
    if "health_check_url" in given:
        changes["health_check_url"] = clean_health_url(given["health_check_url"])
    if "restart_command" in given:
        changes["restart_command"] = clean_restart_command(given["restart_command"])
    if "description" in given:
        description = given["description"]
        if not isinstance(description, str) or len(description) > 200:
            raise InvalidInput(_("description must be text of at most 200 characters."))
        changes["description"] = check_one_line(description, "description")
    if not changes:
        raise InvalidInput(_("Nothing to change."), code="nothing_to_change")
    return changes


def _configure_impact(actor: Actor, params: dict[str, Any]) -> Impact:
    require_perm(actor, "administer")
    given = dict(params)
    module = resolve_module(given.pop("module", None))
    changes = _clean_changes(given)
    details: dict[str, Any] = {"action": CONFIGURE_CODE, "module": module.name}
    for key, value in changes.items():
        details[key] = {"before": getattr(module, key), "after": value}
    if "restart_command" in changes:
        details["restart_command_sha256"] = command_sha256(changes["restart_command"])
        # The argv runs as root on whichever serving server a restart names.
        details["serving_servers"] = Server.objects.filter(status__in=SERVING_STATUSES).count()
    return Impact(
        subject_type="module",
        subject_id=str(module.pk),
        target_identifier=module.name,
        summary=i18n.text(
            gettext_noop("Change what HAL and the agents run or fetch for {module}."),
            module=module.name,
        ),
        details=details,
    )


_UNSET = object()


@action(CONFIGURE_CODE)
def check_configure_module(
    *,
    actor: Actor,
    module: Any,
    health_check_url: Any = _UNSET,
    restart_command: Any = _UNSET,
    description: Any = _UNSET,
    confirmation: str | None = None,
) -> Module:
    """ADMIN; HIGH-RISK for the health URL and restart argv: change a module's configuration.

    A description alone needs the administer permission only; any command field needs
    the three-step confirmation for exactly these arguments, and a recent re-auth.
    """
    require_perm(actor, "administer")
    target = resolve_module(module)
    given = {
        key: value
        for key, value in (
            ("health_check_url", health_check_url),
            ("restart_command", restart_command),
            ("description", description),
        )
        if value is not _UNSET
    }
    changes = _clean_changes(given)
    sensitive = any(key in changes for key in COMMAND_FIELDS)
    with transaction.atomic():
        if sensitive:
            consume_confirmation(
                actor,
                token=confirmation,
                action_code=CONFIGURE_CODE,
                subject_type="module",
                subject_id=target.pk,
                params={"module": module, **given},
            )
        target = Module.objects.select_for_update().get(pk=target.pk)
        before = {key: getattr(target, key) for key in changes}
        for key, value in changes.items():
            setattr(target, key, value)
        target.save()
        after = dict(changes)
        if "restart_command" in changes:
            after["restart_command_sha256"] = command_sha256(changes["restart_command"])
        record_audit(actor, CONFIGURE_CODE, target=target, before=before, after=after)
        publish(OPS_GROUP, "module.updated", target.as_dict())
    return target


register_high_risk(CONFIGURE_CODE, impact=_configure_impact, execute=check_configure_module)


# --- health check and restart (write tier) ------------------------------------------------------


@action("modules.health_check")
def check_module_health(*, actor: Actor, module: Any, server: Any = None) -> Job:
    """Run a module's configured health check: on a server's agent, or from HAL if no server.

    The job keeps the URL configured now; a later change does not alter what it fetches.
    """
    require_perm(actor, "operate")
    mod = resolve_module(module)
    if not mod.health_check_url:
        raise Conflict(
            format_lazy(_("{name} has no health-check URL configured."), name=mod.name),
            code="module_no_health_check",
        )
    host = resolve_server(server) if server not in (None, "") else None
    with transaction.atomic():
        if host is not None:
            require_serving(host)
        job = create_job(
            actor,
            kind=Job.HEALTH_CHECK,
            server=host,
            module=mod,
            params={"module": mod.name, "url": mod.health_check_url},
            runner=Job.RUNNER_AGENT if host else Job.RUNNER_HAL,
        )
        record_audit(
            actor,
            "modules.health_check",
            target=mod,
            after={"job": job.pk, "server": host.hostname if host else None},
        )
    return job


@action("modules.restart")
def check_restart_module(
    *, actor: Actor, module: Any, server: Any, reason: str = "", argv_sha256: Any = None
) -> Job:
    """Restart a module on a server with the argv an administrator configured (no shell).

    Needs a recent re-auth (it runs a root command on that server). The job stores the
    argv and its sha256 as configured now; `argv_sha256`, when given, must match it (so
    a client binds the restart to the command it showed).
    """
    require_perm(actor, "operate")
    require_recent(actor)
    mod = resolve_module(module)
    host = resolve_server(server)
    if not isinstance(reason, str) or len(reason) > 500:
        raise InvalidInput(_("reason must be text of at most 500 characters."))
    if argv_sha256 not in (None, "") and not isinstance(argv_sha256, str):
        raise InvalidInput(_("argv_sha256 must be a hex string."))
    with transaction.atomic():
        # Read the argv under the module's lock: a concurrent reconfiguration waits.
        mod = Module.objects.select_for_update().get(pk=mod.pk)
        argv = list(mod.restart_command or [])
        if not argv:
            raise Conflict(
                format_lazy(_("{name} has no restart command configured."), name=mod.name),
                code="module_no_restart_command",
            )
        digest = command_sha256(argv)
        if argv_sha256 not in (None, "") and argv_sha256 != digest:
            raise Conflict(
                format_lazy(
                    _("The restart command of {name} changed; review it and try again."),
                    name=mod.name,
                ),
                code="restart_command_changed",
            )
        require_serving(host)
        busy = open_job_for(host, mod, (Job.RESTART,))
        if busy:
            raise Conflict(
                format_lazy(_("Restart job #{pk} is {status}."), pk=busy.pk, status=busy.status),
                code="job_in_progress",
            )
        job = create_job(
            actor,
            kind=Job.RESTART,
            server=host,
            module=mod,
            params={"module": mod.name, "argv": argv, "argv_sha256": digest},
        )
        record_audit(
            actor,
            "modules.restart",
            target=mod,
            target_label=f"{mod.name} on {host.hostname}",
            after={"job": job.pk, "argv": argv, "argv_sha256": digest},
            message=reason,
        )
    return job
