"""Release actions: upload, approve, deploy, roll back, reconcile (module configuration,
health check and restart are in hal.actions.modules and re-exported here).

Views, AI tools and commands call the `check_*` functions only.
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

from hal import i18n
from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.confirm import Impact, consume_confirmation, register_high_risk
from hal.actions.jobs import create_job, deploy_params, open_job_for, rollback_params

# Module configuration, health check and restart live in hal.actions.modules; re-exported
# here because views, tools and commands reach every fleet action through this module.
from hal.actions.modules import (  # noqa: F401
    SERVING_STATUSES,
    check_configure_module,
    check_module_health,
    check_restart_module,
    clean_health_url,
    clean_restart_command,
    resolve_module,
)
from hal.actions.modules import require_serving as _serving
from hal.actions.servers import resolve_server
from hal.errors import Conflict, InvalidInput, NotFound
from hal.events import OPS_GROUP, publish
from hal.i18n import english
from hal.models import Job, Module, ModuleDeployment, Release, Server

# A version becomes a directory name on every server: letters, digits, . _ + - only.
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
DEFAULT_MAX_ARTIFACT_BYTES = 512 * 1024 * 1024
CHUNK = 1024 * 1024


def artifacts_dir() -> Path:
    """Where release artifacts live: settings.DATA_DIR/artifacts."""
    return Path(settings.DATA_DIR) / "artifacts"


def artifact_file(release: Release) -> Path:
    """The absolute path of a release's artifact (never outside the artifacts directory)."""
    base = artifacts_dir().resolve()
    path = (base / release.artifact_path).resolve()
    if base not in path.parents:
        raise Conflict(
            _("The artifact path is outside the artifact store."), code="artifact_missing"
        )
    return path


def sha256_of(path: Path) -> str:
    """The sha256 of a file, streamed."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def resolve_release(ref: Any) -> Release:
    """Find a release by Release, id or `module@version`; unknown → 404 `release_not_found`."""
    if isinstance(ref, Release):
        return ref
    qs = Release.objects.select_related("module")
    release = None
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        release = qs.filter(pk=int(ref)).first()
    elif isinstance(ref, str) and "@" in ref:
        name, _sep, version = ref.partition("@")
        release = qs.filter(module__name=name, version=version).first()
    if release is None:
        raise NotFound(format_lazy(_("No release {ref!r}."), ref=ref), code="release_not_found")
    return release


# --- releases ----------------------------------------------------------------------------------


def _check_tarball(path: Path) -> int:
    """A release artifact is a gzip tarball of plain files and directories with safe names."""
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            members = tar.getmembers()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InvalidInput(
            _("The artifact must be a .tar.gz archive."), code="artifact_invalid"
        ) from exc
    for member in members:
        name = member.name
        if (
            name.startswith("/")
            or ".." in Path(name).parts
            or not (member.isfile() or member.isdir())
        ):
            raise InvalidInput(
                format_lazy(_("The artifact contains an unsafe entry: {name!r}"), name=name[:100]),
                code="artifact_invalid",
            )
    return len(members)


@action("releases.register")
def check_register_release(
    *, actor: Actor, module: Any, version: Any, artifact: Any, notes: Any = ""
) -> Release:
    """Upload a module release (a .tar.gz); its sha256 is computed here; status `draft`."""
    require_perm(actor, "operate")
    target = resolve_module(module)
    if not isinstance(version, str) or not _VERSION.match(version):
        raise InvalidInput(
            _("version may contain letters, digits, '.', '_', '+' and '-' (max 64)."),
            code="invalid_version",
        )
    if not isinstance(notes, str) or len(notes) > 1000:
        raise InvalidInput(_("notes must be text of at most 1000 characters."))
    if Release.objects.filter(module=target, version=version).exists():
        raise Conflict(
            format_lazy(_("{name}@{version} already exists."), name=target.name, version=version),
            code="release_exists",
        )
    limit = int(getattr(settings, "HAL_ARTIFACT_MAX_BYTES", DEFAULT_MAX_ARTIFACT_BYTES))
    folder = artifacts_dir() / target.name
    folder.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    fd, tmp_name = tempfile.mkstemp(prefix=".upload-", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in _chunks(artifact):
                size += len(chunk)
                if size > limit:
                    raise InvalidInput(
                        format_lazy(_("The artifact is larger than {limit} bytes."), limit=limit),
                        code="artifact_too_large",
                    )
                digest.update(chunk)
                out.write(chunk)
        if size == 0:
            raise InvalidInput(_("The artifact is empty."), code="artifact_invalid")
        _check_tarball(tmp)
        final = folder / f"{target.name}-{version}.tar.gz"
        with transaction.atomic():
            release = Release.objects.create(
                module=target,
                version=version,
                artifact_path=f"{target.name}/{final.name}",
                artifact_name=getattr(artifact, "name", "") or final.name,
                size=size,
                sha256=digest.hexdigest(),
                notes=notes,
                created_by=actor.label,
            )
            os.replace(tmp, final)
            record_audit(
                actor,
                "releases.register",
                target=release,
                target_label=release.identifier,
                after={"sha256": release.sha256, "size": size, "status": release.status},
            )
            publish(OPS_GROUP, "release.updated", release.as_dict())
    except IntegrityError:
        raise Conflict(
            format_lazy(_("{name}@{version} already exists."), name=target.name, version=version),
            code="release_exists",
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
    return release


def _chunks(artifact: Any):
    """Yield bytes from bytes, an UploadedFile (chunks()) or a binary file object."""
    if isinstance(artifact, bytes | bytearray):
        yield bytes(artifact)
    elif hasattr(artifact, "chunks"):
        yield from artifact.chunks()
    elif hasattr(artifact, "read"):
        while chunk := artifact.read(CHUNK):
            yield chunk
    else:
        raise InvalidInput(_("Attach the artifact file."), code="artifact_invalid")


def verify_artifact(actor: Actor, release: Release, *, job: Job | None = None) -> Path:
    """Recompute the artifact's sha256; a mismatch is refused, audited and fails the job."""
    path = artifact_file(release)
    if not path.is_file():
        _artifact_refused(
            actor, release, job, "artifact_missing", _("The artifact file is missing.")
        )
    actual = sha256_of(path)
    if actual != release.sha256:
        _artifact_refused(
            actor,
            release,
            job,
            "sha256_mismatch",
            format_lazy(
                _("Artifact sha256 {actual}… does not match the release's {expected}…."),
                actual=actual[:12],
                expected=release.sha256[:12],
            ),
        )
    return path


