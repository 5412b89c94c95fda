"""Fleet pages (servers, modules, releases, jobs) and their JSON API under /api/.

Write actions from pages are plain CSRF-protected forms that call the same check_*
functions as the API; high-risk buttons start the three-step flow (static/hal/confirm.js).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.text import format_lazy
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from hal import queries_fleet as q
from hal.actions import jobs as job_actions
from hal.actions import releases as release_actions
from hal.actions import servers as server_actions
from hal.actions.base import Actor
from hal.api import api, dispatch, json_body
from hal.errors import HalError, InvalidInput
from hal.models import Job, Server


def _actor(request: HttpRequest, via: str = "api") -> Actor:
    return Actor.from_request(request, via=via)


def _server_row(server: Server, sample: Any = None) -> dict:
    row = server.as_dict()
    row["metrics"] = sample.as_dict() if sample is not None else None
    return row


# --- JSON API: servers ------------------------------------------------------------------------


def _servers_get(request: HttpRequest) -> dict:
    servers = q.list_servers(_actor(request), dict(request.GET.items()))
    latest = q.latest_metrics(servers)
    return {"servers": [_server_row(s, latest.get(s.pk)) for s in servers]}


def _servers_post(request: HttpRequest) -> tuple[dict, int]:
    body = json_body(request)
    server = server_actions.check_register_server(
        actor=_actor(request),
        hostname=body.get("hostname"),
        address=body.get("address", ""),
        description=body.get("description", ""),
    )
    return {"server": server.as_dict()}, 201


api_servers = dispatch(GET=_servers_get, POST=_servers_post)


@require_GET
@api()
def api_server_detail(request: HttpRequest, ref: str) -> dict:
    actor = _actor(request)
    server = q.get_server(actor, ref)
    latest = q.latest_metrics([server])
    return {
        "server": _server_row(server, latest.get(server.pk)),
        "deployments": [d.as_dict() for d in q.server_deployments(actor, server)],
        "jobs": [j.as_dict() for j in q.list_jobs(actor, {"server": server.pk, "limit": 20})],
    }


@require_GET
@api()
def api_server_metrics(request: HttpRequest, ref: str) -> dict:
    samples = q.server_metrics(_actor(request), ref, limit=request.GET.get("limit"))
    return {"metrics": [m.as_dict() for m in samples]}


@require_POST
@api()
def api_server_approve(request: HttpRequest, ref: str) -> dict:
    server = server_actions.check_approve_server(actor=_actor(request), server=ref)
    return {"server": server.as_dict()}


@require_POST
@api()
def api_server_maintenance(request: HttpRequest, ref: str) -> dict:
    body = json_body(request)
    server = server_actions.check_set_maintenance(
        actor=_actor(request),
        server=ref,
        enabled=body.get("enabled"),
        reason=body.get("reason", ""),
    )
    return {"server": server.as_dict()}


@require_POST
@api()
def api_server_revoke_token(request: HttpRequest, ref: str) -> dict:
    count = server_actions.check_revoke_agent_tokens(actor=_actor(request), server=ref)
    return {"revoked": count}


@require_POST
@api()
def api_server_issue_token(request: HttpRequest, ref: str) -> tuple[dict, int]:
    token = server_actions.check_issue_agent_token(actor=_actor(request), server=ref)
    # Shown once; HAL keeps only its hash.
    return {"agent_token": token}, 201


def _enrolment_get(request: HttpRequest) -> dict:
    return {"enrolment_tokens": [t.as_dict() for t in q.list_enrolment_tokens(_actor(request))]}


def _enrolment_post(request: HttpRequest) -> tuple[dict, int]:
    body = json_body(request)
    row, raw = server_actions.check_create_enrolment_token(
        actor=_actor(request), note=body.get("note", ""), ttl_seconds=body.get("ttl_seconds")
    )
    return {"enrolment_token": row.as_dict(), "token": raw}, 201


api_enrolment_tokens = dispatch(GET=_enrolment_get, POST=_enrolment_post)


# --- JSON API: modules and releases -----------------------------------------------------------


@require_GET
@api()
def api_modules(request: HttpRequest) -> dict:
    return {"modules": [m.as_dict() for m in q.list_modules(_actor(request))]}


def _module_get(request: HttpRequest, name: str) -> dict:
    actor = _actor(request)
    module = q.get_module(actor, name)
    return {
        "module": module.as_dict(),
        "deployments": [d.as_dict() for d in q.module_deployments(actor, module)],
        "releases": [r.as_dict() for r in q.list_releases(actor, {"module": module.pk})],
    }


_CONFIGURABLE = ("health_check_url", "restart_command", "description")


def _module_patch(request: HttpRequest, name: str) -> dict:
    body = json_body(request)
    unknown = set(body) - {*_CONFIGURABLE, "confirmation"}
    if unknown:
        raise InvalidInput(
            format_lazy(gettext_lazy("Unknown fields: {unknown}"), unknown=sorted(unknown))
        )
    # Command fields are high-risk: the token of a three-step confirmation made for
    # exactly these fields (POST /api/confirmations {action: "modules.configure"}).
    module = release_actions.check_configure_module(
        actor=_actor(request),
        module=name,
        confirmation=body.get("confirmation"),
        **{k: body[k] for k in _CONFIGURABLE if k in body},
    )
    return {"module": module.as_dict()}


api_module_detail = dispatch(GET=_module_get, PATCH=_module_patch)


@require_POST
@api()
def api_module_health(request: HttpRequest, name: str) -> tuple[dict, int]:
    body = json_body(request)
    job = release_actions.check_module_health(
        actor=_actor(request), module=name, server=body.get("server")
    )
    return {"job": job.as_dict()}, 202


@require_POST
@api()
def api_module_restart(request: HttpRequest, name: str) -> tuple[dict, int]:
    body = json_body(request)
    job = release_actions.check_restart_module(
        actor=_actor(request),
        module=name,
        server=body.get("server"),
        reason=body.get("reason", ""),
        argv_sha256=body.get("argv_sha256"),
    )
    return {"job": job.as_dict()}, 202


def _releases_get(request: HttpRequest) -> dict:
    return {
        "releases": [
            r.as_dict() for r in q.list_releases(_actor(request), dict(request.GET.items()))
        ]
    }


def _releases_post(request: HttpRequest) -> tuple[dict, int]:
    """multipart/form-data: module, version, notes, artifact (a .tar.gz file)."""
    release = release_actions.check_register_release(
        actor=_actor(request),
        module=request.POST.get("module", ""),
        version=request.POST.get("version", ""),
        notes=request.POST.get("notes", ""),
        artifact=request.FILES.get("artifact"),
    )
    return {"release": release.as_dict()}, 201


api_releases = dispatch(GET=_releases_get, POST=_releases_post)


@require_GET
@api()
def api_release_detail(request: HttpRequest, ref: str) -> dict:
    return {"release": q.get_release(_actor(request), ref).as_dict()}


# --- JSON API: jobs --------------------------------------------------------------------------


@require_GET
@api()
def api_jobs(request: HttpRequest) -> dict:
    return {"jobs": [j.as_dict() for j in q.list_jobs(_actor(request), dict(request.GET.items()))]}


@require_GET
@api()
def api_job_detail(request: HttpRequest, pk: int) -> dict:
    actor = _actor(request)
    job = q.get_job(actor, pk)
    lines = q.job_log(actor, job, after=request.GET.get("after"))
    return {"job": job.as_dict(), "log": [line.as_dict() for line in lines]}


JOB_OPS: dict[str, Callable[..., Job]] = {
    "cancel": job_actions.check_cancel_job,
    "stop": job_actions.check_stop_job,
    "retry": job_actions.check_retry_job,
    "resume": job_actions.check_resume_job,
}


@require_POST
@api()
def api_job_op(request: HttpRequest, pk: int, op: str) -> dict:
    fn = JOB_OPS.get(op)
    if fn is None:
        raise HalError(gettext_lazy("Unknown job operation."), code="not_found", http_status=404)
    job = fn(actor=_actor(request), job=pk)
    return {"job": job.as_dict()}


# --- pages -----------------------------------------------------------------------------------


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
    actor = _actor(request, "web")
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
    actor = _actor(request, "web")
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
        if d.previous_release_id:
            d.rollback_button = _hr_button(
                "modules.rollback",
                {"module": d.module.name, "server": server.hostname},
                _("Roll back to %(version)s") % {"version": d.previous_release.version},
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
    actor = _actor(request, "web")
    try:
        modules = q.list_modules(actor)
    except HalError as exc:
        return _page_error(request, exc, "modules")
    return _page(request, "hal/fleet/modules.html", {"modules": modules}, "modules")


@login_required
@require_GET
def module_detail_page(request: HttpRequest, name: str) -> HttpResponse:
    actor = _actor(request, "web")
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
    actor = _actor(request, "web")
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
        jobs = q.list_jobs(_actor(request, "web"), dict(request.GET.items()))
    except HalError as exc:
        return _page_error(request, exc, "jobs")
    return _page(request, "hal/fleet/jobs.html", {"jobs": jobs, "filters": request.GET}, "jobs")


@login_required
@require_GET
def job_detail_page(request: HttpRequest, pk: int) -> HttpResponse:
    actor = _actor(request, "web")
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


# --- page forms (POST → action → redirect back with a message) --------------------------------


def _form_action(request: HttpRequest, fn: Callable[[Actor], str], back: str) -> HttpResponse:
    try:
        text = fn(_actor(request, "web"))
        messages.success(request, text)
    except HalError as exc:
        messages.error(request, f"{exc.localized_message} ({exc.code})")
    return redirect(back)


@login_required
@require_POST
def form_register_server(request: HttpRequest) -> HttpResponse:
    def run(actor: Actor) -> str:
        s = server_actions.check_register_server(
            actor=actor,
            hostname=request.POST.get("hostname", ""),
            address=request.POST.get("address", ""),
            description=request.POST.get("description", ""),
        )
        return _("%(host)s registered (pending approval).") % {"host": s.hostname}

    return _form_action(request, run, "hal:servers")


@login_required
@require_POST
def form_enrolment_token(request: HttpRequest) -> HttpResponse:
    def run(actor: Actor) -> str:
        _token, raw = server_actions.check_create_enrolment_token(
            actor=actor, note=request.POST.get("note", "")
        )
        # Shown once on the next page load, then gone from the session.
        request.session["hal_new_enrolment_token"] = raw
        return _("Enrolment token created; copy it now, it is shown once.")

    return _form_action(request, run, "hal:servers")


@login_required
@require_POST
def form_server_op(request: HttpRequest, pk: int, op: str) -> HttpResponse:
    def run(actor: Actor) -> str:
        if op == "approve":
            s = server_actions.check_approve_server(actor=actor, server=pk)
            return _("%(host)s approved.") % {"host": s.hostname}
        if op in ("maintenance_on", "maintenance_off"):
            s = server_actions.check_set_maintenance(
                actor=actor,
                server=pk,
                enabled=op == "maintenance_on",
                reason=request.POST.get("reason", ""),
            )
            return _("%(host)s is now %(status)s.") % {"host": s.hostname, "status": s.status}
        if op == "revoke_token":
            n = server_actions.check_revoke_agent_tokens(actor=actor, server=pk)
            return _("%(count)s agent token(s) revoked.") % {"count": n}
        if op == "issue_token":
            request.session["hal_new_agent_token"] = server_actions.check_issue_agent_token(
                actor=actor, server=pk
            )
            return _("New agent token issued; copy it now, it is shown once.")
        raise HalError(gettext_lazy("Unknown operation."), code="not_found", http_status=404)

    return _form_action(request, run, redirect("hal:server_detail", pk=pk).url)


@login_required
@require_POST
def form_module_op(request: HttpRequest, name: str, op: str) -> HttpResponse:
    def run(actor: Actor) -> str:
        if op == "health":
            job = release_actions.check_module_health(
                actor=actor, module=name, server=request.POST.get("server") or None
            )
            return _("Health check queued as job #%(id)s.") % {"id": job.pk}
        if op == "restart":
            job = release_actions.check_restart_module(
                actor=actor,
                module=name,
                server=request.POST.get("server"),
                reason=request.POST.get("reason", ""),
                argv_sha256=request.POST.get("argv_sha256") or None,
            )
            return _("Restart queued as job #%(id)s.") % {"id": job.pk}
        # Configuration is high-risk: the page's form runs the three-step (confirm.js).
        raise HalError(gettext_lazy("Unknown operation."), code="not_found", http_status=404)

    return _form_action(request, run, redirect("hal:module_detail", name=name).url)


@login_required
@require_POST
def form_upload_release(request: HttpRequest) -> HttpResponse:
    def run(actor: Actor) -> str:
        r = release_actions.check_register_release(
            actor=actor,
            module=request.POST.get("module", ""),
            version=request.POST.get("version", ""),
            notes=request.POST.get("notes", ""),
            artifact=request.FILES.get("artifact"),
        )
        return _("%(release)s uploaded (sha256 %(sha)s…), status draft.") % {
            "release": r.identifier,
            "sha": r.sha256[:12],
        }

    return _form_action(request, run, "hal:releases")


@login_required
@require_POST
def form_job_op(request: HttpRequest, pk: int, op: str) -> HttpResponse:
    def run(actor: Actor) -> str:
        fn = JOB_OPS.get(op)
        if fn is None:
            raise HalError(gettext_lazy("Unknown operation."), code="not_found", http_status=404)
        job = fn(actor=actor, job=pk)
        return _("Job #%(id)s is %(status)s.") % {"id": job.pk, "status": job.status}

    return _form_action(request, run, redirect("hal:job_detail", pk=pk).url)
