"""The AI connections API and the /ops/ai page; views only translate HTTP to check_* calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET

from hal.actions.base import Actor, require_perm
from hal.errors import HalError
from hal.web.api import api, dispatch, json_body
from providers import actions
from providers.budgets import (
    budget_form,
    check_set_budget,
    check_set_price,
    price_form,
    resume_expired,
)
from providers.models import AIConnection
from providers.services import secret_hints
from providers.usage_totals import chart_bars, usage_summaries


def _actor(request: HttpRequest) -> Actor:
    return Actor.from_request(request, via="api")


def _listing() -> list[dict[str, Any]]:
    resume_expired()  # budgets: a paused connection whose period ended is active again
    conns = list(AIConnection.objects.all())
    hints = secret_hints(conns)
    usage = usage_summaries([c.pk for c in conns])
    return [c.as_dict(hints.get(c.pk, {}), usage[c.pk]) for c in conns]


def _list(request: HttpRequest) -> dict[str, Any]:
    require_perm(_actor(request), "view")
    return {"connections": _listing()}


def _create(request: HttpRequest) -> tuple[dict[str, Any], int]:
    conn = actions.check_create_connection(actor=_actor(request), data=json_body(request))
    return {**conn.as_dict(), **actions.verification_fields(conn)}, 201


def _get(request: HttpRequest, pk: int) -> dict[str, Any]:
    require_perm(_actor(request), "view")
    return actions.resolve_connection(pk).as_dict()


def _patch(request: HttpRequest, pk: int) -> dict[str, Any]:
    conn = actions.check_update_connection(
        actor=_actor(request), connection=pk, data=json_body(request)
    )
    return conn.as_dict()


def _delete(request: HttpRequest, pk: int) -> dict[str, Any]:
    actions.check_delete_connection(actor=_actor(request), connection=pk)
    return {"deleted": pk}


def _put_secret(request: HttpRequest, pk: int) -> dict[str, Any]:
    body = json_body(request)
    conn = actions.check_set_connection_secret(
        actor=_actor(request), connection=pk, api_key=body.get("api_key")
    )
    return conn.as_dict()


def _delete_secret(request: HttpRequest, pk: int) -> dict[str, Any]:
    conn = actions.check_delete_connection_secret(actor=_actor(request), connection=pk)
    return conn.as_dict()


def _verify(request: HttpRequest, pk: int) -> Any:
    outcome = actions.check_verify_connection(actor=_actor(request), connection=pk)
    body = {**outcome.connection.as_dict(), "model_choice": outcome.model_choice}
    if outcome.detail:
        body["detail"] = outcome.detail  # e.g. "Claude Code 2.1.332"
    if outcome.error is not None:
        # The failure is the answer (never dressed up as success); the row shows it too.
        return JsonResponse(
            {**outcome.error.as_dict(), "connection": body}, status=outcome.error.http_status
        )
    return body


def _set_enabled(enabled: bool) -> Callable[[HttpRequest, int], dict[str, Any]]:
    def view(request: HttpRequest, pk: int) -> dict[str, Any]:
        conn = actions.check_set_connection_enabled(
            actor=_actor(request), connection=pk, enabled=enabled
        )
        return conn.as_dict()

    return view


def _redaction(request: HttpRequest, pk: int) -> dict[str, Any]:
    body = json_body(request)
    conn = actions.check_set_redaction_patterns(
        actor=_actor(request), connection=pk, enabled=body.get("patterns")
    )
    return conn.as_dict()


def _oauth_start(request: HttpRequest, pk: int) -> dict[str, Any]:
    started = actions.check_oauth_start(
        actor=_actor(request), connection=pk, redirect_uri=actions.oauth_redirect_uri(request)
    )
    return {"authorize_url": started.authorize_url, "expires_at": started.expires_at.isoformat()}


connections = dispatch(GET=_list, POST=_create)
connection = dispatch(GET=_get, PATCH=_patch, DELETE=_delete)
connection_secret = dispatch(PUT=_put_secret, DELETE=_delete_secret)
connection_verify = dispatch(POST=_verify)
connection_disable = dispatch(POST=_set_enabled(False))
connection_enable = dispatch(POST=_set_enabled(True))
connection_oauth_start = dispatch(POST=_oauth_start)
connection_redaction = dispatch(PUT=_redaction)


def _form_create_data(post: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        key: post.get(key, "")
        for key in ("name", "provider", "auth_method", "base_url", "role", "traits", "instructions")
    }
    if post.get("api_key"):
        data["api_key"] = post["api_key"]
    if data["auth_method"] == AIConnection.OAUTH:
        data["oauth"] = {
            "authorize_url": post.get("oauth_authorize_url", ""),
            "token_url": post.get("oauth_token_url", ""),
            "client_id": post.get("oauth_client_id", ""),
            "scopes": post.get("oauth_scopes", ""),
        }
        if post.get("oauth_client_secret"):
            data["oauth"]["client_secret"] = post["oauth_client_secret"]
    return data


def verify_template(choice: str) -> str:
    """The message of a successful verify (%-placeholders), by how the model was chosen."""
    if choice == "preferred":
        return _("@%(name)s: %(count)s models verified; default model %(model)s (preferred).")
    if choice == "first":
        return _(
            "@%(name)s: %(count)s models verified; default model %(model)s (first of the list)."
        )
    return _("@%(name)s: %(count)s models verified; default model %(model)s.")


def verify_strings() -> dict[str, str]:
    """verify_template per choice, for ops_ai.js (the page reloads after a verify)."""
    strings = {choice: verify_template(choice) for choice in ("preferred", "first", "kept")}
    strings["delete_confirm"] = _("Delete this connection and its stored credentials?")
    return strings


def verify_message(outcome: Any) -> str:
    """What a successful verify did, naming the default model and why it is that one."""
    return verify_template(outcome.model_choice) % {
        "name": outcome.connection.name,
        "count": len(outcome.models),
        "model": outcome.connection.model,
    }


def _added_message(conn: AIConnection) -> str:
    """One result for an add: verified with its default model, or why not."""
    outcome = getattr(conn, "verification", None)
    if outcome is None:
        return _("@%(name)s was added.") % {"name": conn.name}
    if outcome.error is not None:
        return _("@%(name)s was added, but the verification failed: %(message)s") % {
            "name": conn.name,
            "message": outcome.error.localized_message,
        }
    return verify_message(outcome)


def _form_post(request: HttpRequest, actor: Actor) -> str:
    """Run one /ops/ai form (the page also works without JavaScript); returns a message."""
    post = request.POST
    op = post.get("op", "")
    if op == "create":
        conn = actions.check_create_connection(actor=actor, data=_form_create_data(post))
        return _added_message(conn)
    pk = post.get("id", "")
    if op == "secret":
        conn = actions.check_set_connection_secret(
            actor=actor, connection=pk, api_key=post.get("api_key")
        )
        return _("The key of @%(name)s was saved.") % {"name": conn.name}
    if op == "update":
        data = {
            key: post[key]
            for key in ("name", "role", "traits", "instructions", "base_url")
            if key in post
        }
        conn = actions.check_update_connection(actor=actor, connection=pk, data=data)
        return _("@%(name)s was updated.") % {"name": conn.name}
    if op == "model":
        conn = actions.check_update_connection(
            actor=actor, connection=pk, data={"model": post.get("model", "")}
        )
        return _("@%(name)s now uses %(model)s.") % {
            "name": conn.name,
            "model": conn.model or _("no model"),
        }
    if op == "verify":
        outcome = actions.check_verify_connection(actor=actor, connection=pk)
        if outcome.error is not None:
            raise outcome.error
        return verify_message(outcome)
    if op in ("enable", "disable"):
        conn = actions.check_set_connection_enabled(
            actor=actor, connection=pk, enabled=op == "enable"
        )
        return _("@%(name)s is %(status)s.") % {"name": conn.name, "status": conn.status}
    if op == "price":
        conn = check_set_price(actor=actor, connection=pk, data=price_form(post))
        return _("The prices of @%(name)s were saved.") % {"name": conn.name}
    if op == "budget":
        conn = check_set_budget(actor=actor, connection=pk, data=budget_form(post))
        return _("The budget of @%(name)s was saved.") % {"name": conn.name}
    if op == "delete":
        actions.check_delete_connection(actor=actor, connection=pk)
        return _("The connection was deleted.")
    raise HalError(gettext_lazy("Unknown operation."), code="unknown_operation")


@sensitive_post_parameters("api_key", "oauth_client_secret")
@login_required
def ops_ai(request: HttpRequest) -> HttpResponse:
    """The AI connections screen; the list is rendered server-side and driven by ops_ai.js."""
    actor = Actor.from_request(request)
    error: HalError | None = None
    if request.method == "POST":
        if request.POST.get("op") == "oauth":
            try:
                started = actions.check_oauth_start(
                    actor=actor,
                    connection=request.POST.get("id", ""),
                    redirect_uri=actions.oauth_redirect_uri(request),
                )
            except HalError as exc:
                error = exc
            else:
                return redirect(started.authorize_url)
        else:
            try:
                messages.success(request, _form_post(request, actor))
            except HalError as exc:
                error = exc
            else:
                return redirect(reverse("providers:ops_ai"))
    elif request.method != "GET":
        return HttpResponse(status=405)
    connections = _listing()
    conns = list(AIConnection.objects.all())
    shown = {conn.pk: conn.last_error_text() for conn in conns}
    for c in connections:
        c["chart"] = chart_bars(c["usage"]["last_30_days"])
        # last_error in the operator's language (a chat failure's reason, a fixed msgid).
        c["last_error_text"] = shown.get(c["id"], "")
    response = render(
        request,
        "providers/ops_ai.html",
        {
            "page": "ops_ai",
            "error": error,
            "connections": connections,
            "providers": AIConnection.PROVIDER_CHOICES,
            # Each method with the providers that accept it: the add form offers only those.
            "auth_methods": [
                (
                    value,
                    label,
                    " ".join(p for p, ok in AIConnection.AUTH_FOR_PROVIDER.items() if value in ok),
                )
                for value, label in AIConnection.AUTH_CHOICES
            ],
            "default_base_urls": AIConnection.DEFAULT_BASE_URLS,
            "verify_strings": verify_strings(),
            "can_administer": _allowed(actor, "administer"),
            "can_operate": _allowed(actor, "operate"),
            "callback_url": actions.oauth_redirect_uri(request),
        },
        status=error.http_status if error else 200,
    )
    targets = _oauth_form_targets(conns)
    if targets:
        # The no-JavaScript OAuth form's POST is redirected to the authorization server, and
        # browsers check form-action on every hop: allow exactly the configured origins.
        response._csp_update = {"form-action": targets}  # type: ignore[attr-defined]
    return response


def _oauth_form_targets(conns: list[AIConnection]) -> list[str]:
    """Origins of the OAuth connections' authorize URLs (validated when saved)."""
    origins: set[str] = set()
    for conn in conns:
        if conn.auth_method != AIConnection.OAUTH or not conn.oauth_authorize_url:
            continue
        parts = urlsplit(conn.oauth_authorize_url)
        try:
            host, port = parts.hostname, parts.port
        except ValueError:
            continue
        if parts.scheme not in ("http", "https") or not host:
            continue
        host = f"[{host}]" if ":" in host else host
        origin = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
        # A policy source can hold no separators; a URL that made it past validation never
        # does, but the header is built from stored data, so check anyway.
        if not any(c in origin for c in " ;,'\"\r\n"):
            origins.add(origin)
    return sorted(origins)