def _artifact_refused(
    actor: Actor, release: Release, job: Job | None, code: str, message: Any
) -> None:
    from hal.actions.jobs import do_finish_job

    text = english(message)  # the audit row and the job's error stay English

    with transaction.atomic():
        record_audit(
            actor,
            "releases.verify",
            target=release,
            target_label=release.identifier,
            result="refused",
            error_code=code,
            message=text,
        )
        if job is not None:
            locked = Job.objects.select_for_update().get(pk=job.pk)
            if locked.status == Job.RUNNING:
                do_finish_job(actor, locked, Job.FAILED, {}, code, text)
    raise Conflict(message, code=code)


def _release_impact(actor: Actor, params: dict) -> Impact:
    require_perm(actor, "view")
    release = resolve_release(params.get("release"))
    return Impact(
        subject_type="release",
        subject_id=str(release.pk),
        target_identifier=release.identifier,
        summary=i18n.text(
            gettext_noop("Approve {release} for deployment."), release=release.identifier
        ),
        details={
            "action": "releases.approve",
            "module": release.module.name,
            "version": release.version,
            "sha256": release.sha256,
            "size": release.size,
            "status": release.status,
        },
    )


@action("releases.approve")
def check_approve_release(
    *, actor: Actor, release: Any, confirmation: str | None = None
) -> Release:
    """HIGH-RISK: approve a draft release (its artifact's sha256 is verified first)."""
    require_perm(actor, "high_risk")
    target = resolve_release(release)
    with transaction.atomic():
        consume_confirmation(
            actor,
            token=confirmation,
            action_code="releases.approve",
            subject_type="release",
            subject_id=target.pk,
            params={"release": release},
        )
        target = Release.objects.select_for_update().select_related("module").get(pk=target.pk)
        if target.status != Release.DRAFT:
            raise Conflict(
                format_lazy(
                    _("{identifier} is {status}."),
                    identifier=target.identifier,
                    status=target.status,
                ),
                code="release_not_draft",
            )
        verify_artifact(actor, target)
        target.status = Release.APPROVED
        target.approved_by = actor.label
        target.approved_at = timezone.now()
        target.save(update_fields=["status", "approved_by", "approved_at"])
        record_audit(
            actor,
            "releases.approve",
            target=target,
            target_label=target.identifier,
            before={"status": Release.DRAFT},
            after={"status": target.status, "sha256": target.sha256},
        )
        publish(OPS_GROUP, "release.updated", target.as_dict())
    return target


register_high_risk("releases.approve", impact=_release_impact, execute=check_approve_release)


# --- deploy / roll back / reconcile ------------------------------------------------------------


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


def _deploy_impact(actor: Actor, params: dict) -> Impact:
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


def _rollback_plan(server: Server, module: Module) -> ModuleDeployment:
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
    return deployment


def _rollback_impact(actor: Actor, params: dict) -> Impact:
    require_perm(actor, "view")
    module = resolve_module(params.get("module"))
    server = resolve_server(params.get("server"))
    deployment = _rollback_plan(server, module)
    return Impact(
        subject_type="server",
        subject_id=str(server.pk),
        target_identifier=server.hostname,
        summary=i18n.text(
            gettext_noop("Roll {module} on {hostname} back to {version}."),
            module=module.name,
            hostname=server.hostname,
            version=deployment.previous_release.version,
        ),
        details={
            "action": "modules.rollback",
            "module": module.name,
            "server": server.hostname,
            "current": deployment.actual_release.version if deployment.actual_release else None,
            "back_to": deployment.previous_release.version,
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
        deployment = _rollback_plan(host, mod)
        to = deployment.previous_release
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


def out_of_sync(module: Module) -> list[ModuleDeployment]:
    """Deployments of a module whose actual release is not the desired one."""
    return [
        d
        for d in ModuleDeployment.objects.filter(module=module, desired_release__isnull=False)
        .select_related("server", "desired_release", "actual_release")
        .order_by("server__hostname")
        if not d.in_sync
    ]


def _reconcile_impact(actor: Actor, params: dict) -> Impact:
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
                    "desired": d.desired_release.version,
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
