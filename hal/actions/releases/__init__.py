"""Release actions: upload, approve, deploy, roll back, reconcile (module configuration,
health check and restart are in hal.actions.modules and re-exported here).

Views, AI tools and commands call the `check_*` functions only, through this package.
artifacts < register < deploy < reconcile.
"""

from hal.actions.modules import (
    SERVING_STATUSES,
    check_configure_module,
    check_module_health,
    check_restart_module,
    clean_health_url,
    clean_restart_command,
    resolve_module,
)
from hal.actions.releases.artifacts import (
    CHUNK,
    DEFAULT_MAX_ARTIFACT_BYTES,
    artifact_file,
    artifacts_dir,
    resolve_release,
    sha256_of,
    verify_artifact,
)
from hal.actions.releases.deploy import (
    check_deploy_release,
    check_rollback_module,
)
from hal.actions.releases.reconcile import (
    check_reconcile_module,
    out_of_sync,
)
from hal.actions.releases.register import (
    check_approve_release,
    check_register_release,
)

__all__ = [
    "CHUNK",
    "DEFAULT_MAX_ARTIFACT_BYTES",
    "SERVING_STATUSES",
    "artifact_file",
    "artifacts_dir",
    "check_approve_release",
    "check_configure_module",
    "check_deploy_release",
    "check_module_health",
    "check_reconcile_module",
    "check_register_release",
    "check_restart_module",
    "check_rollback_module",
    "clean_health_url",
    "clean_restart_command",
    "out_of_sync",
    "resolve_module",
    "resolve_release",
    "sha256_of",
    "verify_artifact",
]
