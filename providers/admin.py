"""Django admin for AI connections: hints only; every change goes through providers.actions.

Key fields are write-only; saving one needs a recent re-auth of the admin session (the
same session as the console, re-authenticated at /reauth/). Nothing here calls .save().
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.debug import sensitive_post_parameters

from hal.actions.base import Actor, require_recent
from hal.errors import HalError
from providers import actions
from providers.models import AIConnection
from providers.services import secret_hints

SECRET_FIELDS = ("api_key", "oauth_client_secret")
EDITABLE = (
    "name",
    "provider",
    "auth_method",
    "base_url",
    "role",
    "traits",
    "instructions",
    "position",
    "oauth_authorize_url",
    "oauth_token_url",
    "oauth_client_id",
    "oauth_scopes",
)
OAUTH_COLUMNS = {
    "oauth_authorize_url": "authorize_url",
    "oauth_token_url": "token_url",
    "oauth_client_id": "client_id",
    "oauth_scopes": "scopes",
}
# Which action field a form error belongs to, by error code.
ERROR_FIELDS = {
    "invalid_name": "name",
    "duplicate_name": "name",
    "invalid_base_url": "base_url",
    "unknown_provider": "provider",
    "unknown_auth_method": "auth_method",
    "invalid_auth_method": "auth_method",
    "empty_secret": "api_key",
    "invalid_secret": "api_key",
    "wrong_auth_method": "api_key",
}


class AIConnectionForm(forms.ModelForm):
    """Runs the create/update action once the fields are valid; secrets are write-only."""

    api_key = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave empty to keep the stored key. Needs a recent re-auth.",
    )
    oauth_client_secret = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only (OAuth connections). Leave empty to keep the stored one.",
    )

    class Meta:
        model = AIConnection
        fields = EDITABLE

    request: HttpRequest | None = None
    result: AIConnection | None = None

    def _post_clean(self) -> None:
        super()._post_clean()
        if self.errors or self.request is None:
            return
        try:
            self.result = self._run(Actor.from_request(self.request, via="web"))
        except HalError as exc:
            field = ERROR_FIELDS.get(exc.code)
            if exc.code == "reauth_required":
                message = f"{exc.message} Re-authenticate at /reauth/ and save again."
            else:
                message = f"{exc.message} ({exc.code})"
            self.add_error(field if field in self.fields else None, message)

    def _run(self, actor: Actor) -> AIConnection:
        data = self.cleaned_data
        api_key = data.get("api_key") or None
        client_secret = data.get("oauth_client_secret") or None
        if self.instance.pk is None:
            body: dict[str, Any] = {
                k: data.get(k) for k in EDITABLE if k not in OAUTH_COLUMNS and k != "position"
            }
            if "position" in self.changed_data and data.get("position") is not None:
                body["position"] = data["position"]
            if data.get("auth_method") == AIConnection.OAUTH:
                body["oauth"] = {OAUTH_COLUMNS[k]: data.get(k, "") for k in OAUTH_COLUMNS}
                if client_secret:
                    body["oauth"]["client_secret"] = client_secret
            elif client_secret:
                body["oauth"] = {"client_secret": client_secret}
            if api_key:
                body["api_key"] = api_key
            return actions.check_create_connection(actor=actor, data=body)
        changed = [k for k in self.changed_data if k in EDITABLE]
        body = {k: data[k] for k in changed if k not in OAUTH_COLUMNS}
        for key in ("provider", "auth_method"):
            body.pop(key, None)  # read-only on change
        oauth = {OAUTH_COLUMNS[k]: data.get(k, "") for k in changed if k in OAUTH_COLUMNS}
        if client_secret:
            oauth["client_secret"] = client_secret
        if oauth:
            body["oauth"] = oauth
        conn = self.instance
        if api_key:
            # Checked before any change so that a refused key leaves the row untouched.
            require_recent(actor)
        if body:
            conn = actions.check_update_connection(actor=actor, connection=conn.pk, data=body)
        if api_key:
            conn = actions.check_set_connection_secret(
                actor=actor, connection=conn.pk, api_key=api_key
            )
        return conn


@admin.register(AIConnection)
class AIConnectionAdmin(admin.ModelAdmin):
    """Connections in the admin site: hints only, changes through the actions."""

    form = AIConnectionForm
    list_display = ("name", "provider", "auth_method", "status", "model", "hint", "last_checked_at")
    list_filter = ("provider", "status")
    search_fields = ("name", "role")
    ordering = ("position", "id")
    readonly_fields = (
        "hint",
        "status",
        "model",
        "models",
        "last_checked_at",
        "last_error",
        "oauth_expires_at",
        "created_by",
        "created_at",
        "updated_at",
    )
    actions = ("disable_connections", "enable_connections", "delete_connections")

    @admin.display(description=gettext_lazy("credential"))
    def hint(self, obj: AIConnection) -> str:
        if obj.pk is None:
            return ""
        hints = secret_hints([obj]).get(obj.pk, {})
        return obj.as_dict(hints)["secret_hint"] or "—"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        fields = tuple(self.readonly_fields)
        return (*fields, "provider", "auth_method") if obj is not None else fields

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kw: Any):
        base = super().get_form(request, obj, change=change, **kw)

        class RequestForm(base):  # type: ignore[misc, valid-type]
            pass

        RequestForm.request = request
        return RequestForm

    @method_decorator(sensitive_post_parameters(*SECRET_FIELDS))
    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().changeform_view(request, *args, **kwargs)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        # The form's action already wrote the row (audited); only reflect the result here.
        if form.result is not None:
            obj.pk = form.result.pk
            obj.refresh_from_db()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        return None

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        found = super().get_actions(request)
        found.pop("delete_selected", None)  # bypasses the re-auth gate and the vault cleanup
        return found

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        try:
            require_recent(Actor.from_request(request, via="web"))
        except HalError as exc:
            messages.error(
                request,
                _("%(message)s Re-authenticate at /reauth/ first.")
                % {"message": exc.localized_message},
            )
            return HttpResponseRedirect(
                reverse("admin:providers_aiconnection_change", args=[object_id])
            )
        return super().delete_view(request, object_id, extra_context)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        actions.check_delete_connection(
            actor=Actor.from_request(request, via="web"), connection=obj.pk
        )

    def _each(self, request: HttpRequest, queryset: Any, run: Any, done: str) -> None:
        actor = Actor.from_request(request, via="web")
        for conn in queryset:
            try:
                run(actor, conn)
            except HalError as exc:
                messages.error(request, f"@{conn.name}: {exc.localized_message}")
            else:
                messages.success(request, f"@{conn.name}: {done}")

    @admin.action(description=gettext_lazy("Disable selected connections"))
    def disable_connections(self, request: HttpRequest, queryset: Any) -> None:
        self._each(
            request,
            queryset,
            lambda a, c: actions.check_set_connection_enabled(actor=a, connection=c, enabled=False),
            _("disabled"),
        )

    @admin.action(description=gettext_lazy("Enable selected connections"))
    def enable_connections(self, request: HttpRequest, queryset: Any) -> None:
        self._each(
            request,
            queryset,
            lambda a, c: actions.check_set_connection_enabled(actor=a, connection=c, enabled=True),
            _("enabled"),
        )

    @admin.action(description=gettext_lazy("Delete selected connections (needs re-auth)"))
    def delete_connections(self, request: HttpRequest, queryset: Any) -> None:
        self._each(
            request,
            queryset,
            lambda a, c: actions.check_delete_connection(actor=a, connection=c),
            _("deleted"),
        )
