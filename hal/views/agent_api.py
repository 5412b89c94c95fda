"""The node agent's API under /api/agent/: bearer-token auth, no session, no CSRF, small bodies.

A wrong or revoked token gets 401 and is logged (and audited); an oversized (>64 KiB) or
malformed body gets 400 before anything is stored. Everything the agent changes goes
through hal.actions with Actor.for_system("agent", label="agent:<hostname>").
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import FileResponse, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.csrf import csrf_exempt

from hal.actions import jobs as job_actions
from hal.actions import releases as release_actions
from hal.actions import servers as server_actions
from hal.actions.base import Actor, record_audit
from hal.errors import Conflict, HalError, InvalidInput, NotAuthenticated, NotFound
from hal.models import Job, Server
from hal.web.api import error_response
from hal.web.clientip import client_ip
from hal.web.jsonin import loads_json

log = logging.getLogger("hal.agent_api")

MAX_AGENT_BODY = 64 * 1024


def _read_json(request: HttpRequest) -> dict[str, Any]:
    """The JSON object body, refusing anything over 64 KiB before reading it."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = MAX_AGENT_BODY + 1
    if declared > MAX_AGENT_BODY:
        raise InvalidInput(_("Payload larger than 64 KiB."), code="payload_too_large")
    raw = request.read(MAX_AGENT_BODY + 1)
    if len(raw) > MAX_AGENT_BODY:
        raise InvalidInput(_("Payload larger than 64 KiB."), code="payload_too_large")
    if not raw:
        return {}
    # Strict, as every API body: invalid_json / invalid_text.
    data = loads_json(raw)
    if not isinstance(data, dict):
        raise InvalidInput(_("Payload must be a JSON object."), code="invalid_json")
    return data


def _refuse_token(request: HttpRequest, why: str) -> JsonResponse:
    ip = client_ip(request)
    log.warning("agent API: %s from %s on %s", why, ip, request.path)
    actor = Actor(user=None, via="agent", label="agent:unauthenticated", ip=ip, system=True)
    try:
        record_audit(
            actor,
            "agent.auth",
            target_type="agent",
            target_label=request.path[:255],
            result="refused",
            error_code="agent_token_invalid",
            message=why,
        )
    except Exception:  # logging a refusal must not turn it into a 500
        log.exception("could not audit agent auth failure")
    exc = NotAuthenticated(_("Unknown or revoked agent token."), code="agent_token_invalid")
    response = error_response(exc)
    response["WWW-Authenticate"] = 'Bearer realm="hal-agent"'
    return response


def agent_endpoint(
    *, methods: tuple[str, ...], body: bool = True
) -> Callable[[Callable[..., Any]], Callable[..., HttpResponseBase]]:
    """Authenticate the bearer token, parse the body, map HalError → JSON error."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., HttpResponseBase]:
        @csrf_exempt
        @functools.wraps(fn)
        def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method not in methods:
                return error_response(
                    HalError(_("Method not allowed."), code="method_not_allowed", http_status=405)
                )
            header = request.headers.get("Authorization", "")
            raw = header[7:].strip() if header.startswith("Bearer ") else ""
            found = server_actions.authenticate_agent(raw)
            if found is None:
                return _refuse_token(request, "missing token" if not raw else "bad token")
            server, token = found
            server_actions.do_touch_agent_token(token)
            actor = Actor.for_system("agent", label=f"agent:{server.hostname}")
            try:
                data = _read_json(request) if body else {}
                result = fn(request, server, actor, data, *args, **kwargs)
            except HalError as exc:
                return error_response(exc)
            if isinstance(result, HttpResponseBase):
                return result
            status = 200
            if isinstance(result, tuple):
                result, status = result
            return JsonResponse(result, status=status)

        return view

    return decorate


def _interval() -> int:
    return int(getattr(settings, "HAL_AGENT_INTERVAL_SECONDS", 15))


@csrf_exempt
def enrol(request: HttpRequest) -> HttpResponse:
    """POST {enrolment_token, hostname, agent_version, facts} → 201 {server, agent_token}."""
    if request.method != "POST":
        return error_response(
            HalError(_("Method not allowed."), code="method_not_allowed", http_status=405)
        )
    try:
        data = _read_json(request)
        hostname = data.get("hostname")
        label = f"agent:{hostname}" if isinstance(hostname, str) else "agent:unknown"
        actor = Actor.for_system("agent", label=label[:150])
        server, token = server_actions.check_enrol_agent(
            actor=actor,
            enrolment_token=data.get("enrolment_token"),
            hostname=hostname,
            agent_version=data.get("agent_version", ""),
            facts=data.get("facts"),
        )
    except NotAuthenticated as exc:
        log.warning("agent enrolment refused from %s: %s", client_ip(request), exc)
        return error_response(exc)
    except HalError as exc:
        return error_response(exc)
    # The agent token is in this one response only; HAL keeps its hash.
    return JsonResponse(
        {"server": server.as_dict(), "agent_token": token, "interval": _interval()}, status=201
    )


@agent_endpoint(methods=("GET",), body=False)
def me(request: HttpRequest, server: Server, actor: Actor, data: dict) -> dict:
    """GET → this agent's server (status tells a pending agent to wait)."""
    return {"server": server.as_dict(), "interval": _interval()}


