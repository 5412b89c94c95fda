"""Fleet routes (servers, modules, releases, jobs, node agent API) in the "hal" namespace."""

from django.urls import path

from hal.views import agent_api, fleet

urlpatterns: list = [
    # pages
    path("servers/", fleet.servers_page, name="servers"),
    path("servers/register", fleet.form_register_server, name="server_register"),
    path("servers/enrolment-token", fleet.form_enrolment_token, name="server_enrolment_token"),
    path("servers/<int:pk>/", fleet.server_detail_page, name="server_detail"),
    path("servers/<int:pk>/<str:op>", fleet.form_server_op, name="server_op"),
    path("modules/", fleet.modules_page, name="modules"),
    path("modules/<str:name>/", fleet.module_detail_page, name="module_detail"),
    path("modules/<str:name>/<str:op>", fleet.form_module_op, name="module_op"),
    path("releases/", fleet.releases_page, name="releases"),
    path("releases/upload", fleet.form_upload_release, name="release_upload"),
    path("jobs/", fleet.jobs_page, name="jobs"),
    path("jobs/<int:pk>/", fleet.job_detail_page, name="job_detail"),
    path("jobs/<int:pk>/<str:op>", fleet.form_job_op, name="job_op"),
    # JSON API (session)
    path("api/servers", fleet.api_servers, name="api_servers"),
    path("api/servers/<str:ref>", fleet.api_server_detail, name="api_server_detail"),
    path("api/servers/<str:ref>/metrics", fleet.api_server_metrics, name="api_server_metrics"),
    path("api/servers/<str:ref>/approve", fleet.api_server_approve, name="api_server_approve"),
    path(
        "api/servers/<str:ref>/maintenance",
        fleet.api_server_maintenance,
        name="api_server_maintenance",
    ),
    path(
        "api/servers/<str:ref>/agent-token/revoke",
        fleet.api_server_revoke_token,
        name="api_server_revoke_token",
    ),
    path(
        "api/servers/<str:ref>/agent-token",
        fleet.api_server_issue_token,
        name="api_server_issue_token",
    ),
    path("api/enrolment-tokens", fleet.api_enrolment_tokens, name="api_enrolment_tokens"),
    path("api/modules", fleet.api_modules, name="api_modules"),
    path("api/modules/<str:name>", fleet.api_module_detail, name="api_module_detail"),
    path("api/modules/<str:name>/health-check", fleet.api_module_health, name="api_module_health"),
    path("api/modules/<str:name>/restart", fleet.api_module_restart, name="api_module_restart"),
    path("api/releases", fleet.api_releases, name="api_releases"),
    path("api/releases/<str:ref>", fleet.api_release_detail, name="api_release_detail"),
    path("api/jobs", fleet.api_jobs, name="api_jobs"),
    path("api/jobs/<int:pk>", fleet.api_job_detail, name="api_job_detail"),
    path("api/jobs/<int:pk>/<str:op>", fleet.api_job_op, name="api_job_op"),
    # node agent API (bearer token, no session, CSRF-exempt)
    path("api/agent/enrol", agent_api.enrol, name="agent_enrol"),
    path("api/agent/me", agent_api.me, name="agent_me"),
    path("api/agent/heartbeat", agent_api.heartbeat, name="agent_heartbeat"),
    path("api/agent/jobs/claim", agent_api.claim, name="agent_claim"),
    path("api/agent/jobs/<int:job_id>/log", agent_api.job_log, name="agent_job_log"),
    path("api/agent/jobs/<int:job_id>/lease", agent_api.job_lease, name="agent_job_lease"),
    path("api/agent/jobs/<int:job_id>/finish", agent_api.job_finish, name="agent_job_finish"),
    path(
        "api/agent/jobs/<int:job_id>/artifact",
        agent_api.job_artifact,
        name="agent_job_artifact",
    ),
]
