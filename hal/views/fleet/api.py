"""The fleet's JSON API under /api/: servers, enrolment tokens, modules, releases, jobs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from hal.actions import jobs as job_actions
from hal.actions import releases as release_actions
from hal.actions import servers as server_actions
from hal.actions.base import Actor
from hal.errors import HalError, InvalidInput
from hal.models import Job, Server
from hal.queries import fleet as q
from hal.web.api import api, dispatch, json_body


def request_actor(request: HttpRequest, via: str = "api") -> Actor:
    return Actor.from_request(request, via=via)


def _server_row(server: Server, sample: Any = None) -> dict:
    row = server.as_dict()
    row["metrics"] = sample.as_dict() if sample is not None else None
    return row


def _servers_get(request: HttpRequest) -> dict:
    servers = q.list_servers(request_actor(request), dict(request.GET.items()))
    latest = q.latest_metrics(servers)
    return {"servers": [_server_row(s, latest.get(s.pk)) for s in servers]}


def _servers_post(request: HttpRequest) -> tuple[dict, int]:
    body = json_body(request)
    server = server_actions.check_register_server(
        actor=request_actor(request),
        hostname=body.get("hostname"),
        address=body.get("address", ""),
        description=body.get("description", ""),
    )
    return {"server": server.as_dict()}, 201


api_servers = dispatch(GET=_servers_get, POST=_servers_post)


@require_GET
@api()
def api_server_detail(request: HttpRequest, ref: str) -> dict:
    actor = request_actor(request)
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
    samples = q.server_metrics(request_actor(request), ref, limit=request.GET.get("limit"))
    return {"metrics": [m.as_dict() for m in samples]}


@require_POST
@api()
def api_server_approve(request: HttpRequest, ref: str) -> dict:
    server = server_actions.check_approve_server(actor=request_actor(request), server=ref)
    return {"server": server.as_dict()}


@require_POST
@api()
def api_server_maintenance(request: HttpRequest, ref: str) -> dict:
    body = json_body(request)
    server = server_actions.check_set_maintenance(
        actor=request_actor(request),
        server=ref,
        enabled=body.get("enabled"),
        reason=body.get("reason", ""),
    )
    return {"server": server.as_dict()}


@require_POST
@api()
def api_server_revoke_token(request: HttpRequest, ref: str) -> dict:
    count = server_actions.check_revoke_agent_tokens(actor=request_actor(request), server=ref)
    return {"revoked": count}


@require_POST
@api()
def api_server_issue_token(request: HttpRequest, ref: str) -> tuple[dict, int]:
    token = server_actions.check_issue_agent_token(actor=request_actor(request), server=ref)
    # Shown once; HAL keeps only its hash.
    return {"agent_token": token}, 201


def _enrolment_get(request: HttpRequest) -> dict:
    return {
        "enrolment_tokens": [t.as_dict() for t in q.list_enrolment_tokens(request_actor(request))]
    }


def _enrolment_post(request: HttpRequest) -> tuple[dict, int]:
    body = json_body(request)
    row, raw = server_actions.check_create_enrolment_token(
        actor=request_actor(request), note=body.get("note", ""), ttl_seconds=body.get("ttl_seconds")
    )
    return {"enrolment_token": row.as_dict(), "token": raw}, 201


api_enrolment_tokens = dispatch(GET=_enrolment_get, POST=_enrolment_post)


@require_GET
@api()
def api_modules(request: HttpRequest) -> dict:
    return {"modules": [m.as_dict() for m in q.list_modules(request_actor(request))]}


def _module_get(request: HttpRequest, name: str) -> dict:
    actor = request_actor(request)
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
        actor=request_actor(request),
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
        actor=request_actor(request), module=name, server=body.get("server")
    )
    return {"job": job.as_dict()}, 202


@require_POST
@api()
def api_module_restart(request: HttpRequest, name: str) -> tuple[dict, int]:
    body = json_body(request)
    job = release_actions.check_restart_module(
        actor=request_actor(request),
        module=name,
        server=body.get("server"),
        reason=body.get("reason", ""),
        argv_sha256=body.get("argv_sha256"),
    )
    return {"job": job.as_dict()}, 202


def _releases_get(request: HttpRequest) -> dict:
    return {
        "releases": [
            r.as_dict() for r in q.list_releases(request_actor(request), dict(request.GET.items()))
        ]
    }


def _releases_post(request: HttpRequest) -> tuple[dict, int]:
    """multipart/form-data: module, version, notes, artifact (a .tar.gz file)."""
    release = release_actions.check_register_release(
        actor=request_actor(request),
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
    return {"release": q.get_release(request_actor(request), ref).as_dict()}


@require_GET
@api()
def api_jobs(request: HttpRequest) -> dict:
    return {
        "jobs": [
            j.as_dict() for j in q.list_jobs(request_actor(request), dict(request.GET.items()))
        ]
    }


@require_GET
@api()
def api_job_detail(request: HttpRequest, pk: int) -> dict:
    actor = request_actor(request)
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
    job = fn(actor=request_actor(request), job=pk)
    return {"job": job.as_dict()}
