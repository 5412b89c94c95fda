"""The Runbooks page and JSON API; views only translate HTTP to check_* and reads."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from hal.actions.base import Actor
from hal.errors import HalError
from hal.web.api import dispatch, json_body
from runbooks import actions, services
from runbooks.models import Runbook


def _actor(request: HttpRequest, via: str = "web") -> Actor:
    return Actor.from_request(request, via=via)


def _can_edit(request: HttpRequest) -> bool:
    return bool(request.user.has_perm("hal.administer"))


def _form_scopes(post: Any) -> dict[str, str]:
    return {kind: post.get(f"scope_{kind}", "") for kind in ("pages", "servers", "modules")}


# --- pages -----------------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def runbooks_page(request: HttpRequest) -> HttpResponse:
    """The list with search, and (administrators) the form for a new runbook."""
    actor = _actor(request)
    error: HalError | None = None
    form: dict[str, Any] = {}
    if request.method == "POST":
        form = request.POST.dict()
        try:
            created = actions.check_create_runbook(
                actor=actor,
                title=request.POST.get("title"),
                body=request.POST.get("body"),
                tags=request.POST.get("tags", ""),
                scopes=_form_scopes(request.POST),
            )
        except HalError as exc:
            error = exc
        else:
            return redirect("runbooks:detail", runbook_id=created.pk)
    query, tag = request.GET.get("q", ""), request.GET.get("tag", "")
    try:
        rows = services.search_runbooks(actor, query=query, tag=tag)
    except HalError as exc:
        rows, error = [], error or exc
    return render(
        request,
        "runbooks/list.html",
        {
            "runbooks": rows,
            "q": query,
            "tag": tag,
            "form": form,
            "can_edit": _can_edit(request),
            "error": error,
            "page": "runbooks",
        },
        status=error.http_status if error else 200,
    )


@login_required
@require_http_methods(["GET", "POST"])
def runbook_page(request: HttpRequest, runbook_id: int) -> HttpResponse:
    """One runbook: a version rendered as Markdown, its versions, edit/archive forms."""
    actor = _actor(request)
    error: HalError | None = None
    if request.method == "POST":
        try:
            if request.POST.get("op") == "archive":
                actions.check_archive_runbook(actor=actor, runbook_id=runbook_id)
            else:
                actions.check_edit_runbook(
                    actor=actor,
                    runbook_id=runbook_id,
                    title=request.POST.get("title"),
                    body=request.POST.get("body"),
                    tags=request.POST.get("tags", ""),
                    scopes=_form_scopes(request.POST),
                    base_version=request.POST.get("base_version"),
                    note=request.POST.get("note", ""),
                )
        except HalError as exc:
            error = exc
        else:
            return redirect("runbooks:detail", runbook_id=runbook_id)
    runbook: Runbook | None
    shown: dict[str, Any] | None
    try:
        runbook = actions.load_runbook(runbook_id)
        shown = services.read_version(actor, runbook=runbook_id, version=request.GET.get("version"))
    except HalError as exc:
        if error is None and exc.code == "runbook_not_found":
            return render(request, "runbooks/list.html", {"error": exc}, status=404)
        error = error or exc
        runbook = Runbook.objects.filter(pk=runbook_id).first()
        shown = services.read_version(actor, runbook=runbook_id) if runbook else None
    return render(
        request,
        "runbooks/detail.html",
        {
            "runbook": runbook,
            "shown": shown,
            "versions": services.versions(runbook) if runbook else [],
            "can_edit": _can_edit(request) and runbook is not None and not runbook.archived,
            "edit": request.POST.dict() if error and request.method == "POST" else None,
            "error": error,
            "page": "runbooks",
        },
        status=error.http_status if error else 200,
    )


# --- JSON API --------------------------------------------------------------------------------


def _api_list(request: HttpRequest) -> dict:
    """GET /api/runbooks?q=&tag=&scope=&archived=1"""
    rows = services.search_runbooks(
        _actor(request, "api"),
        query=request.GET.get("q", ""),
        tag=request.GET.get("tag", ""),
        scope=request.GET.get("scope", ""),
        include_archived=request.GET.get("archived") == "1",
    )
    return {"runbooks": [r.summary() for r in rows]}


def _api_create(request: HttpRequest) -> tuple[dict, int]:
    """POST /api/runbooks {title, body, tags, scopes}"""
    data = json_body(request)
    runbook = actions.check_create_runbook(
        actor=_actor(request, "api"),
        title=data.get("title"),
        body=data.get("body"),
        tags=data.get("tags"),
        scopes=data.get("scopes"),
    )
    return {"runbook": services.read_version(_actor(request, "api"), runbook=runbook.pk)}, 201


def _api_read(request: HttpRequest, runbook_id: int) -> dict:
    """GET /api/runbooks/<id>?version=N"""
    actor = _actor(request, "api")
    shown = services.read_version(actor, runbook=runbook_id, version=request.GET.get("version"))
    runbook = actions.load_runbook(runbook_id)
    return {"runbook": shown, "versions": services.versions(runbook)}


def _api_edit(request: HttpRequest, runbook_id: int) -> dict:
    """POST /api/runbooks/<id> {title, body, tags, scopes, base_version, note}"""
    data = json_body(request)
    actor = _actor(request, "api")
    runbook = actions.check_edit_runbook(
        actor=actor,
        runbook_id=runbook_id,
        title=data.get("title"),
        body=data.get("body"),
        tags=data.get("tags"),
        scopes=data.get("scopes"),
        base_version=data.get("base_version"),
        note=data.get("note", ""),
    )
    return {"runbook": services.read_version(actor, runbook=runbook.pk)}


def _api_archive(request: HttpRequest, runbook_id: int) -> dict:
    """POST /api/runbooks/<id>/archive"""
    runbook = actions.check_archive_runbook(actor=_actor(request, "api"), runbook_id=runbook_id)
    return {"runbook": runbook.summary()}


api_runbooks = dispatch(GET=_api_list, POST=_api_create)
api_runbook = dispatch(GET=_api_read, POST=_api_edit)
api_runbook_archive = dispatch(POST=_api_archive)
