"""Release artifacts: where they live, their checks and verification, and release lookup."""

from __future__ import annotations

import hashlib
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, record_audit
from hal.errors import Conflict, InvalidInput, NotFound
from hal.i18n import english
from hal.models import Job, Release
from hal.web.ids import as_id

# A version becomes a directory name on every server: letters, digits, . _ + - only.
# Matched with fullmatch: a `$` anchor lets a trailing "\n" through.
VERSION_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
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
    if (pk := as_id(ref)) is not None:  # str.isdigit() also takes "²", which int() refuses
        release = qs.filter(pk=pk).first()
    elif isinstance(ref, str) and "@" in ref:
        name, _sep, version = ref.partition("@")
        release = qs.filter(module__name=name, version=version).first()
    if release is None:
        raise NotFound(format_lazy(_("No release {ref!r}."), ref=ref), code="release_not_found")
    return release


def check_tarball(path: Path) -> int:
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


def artifact_chunks(artifact: Any) -> Iterator[bytes]:
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
