"""Reconciling a module: redeploy its approved release where a server is out of sync."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.confirm import Impact, consume_confirmation, register_high_risk
from hal.actions.jobs import create_job, open_job_for
from hal.actions.modules import resolve_module
from hal.errors import Conflict
from hal.models import Job, Module, ModuleDeployment


def out_of_sync(module: Module) -> list[ModuleDeployment]:
    """Deployments of a module whose actual release is not the desired one."""
    return [
        d
        for d in ModuleDeployment.objects.filter(module=module, desired_release__isnull=False)
        .select_related("server", "desired_release", "actual_release")
        .order_by("server__hostname")
        if not d.in_sync
    ]


def _reconcile_impact(actor: Actor, params: dict[str, Any]) -> Impact:
    require_perm(actor, "view")
    module = resolve_module(params.get("module"))
    drift = out_of_sync(module)
    return Impact(
        subject_type="module",
        subject_id=str(module.pk),
        target_identifier=module.name,
        summary=i18n.text(
            gettext_noop("Bring {module} to its desired release on {count} server(s)."),
            module=module.name,
            count=len(drift),
        ),
        details={
            "action": "modules.reconcile",
            "module": module.name,
            "servers": [
                {
                    "server": d.server.hostname,
                    "actual": d.actual_release.version if d.actual_release else None,
                    # never None: out_of_sync() filters on desired_release__isnull=False
                    "desired": d.desired_release.version if d.desired_release else None,
                }
                for d in drift
            ],
        },
    )


@action("modules.reconcile")
def check_reconcile_module(*, actor: Actor, module: Any, confirmation: str | None = None) -> Job:
    """HIGH-RISK: queue a HAL-side job that fans out one deploy per out-of-sync server."""
    require_perm(actor, "high_risk")
    mod = resolve_module(module)
    with transaction.atomic():
        consume_confirmation(
            actor,
            token=confirmation,
            action_code="modules.reconcile",
            subject_type="module",
            subject_id=mod.pk,
            params={"module": module},
        )
        busy = open_job_for(None, mod, (Job.RECONCILE,))
        if busy:
            raise Conflict(
                format_lazy(_("Reconcile job #{pk} is {status}."), pk=busy.pk, status=busy.status),
                code="job_in_progress",
            )
        job = create_job(actor, kind=Job.RECONCILE, module=mod, runner=Job.RUNNER_HAL)
        record_audit(
            actor,
            "modules.reconcile",
            target=mod,
            after={"job": job.pk, "out_of_sync": [d.server.hostname for d in out_of_sync(mod)]},
        )
    return job


register_high_risk("modules.reconcile", impact=_reconcile_impact, execute=check_reconcile_module)