@agent_endpoint(methods=("POST",))
def heartbeat(request: HttpRequest, server: Server, actor: Actor, data: dict) -> dict:
    """POST {agent_version, metrics{...}} → {server_status, interval}."""
    unknown = set(data) - {"agent_version", "metrics"}
    if unknown:
        raise InvalidInput(
            format_lazy(_("unknown fields: {unknown}"), unknown=sorted(unknown)),
            code="invalid_payload",
        )
    server_actions.check_record_heartbeat(
        actor=actor,
        server=server,
        agent_version=data.get("agent_version", ""),
        metrics=data.get("metrics"),
    )
    server.refresh_from_db()
    return {"server_status": server.effective_status(), "interval": _interval()}


def job_payload(job: Job) -> dict:
    """What the agent needs to run a claimed job — commands/URLs as bound to the job."""
    payload: dict[str, Any] = {"id": job.pk, "kind": job.kind, "attempt": job.attempts}
    if job.kind == Job.DEPLOY:
        release = job_actions.job_release(job)
        payload.update(
            module=job_actions.job_module(job).name,
            version=release.version,
            sha256=release.sha256,
            size=release.size,
            artifact_url=reverse("hal:agent_job_artifact", args=[job.pk]),
        )
    elif job.kind == Job.ROLLBACK:
        payload.update(
            module=job_actions.job_module(job).name, to_version=job_actions.job_release(job).version
        )
    elif job.kind == Job.HEALTH_CHECK:
        # What was configured when the job was queued, not whatever is configured now.
        payload.update(
            module=job_actions.job_module(job).name, url=str(job.params.get("url") or "")
        )
    elif job.kind == Job.RESTART:
        # check_claim_job already refused a job whose stored argv does not match its hash.
        payload.update(
            module=job_actions.job_module(job).name,
            argv=list(job.params["argv"]),
            argv_sha256=job.params["argv_sha256"],
        )
    return payload


@agent_endpoint(methods=("POST",))
def claim(request: HttpRequest, server: Server, actor: Actor, data: dict) -> dict:
    """POST → {job: {...}} (claimed for this agent) or {job: null}."""
    job = job_actions.check_claim_job(actor=actor, server=server)
    return {"job": job_payload(job) if job else None}


@agent_endpoint(methods=("POST",))
def job_log(request: HttpRequest, server: Server, actor: Actor, data: dict, job_id: int) -> dict:
    """POST {lines: [{level, text}]} → {stop_requested}."""
    job = job_actions.check_append_job_log(
        actor=actor, server=server, job=job_id, lines=data.get("lines")
    )
    return {"stop_requested": job.stop_requested}


@agent_endpoint(methods=("POST",))
def job_lease(request: HttpRequest, server: Server, actor: Actor, data: dict, job_id: int) -> dict:
    """POST → renew the lease; {stop_requested}."""
    job = job_actions.check_renew_job_lease(actor=actor, server=server, job=job_id)
    return {"stop_requested": job.stop_requested}


@agent_endpoint(methods=("POST",))
def job_finish(request: HttpRequest, server: Server, actor: Actor, data: dict, job_id: int) -> dict:
    """POST {status, result, error_code, message} → {job}."""
    job = job_actions.check_finish_job(
        actor=actor,
        server=server,
        job=job_id,
        status=data.get("status"),
        result=data.get("result"),
        error_code=data.get("error_code", ""),
        message=data.get("message", ""),
    )
    return {"job": job.as_dict()}


@agent_endpoint(methods=("GET",), body=False)
def job_artifact(
    request: HttpRequest, server: Server, actor: Actor, data: dict, job_id: int
) -> FileResponse:
    """GET → the artifact of this agent's running deploy job, after HAL re-verifies its sha256."""
    job = job_actions.resolve_job(job_id)
    release = job.release
    if job.server_id != server.pk or job.kind != Job.DEPLOY or release is None:
        raise NotFound(format_lazy(_("No job {job_id}."), job_id=job_id), code="job_not_found")
    if job.status != Job.RUNNING:
        raise Conflict(
            format_lazy(_("Job #{pk} is {status}."), pk=job.pk, status=job.status),
            code="job_not_running",
        )
    path = release_actions.verify_artifact(actor, release, job=job)
    response = FileResponse(path.open("rb"), content_type="application/gzip")
    response["Content-Length"] = str(path.stat().st_size)
    response["X-HAL-SHA256"] = release.sha256
    return response
