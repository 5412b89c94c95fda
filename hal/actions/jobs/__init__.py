"""Jobs: records, the runner's side, the queue (create, claim, HAL's own jobs), operators' actions.

records < runner < queue < operator. Other modules import from this package.
"""

from hal.actions.jobs.operator import (
    check_cancel_job,
    check_resume_job,
    check_retry_job,
    check_revert_job,
    check_stop_job,
    rollback_params,
)
from hal.actions.jobs.queue import (
    check_claim_job,
    check_sweep_orphans,
    create_job,
    deploy_params,
    lease_seconds,
    run_hal_job,
    sweep_orphans,
    worker_label,
)
from hal.actions.jobs.records import (
    HEALTH_AUTO_RETRIES,
    MAX_LOG_LINE,
    MAX_LOG_LINES_PER_CALL,
    OPEN,
    append_log,
    bound_argv_problem,
    job_module,
    job_release,
    job_server,
    open_job_for,
    resolve_job,
)
from hal.actions.jobs.runner import (
    FINISH_STATUSES,
    check_append_job_log,
    check_finish_job,
    check_renew_job_lease,
    do_finish_job,
    try_claim,
)

__all__ = [
    "FINISH_STATUSES",
    "HEALTH_AUTO_RETRIES",
    "MAX_LOG_LINE",
    "MAX_LOG_LINES_PER_CALL",
    "OPEN",
    "append_log",
    "bound_argv_problem",
    "check_append_job_log",
    "check_cancel_job",
    "check_claim_job",
    "check_finish_job",
    "check_renew_job_lease",
    "check_resume_job",
    "check_retry_job",
    "check_revert_job",
    "check_stop_job",
    "check_sweep_orphans",
    "create_job",
    "deploy_params",
    "do_finish_job",
    "job_module",
    "job_release",
    "job_server",
    "lease_seconds",
    "open_job_for",
    "resolve_job",
    "rollback_params",
    "run_hal_job",
    "sweep_orphans",
    "try_claim",
    "worker_label",
]
