"""Fleet pages (servers, modules, releases, jobs) and their JSON API under /api/.

Write actions from pages are plain CSRF-protected forms that call the same check_*
functions as the API; high-risk buttons start the three-step flow (static/hal/confirm.js).
api (JSON), pages (HTML), forms (page POSTs); the URLconf imports this package.
"""

from hal.views.fleet.api import (
    JOB_OPS,
    api_enrolment_tokens,
    api_job_detail,
    api_job_op,
    api_jobs,
    api_module_detail,
    api_module_health,
    api_module_restart,
    api_modules,
    api_release_detail,
    api_releases,
    api_server_approve,
    api_server_detail,
    api_server_issue_token,
    api_server_maintenance,
    api_server_metrics,
    api_server_revoke_token,
    api_servers,
)
from hal.views.fleet.forms import (
    form_enrolment_token,
    form_job_op,
    form_module_op,
    form_register_server,
    form_server_op,
    form_upload_release,
)
from hal.views.fleet.pages import (
    job_detail_page,
    jobs_page,
    module_detail_page,
    modules_page,
    releases_page,
    server_detail_page,
    servers_page,
)

__all__ = [
    "JOB_OPS",
    "api_enrolment_tokens",
    "api_job_detail",
    "api_job_op",
    "api_jobs",
    "api_module_detail",
    "api_module_health",
    "api_module_restart",
    "api_modules",
    "api_release_detail",
    "api_releases",
    "api_server_approve",
    "api_server_detail",
    "api_server_issue_token",
    "api_server_maintenance",
    "api_server_metrics",
    "api_server_revoke_token",
    "api_servers",
    "form_enrolment_token",
    "form_job_op",
    "form_module_op",
    "form_register_server",
    "form_server_op",
    "form_upload_release",
    "job_detail_page",
    "jobs_page",
    "module_detail_page",
    "modules_page",
    "releases_page",
    "server_detail_page",
    "servers_page",
]
