"""Registering a release and approving it (high-risk)."""

from __future__ import annotations

import hashlib
import os
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
from hal.actions.modules import resolve_module
from hal.actions.oneline import check_one_line
from hal.actions.releases.artifacts import (
    DEFAULT_MAX_ARTIFACT_BYTES,
    VERSION_PATTERN,
    artifact_chunks,
    artifacts_dir,
    check_tarball,
    resolve_release,
    verify_artifact,
)
from hal.errors import Conflict, InvalidInput
from hal.live.events import OPS_GROUP, publish
from hal.models import Release


@action("releases.register")
def check_register_release(
    *, actor: Actor, module: Any, version: Any, artifact: Any, notes: Any = ""
) -> Release:
    """Upload a module release (a .tar.gz); its sha256 is computed here; status `draft`."""
    require_perm(actor, "operate")
    target = resolve_module(module)
    if not isinstance(version, str) or not VERSION_PATTERN.fullmatch(version):
        raise InvalidInput(
            _("version may contain letters, digits, '.', '_', '+' and '-' (max 64)."),
            code="invalid_version",
        )
    if not isinstance(notes, str) or len(notes) > 1000:
        raise InvalidInput(_("notes must be text of at most 1000 characters."))
    # The uploaded file's name is shown as the artifact's: one line, like any label.
    upload_name = getattr(artifact, "name", "")
    upload_name = check_one_line(upload_name if isinstance(upload_name, str) else "", "artifact")
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
            for chunk in artifact_chunks(artifact):
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
        check_tarball(tmp)
        final = folder / f"{target.name}-{version}.tar.gz"
        with transaction.atomic():
            release = Release.objects.create(
                module=target,
                version=version,
                artifact_path=f"{target.name}/{final.name}",
                artifact_name=(upload_name or final.name)[:200],
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


def _release_impact(actor: Actor, params: dict[str, Any]) -> Impact:
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
