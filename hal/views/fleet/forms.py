"""The fleet pages' forms: POST, run the action, redirect back with a message."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from hal.actions import releases as release_actions
from hal.actions import servers as server_actions
from hal.actions.base import Actor
from hal.errors import HalError
from hal.views.fleet.api import JOB_OPS, request_actor


def _form_action(request: HttpRequest, fn: Callable[[Actor], str], back: str) -> HttpResponse:
    try:
        text = fn(request_actor(request, "web"))
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
