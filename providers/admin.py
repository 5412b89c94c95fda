"""Django admin for AI connections: hints only; every change goes through providers.actions.

Key fields are write-only. Every add/change/delete/enable/disable here needs a recent
re-auth of the admin session (the same session as the console, re-authenticated at
/reauth/) and is audited with via=admin (hal.views.adminsite). Nothing here calls .save().
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.utils.translation import gettext_lazy
from django.views.decorators.debug import sensitive_post_parameters

from hal.actions.base import Actor, require_recent
from hal.errors import HalError
from hal.views.adminsite import ActionModelAdmin, admin_actor, check_admin_gate, error_text
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


# ModelForm is generic only in django-stubs (at run time it takes no type argument).
class AIConnectionForm(forms.ModelForm):  # type: ignore[type-arg]
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
        conn: AIConnection = self.instance
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
class AIConnectionAdmin(ActionModelAdmin):
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
    actions = ("disable_connections", "enable_connections", "delete_through_actions")
    action_codes = {
        "add": "connections.create",
        "change": "connections.update",
        "delete": "connections.delete",
        "enable": "connections.set_enabled",
    }
    error_fields = ERROR_FIELDS

    @admin.display(description=gettext_lazy("credential"))
    def hint(self, obj: AIConnection) -> str:
        if obj.pk is None:
            return ""
        hints = secret_hints([obj]).get(obj.pk, {})
        return obj.as_dict(hints)["secret_hint"] or "—"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        fields = tuple(self.readonly_fields)
        return (*fields, "provider", "auth_method") if obj is not None else fields

    @method_decorator(sensitive_post_parameters(*SECRET_FIELDS))
    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().changeform_view(request, *args, **kwargs)

    def run_save(self, actor: Actor, form: Any, pk: Any) -> AIConnection:
        conn: AIConnection = form._run(actor)
        return conn

    def run_delete(self, actor: Actor, obj: Any) -> None:
        actions.check_delete_connection(actor=actor, connection=obj.pk)

    def _set_enabled(self, request: HttpRequest, queryset: Any, enabled: bool) -> None:
        actor = admin_actor(request)
        for conn in queryset:
            try:
                check_admin_gate(actor, self.action_codes["enable"], target=conn)
                actions.check_set_connection_enabled(actor=actor, connection=conn, enabled=enabled)
            except HalError as exc:
                messages.error(request, f"@{conn.name}: {error_text(exc)}")
            else:
                messages.success(request, f"@{conn.name}: {'enabled' if enabled else 'disabled'}")

    @admin.action(description=gettext_lazy("Disable selected connections"))
    def disable_connections(self, request: HttpRequest, queryset: Any) -> None:
        self._set_enabled(request, queryset, False)

    @admin.action(description=gettext_lazy("Enable selected connections"))
    def enable_connections(self, request: HttpRequest, queryset: Any) -> None:
        self._set_enabled(request, queryset, True)
