"""Deploying a release to a server and rolling a module back (both high-risk)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.confirm import Impact, consume_confirmation, register_high_risk
from hal.actions.jobs import create_job, deploy_params, open_job_for, rollback_params
from hal.actions.modules import require_serving as _serving
from hal.actions.modules import resolve_module
from hal.actions.releases.artifacts import resolve_release
from hal.actions.servers import resolve_server
from hal.errors import Conflict
from hal.live.events import OPS_GROUP, publish
from hal.models import Job, Module, ModuleDeployment, Release, Server


def _no_change_in_progress(server: Server, module: Module) -> None:
    busy = open_job_for(server, module, (Job.DEPLOY, Job.ROLLBACK))
    if busy:
        raise Conflict(
            format_lazy(
                _("Job #{pk} ({kind}) is already {status} for {name} on {hostname}."),
                pk=busy.pk,
                kind=busy.kind,
                status=busy.status,
                name=module.name,
                hostname=server.hostname,
            ),
            code="job_in_progress",
        )


def _deployment(server: Server, module: Module) -> ModuleDeployment | None:
    return (
        ModuleDeployment.objects.select_related("actual_release", "previous_release")
        .filter(server=server, module=module)
        .first()
    )


def _deploy_impact(actor: Actor, params: dict[str, Any]) -> Impact:
    require_perm(actor, "view")
    release = resolve_release(params.get("release"))
    server = resolve_server(params.get("server"))
    current = _deployment(server, release.module)
    return Impact(
        subject_type="release",
        subject_id=str(release.pk),
        target_identifier=release.identifier,
        summary=i18n.text(
            gettext_noop("Deploy {release} to {hostname}."),
            release=release.identifier,
            hostname=server.hostname,
        ),
        details={
            "action": "releases.deploy",
            "server": server.hostname,
            "server_status": server.effective_status(),
            "module": release.module.name,
            "version": release.version,
            "release_status": release.status,
            "current": current.actual_release.version
            if current and current.actual_release
            else None,
            "sha256": release.sha256,
        },
    )


@action("releases.deploy")
def check_deploy_release(
    *, actor: Actor, release: Any, server: Any, confirmation: str | None = None
) -> Job:
    """HIGH-RISK: deploy an approved release to a server (queues a deploy job for its agent)."""
    require_perm(actor, "high_risk")
    target = resolve_release(release)
    host = resolve_server(server)
    with transaction.atomic():
        consume_confirmation(
            actor,
            token=confirmation,
            action_code="releases.deploy",
            subject_type="release",
            subject_id=target.pk,
            params={"release": release, "server": server},
        )
        target = Release.objects.select_for_update().select_related("module").get(pk=target.pk)
        host = Server.objects.select_for_update().get(pk=host.pk)
        if target.status != Release.APPROVED:
            raise Conflict(
                format_lazy(
                    _("{identifier} is {status}; approve it before deploying."),
                    identifier=target.identifier,
                    status=target.status,
                ),
                code="release_not_approved",
            )
        _serving(host)
        _no_change_in_progress(host, target.module)
        deployment, _created = ModuleDeployment.objects.select_for_update().get_or_create(
            server=host, module=target.module
        )
        deployment.desired_release = target
        deployment.save()
        job = create_job(
            actor,
            kind=Job.DEPLOY,
            server=host,
            module=target.module,
            release=target,
            params=deploy_params(target, deployment.actual_release),
        )
        record_audit(
            actor,
            "releases.deploy",
            target=target,
            target_label=f"{target.identifier} → {host.hostname}",
            after={"job": job.pk, "server": host.hostname},
        )
        publish(OPS_GROUP, "deployment.updated", deployment.as_dict())
    return job


register_high_risk("releases.deploy", impact=_deploy_impact, execute=check_deploy_release)


def _rollback_plan(server: Server, module: Module) -> tuple[ModuleDeployment, Release]:
    """The deployment and the previous release it goes back to; none → `nothing_to_roll_back`."""
    deployment = _deployment(server, module)
    if deployment is None or deployment.previous_release is None:
        raise Conflict(
            format_lazy(
                _("{name} on {hostname} has no previous release to roll back to."),
                name=module.name,
                hostname=server.hostname,
            ),
            code="nothing_to_roll_back",
        )
    return deployment, deployment.previous_release


def _rollback_impact(actor: Actor, params: dict[str, Any]) -> Impact:
    require_perm(actor, "view")
    module = resolve_module(params.get("module"))
    server = resolve_server(params.get("server"))
    deployment, previous = _rollback_plan(server, module)
    return Impact(
        subject_type="server",
        subject_id=str(server.pk),
        target_identifier=server.hostname,
        summary=i18n.text(
            gettext_noop("Roll {module} on {hostname} back to {version}."),
            module=module.name,
            hostname=server.hostname,
            version=previous.version,
        ),
        details={
            "action": "modules.rollback",
            "module": module.name,
            "server": server.hostname,
            "current": deployment.actual_release.version if deployment.actual_release else None,
            "back_to": previous.version,
        },
    )


@action("modules.rollback")
def check_rollback_module(
    *, actor: Actor, module: Any, server: Any, confirmation: str | None = None
) -> Job:
    """HIGH-RISK: switch a module on a server back to its previous release (a rollback job)."""
    require_perm(actor, "high_risk")
    mod = resolve_module(module)
    host = resolve_server(server)
    with transaction.atomic():
        consume_confirmation(
            actor,
            token=confirmation,
            action_code="modules.rollback",
            subject_type="server",
            subject_id=host.pk,
            params={"module": module, "server": server},
        )
        host = Server.objects.select_for_update().get(pk=host.pk)
        _serving(host)
        _no_change_in_progress(host, mod)
        deployment, to = _rollback_plan(host, mod)
        ModuleDeployment.objects.filter(pk=deployment.pk).update(desired_release=to)
        job = create_job(
            actor,
            kind=Job.ROLLBACK,
            server=host,
            module=mod,
            release=to,
            params=rollback_params(mod, to, deployment.actual_release),
        )
        record_audit(
            actor,
            "modules.rollback",
            target=host,
            target_label=f"{mod.name} on {host.hostname} → {to.version}",
            after={"job": job.pk, "to": to.version},
        )
    return job


register_high_risk("modules.rollback", impact=_rollback_impact, execute=check_rollback_module)