def _allowed(actor: Actor, perm: str) -> bool:
    try:
        require_perm(actor, perm)
    except HalError:
        return False
    return True


@require_GET
@login_required
def oauth_callback(request: HttpRequest) -> HttpResponse:
    """The provider redirects the operator's browser here; finish and go back to /ops/ai."""
    try:
        conn = actions.check_oauth_callback(
            actor=Actor.from_request(request), query=request.META.get("QUERY_STRING", "")
        )
    except HalError as exc:
        messages.error(
            request,
            _("OAuth connection failed: %(message)s (%(code)s)")
            % {"message": exc.localized_message, "code": exc.code},
        )
        return redirect(reverse("providers:ops_ai") + "?oauth=failed")
    connected = _("@%(name)s is connected through OAuth.") % {"name": conn.name}
    outcome = getattr(conn, "verification", None)
    if outcome is not None and outcome.error is not None:
        messages.error(
            request,
            _("@%(name)s is connected through OAuth, but the verification failed: %(message)s")
            % {"name": conn.name, "message": outcome.error.localized_message},
        )
    else:
        # One step, one result: connected and (when it ran) verified, in one line.
        done = f" {verify_message(outcome)}" if outcome is not None else ""
        messages.success(request, connected + done)
    return redirect(reverse("providers:ops_ai") + "?oauth=connected")


__all__ = [
    "api",
    "connection",
    "connection_disable",
    "connection_enable",
    "connection_oauth_start",
    "connection_secret",
    "connection_verify",
    "connections",
    "oauth_callback",
    "ops_ai",
]
