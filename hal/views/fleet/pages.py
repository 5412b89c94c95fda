"""The fleet's HTML pages: servers, modules, releases, jobs, each list and detail."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from hal.errors import HalError
from hal.models import Job, Server
from hal.queries import fleet as q
from hal.views.fleet.api import request_actor


def _page(request: HttpRequest, template: str, context: dict, page: str) -> HttpResponse:
    return render(request, template, {"page": page, **context})


def _page_error(request: HttpRequest, exc: HalError, page: str) -> HttpResponse:
    return render(
        request, "hal/fleet/error.html", {"page": page, "error": exc}, status=exc.http_status
    )


def _hr_button(action: str, params: dict, label: str, *, reason: bool = False) -> dict:
    """Data for a high-risk button: confirm.js runs impact → retype → execute."""
    return {"action": action, "params": json.dumps(params), "label": label, "reason": reason}


@login_required
@require_GET
def servers_page(request: HttpRequest) -> HttpResponse:
    actor = request_actor(request, "web")
    try:
        servers = q.list_servers(actor, dict(request.GET.items()))
        tokens = q.list_enrolment_tokens(actor)[:5]
    except HalError as exc:
        return _page_error(request, exc, "servers")
    latest = q.latest_metrics(servers)
    rows = [
        {"server": s, "status": s.effective_status(), "metrics": latest.get(s.pk)} for s in servers
    ]
    return _page(
        request,
        "hal/fleet/servers.html",
        {
            "rows": rows,
            "tokens": tokens,
            "new_token": request.session.pop("hal_new_enrolment_token", None),
        },
        "servers",
    )


@login_required
@require_GET
def server_detail_page(request: HttpRequest, pk: int) -> HttpResponse:
    actor = request_actor(request, "web")
    try:
        server = q.get_server(actor, pk)
        metrics = q.server_metrics(actor, pk, limit=60)
        deployments = q.server_deployments(actor, pk)
        jobs = q.list_jobs(actor, {"server": pk, "limit": 20})
    except HalError as exc:
        return _page_error(request, exc, "servers")
    risky = []
    if server.status != Server.DELETED:
        if server.status != Server.ISOLATED:
            risky.append(
                _hr_button(
                    "servers.isolate", {"server": server.hostname}, _("Isolate"), reason=True
                )
            )
        risky.append(
            _hr_button("servers.delete", {"server": server.hostname}, _("Delete"), reason=True)
        )
    for d in deployments:
        previous = d.previous_release
        if previous is not None:
            # An attribute for the template only, not a model field.
            d.rollback_button = _hr_button(  # type: ignore[attr-defined]
                "modules.rollback",
                {"module": d.module.name, "server": server.hostname},
                _("Roll back to %(version)s") % {"version": previous.version},
            )
    return _page(
        request,
        "hal/fleet/server_detail.html",
        {
            "server": server,
            "status": server.effective_status(),
            "heartbeat_age": server.heartbeat_age(),
            "latest": metrics[0] if metrics else None,
            "metrics": metrics,
            "deployments": deployments,
            "jobs": jobs,
            "risky": risky,
            "new_agent_token": request.session.pop("hal_new_agent_token", None),
            "selected_type": "server",
            "selected_id": server.pk,
            "selected_label": server.hostname,
        },
        "servers",
    )


@login_required
@require_GET
def modules_page(request: HttpRequest) -> HttpResponse:
    actor = request_actor(request, "web")
    try:
        modules = q.list_modules(actor)
    except HalError as exc:
        return _page_error(request, exc, "modules")
    return _page(request, "hal/fleet/modules.html", {"modules": modules}, "modules")


@login_required
@require_GET
def module_detail_page(request: HttpRequest, name: str) -> HttpResponse:
    actor = request_actor(request, "web")
    try:
        module = q.get_module(actor, name)
        deployments = q.module_deployments(actor, name)
        releases = list(q.list_releases(actor, {"module": module.pk}))
        servers = q.list_servers(actor)
    except HalError as exc:
        return _page_error(request, exc, "modules")
    for r in releases:
        r.approve_button = _hr_button("releases.approve", {"release": r.identifier}, _("Approve"))
        r.deploy_buttons = [
            _hr_button(
                "releases.deploy",
                {"release": r.identifier, "server": s.hostname},
                _("Deploy to %(server)s") % {"server": s.hostname},
            )
            for s in servers
            if s.status in (Server.ACTIVE, Server.MAINTENANCE)
        ]
    return _page(
        request,
        "hal/fleet/module_detail.html",
        {
            "module": module,
            "deployments": deployments,
            "releases": releases,
            "servers": servers,
            "restart_command": json.dumps(module.restart_command),
            "configure_params": json.dumps({"module": module.name}),
            "reconcile": _hr_button("modules.reconcile", {"module": module.name}, _("Reconcile")),
            "selected_type": "module",
            "selected_id": module.pk,
            "selected_label": module.name,
        },
        "modules",
    )


@login_required
@require_GET
def releases_page(request: HttpRequest) -> HttpResponse:
    actor = request_actor(request, "web")
    try:
        releases = q.list_releases(actor, dict(request.GET.items()))
        modules = q.list_modules(actor)
    except HalError as exc:
        return _page_error(request, exc, "modules")
    return _page(
        request, "hal/fleet/releases.html", {"releases": releases, "modules": modules}, "modules"
    )


@login_required
@require_GET
def jobs_page(request: HttpRequest) -> HttpResponse:
    try:
        jobs = q.list_jobs(request_actor(request, "web"), dict(request.GET.items()))
    except HalError as exc:
        return _page_error(request, exc, "jobs")
    return _page(request, "hal/fleet/jobs.html", {"jobs": jobs, "filters": request.GET}, "jobs")


@login_required
@require_GET
def job_detail_page(request: HttpRequest, pk: int) -> HttpResponse:
    actor = request_actor(request, "web")
    try:
        job = q.get_job(actor, pk)
        lines = q.job_log(actor, pk)
    except HalError as exc:
        return _page_error(request, exc, "jobs")
    revert = None
    if job.kind in (Job.DEPLOY, Job.ROLLBACK) and job.status == Job.SUCCEEDED:
        revert = _hr_button("jobs.revert", {"job": job.pk}, _("Revert"))
    return _page(
        request,
        "hal/fleet/job_detail.html",
        {
            "job": job,
            "lines": lines,
            "revert": revert,
            "result_json": json.dumps(job.result, indent=2),
            "selected_type": "job",
            "selected_id": job.pk,
            "selected_label": f"job #{job.pk}",
        },
        "jobs",
    )
