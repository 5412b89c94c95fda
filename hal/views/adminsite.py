"""HAL's Django admin site: every add/change/delete runs a hal `check_*` action (via=admin).

The stock admin saves rows directly: no re-auth, no audit. Here a model admin is either
an `ActionModelAdmin` — its form's last validation step runs the model's action after
the admin gate (`hal.administer` + a re-auth within HAL_REAUTH_SECONDS, refusals
audited), `save_model`/`save_related` only reflect the result, deletes go through the
action too — or read-only. `tests/core/test_admin_gates.py` walks the registry.
"""

from __future__ import annotations

import functools
from contextvars import ContextVar
from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.admin.forms import AdminPasswordChangeForm as OwnPasswordForm
from django.contrib.admin.utils import unquote
from django.core import checks
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils.translation import gettext_lazy

from hal.actions import accounts
from hal.actions.base import Actor, record_refusal, require_perm, require_recent
from hal.errors import HalError

# The request of the admin view being served, for forms that Django builds without it.
_REQUEST: ContextVar[HttpRequest | None] = ContextVar("hal_admin_request", default=None)
REAUTH_HINT = gettext_lazy("Re-authenticate at /reauth/ and try again.")


def current_request() -> HttpRequest | None:
    """The HttpRequest of the admin view running in this context, if any."""
    return _REQUEST.get()


def admin_actor(request: HttpRequest) -> Actor:
    """The actor of an admin-site request (audited with via=admin)."""
    return Actor.from_request(request, via="admin")


def check_admin_gate(
    actor: Actor, action_code: str, *, target: Any = None, model: Any = None
) -> None:
    """Refuse (and audit) an admin-site change without administer and a recent re-auth."""
    try:
        require_perm(actor, "administer")
        require_recent(actor)
    except HalError as exc:
        label = {}
        if target is not None and getattr(target, "pk", None) is not None:
            label = {
                "target_type": target._meta.model_name,
                "target_id": target.pk,
                "target_label": str(target),
            }
        elif model is not None:
            label = {"target_type": model._meta.model_name}
        record_refusal(actor, action_code, exc, **label)
        raise


def error_text(exc: HalError) -> str:
    """A HalError as an admin form/message text (with how to fix a stale re-auth)."""
    if exc.code == "reauth_required":
        return f"{exc.localized_message} {REAUTH_HINT}"
    return f"{exc.localized_message} ({exc.code})"


class OwnPasswordChangeForm(OwnPasswordForm):
    """The admin site's own-password form: accounts.check_change_own_password (here, not in
    hal.admin, because the site's password_change view uses it)."""

    def clean(self) -> dict[str, Any]:
        # Django's stubs allow None; these forms always return their cleaned_data.
        cleaned = cast(dict[str, Any], super().clean())
        request = current_request()
        if self.errors or request is None:
            return cleaned
        try:
            self.user = accounts.check_change_own_password(
                actor=admin_actor(request),
                old_password=cleaned.get("old_password"),
                new_password=cleaned.get("new_password1"),
            )
        except HalError as exc:
            self.add_error("new_password1", error_text(exc))
        return cleaned

    def save(self, commit: bool = True) -> Any:
        return self.user


class ActionFormMixin:
    """Ends a ModelForm's validation by running its admin's action; refusals → form errors."""

    model_admin: ActionModelAdmin | None = None
    result: Any = None

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]
        request = current_request()
        if self.errors or request is None or self.model_admin is None:  # type: ignore[attr-defined]
            return
        owner = self.model_admin
        pk = self.instance.pk  # type: ignore[attr-defined]
        actor = admin_actor(request)
        try:
            check_admin_gate(
                actor,
                owner.action_codes["change" if pk is not None else "add"],
                target=self.instance if pk is not None else None,  # type: ignore[attr-defined]
                model=owner.model,
            )
            self.result = owner.run_save(actor, self, pk)
        except HalError as exc:
            field = owner.error_fields.get(exc.code)
            self.add_error(field if field in self.fields else None, error_text(exc))  # type: ignore[attr-defined]


class ActionModelAdmin(admin.ModelAdmin):
    """A model admin whose writes are HAL actions: gate, check_*, audit row via=admin."""

    # Audit codes of the gate's refusals: {"add": ..., "change": ..., "delete": ...}.
    action_codes: dict[str, str] = {}
    # Which form field a HalError code belongs to.
    error_fields: dict[str, str] = {}
    list_editable = ()
    actions: tuple[str, ...] = ("delete_through_actions",)

    def run_save(self, actor: Actor, form: Any, pk: Any) -> Any:
        """Create (pk None) or change the object from the form's cleaned data via check_*."""
        raise NotImplementedError

    def run_delete(self, actor: Actor, obj: Any) -> None:
        """Delete the object via check_*."""
        raise NotImplementedError

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kw: Any):
        base = super().get_form(request, obj, change=change, **kw)
        return type(f"Action{base.__name__}", (ActionFormMixin, base), {"model_admin": self})

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        # The form's action wrote the row (audited); only reflect the result here.
        result = getattr(form, "result", None)
        if result is None:
            raise RuntimeError("an admin save without its action")
        obj.pk = result.pk
        obj.refresh_from_db()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        return None  # many-to-many fields are part of the action

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        actor = admin_actor(request)
        check_admin_gate(actor, self.action_codes["delete"], target=obj)
        self.run_delete(actor, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        # Django deletes inside one transaction that a refusal would roll back together
        # with its audit row; run the confirmed POST here instead.
        if request.method == "POST" and request.POST.get("post"):
            obj = self.get_object(request, unquote(object_id))
            if obj is not None and self.has_delete_permission(request, obj):
                try:
                    self.delete_model(request, obj)
                except HalError as exc:
                    messages.error(request, error_text(exc))
                    return HttpResponseRedirect(request.get_full_path())
                messages.success(request, f"Deleted {obj}.")
                info = (self.opts.app_label, self.opts.model_name)
                return HttpResponseRedirect(reverse("admin:{}_{}_changelist".format(*info)))
        return super().delete_view(request, object_id, extra_context)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        found = super().get_actions(request)
        found.pop("delete_selected", None)  # deletes rows directly: no gate, no audit
        if not self.has_delete_permission(request):
            found.pop("delete_through_actions", None)
        return found

    @admin.action(description="Delete selected (re-auth, audited)")
    def delete_through_actions(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            label = str(obj)
            try:
                self.delete_model(request, obj)
            except HalError as exc:
                messages.error(request, f"{label}: {error_text(exc)}")
            else:
                messages.success(request, f"{label}: deleted")


class HalAdminSite(admin.AdminSite):
    """The admin site: remembers each view's request for the action forms."""

    site_header = "HAL administration"
    site_title = "HAL admin"

    def admin_view(self, view: Any, cacheable: bool = False) -> Any:
        inner = super().admin_view(view, cacheable)

        @functools.wraps(inner)
        def with_request(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            token = _REQUEST.set(request)
            try:
                return inner(request, *args, **kwargs)
            finally:
                _REQUEST.reset(token)

        return with_request

    def login(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        """HAL's login page (throttled, audited) instead of Django's admin login form."""
        from django.conf import settings
        from django.contrib.auth.views import redirect_to_login

        target = request.GET.get("next") or reverse("admin:index", current_app=self.name)
        return redirect_to_login(target, settings.LOGIN_URL)

    # Django's own views return a TemplateResponse; HAL's redirect (or run a form view).
    def logout(  # type: ignore[override]
        self, request: HttpRequest, extra_context: Any = None
    ) -> HttpResponse:
        """HAL's logout (audited)."""
        from django.conf import settings
        from django.views.decorators.http import require_POST

        from hal.actions.auth import do_logout

        @require_POST
        def view(request: HttpRequest) -> HttpResponse:
            do_logout(request)
            return HttpResponseRedirect(settings.LOGOUT_REDIRECT_URL)

        return view(request)

    def password_change(  # type: ignore[override]
        self, request: HttpRequest, extra_context: Any = None
    ) -> HttpResponseBase:
        """The admin's own-password form, through accounts.check_change_own_password."""
        from django.contrib.auth.views import PasswordChangeView

        defaults = {
            "form_class": OwnPasswordChangeForm,
            "success_url": reverse("admin:password_change_done", current_app=self.name),
            "extra_context": {**self.each_context(request), **(extra_context or {})},
        }
        if self.password_change_template is not None:
            defaults["template_name"] = self.password_change_template
        request.current_app = self.name
        return PasswordChangeView.as_view(**defaults)(request)


class _Everyone:
    """A stand-in superuser for asking a model admin what it would allow."""

    is_active = is_staff = is_superuser = is_authenticated = True

    def has_perm(self, perm: str, obj: Any = None) -> bool:
        return True

    def has_module_perms(self, app_label: str) -> bool:
        return True


@checks.register(checks.Tags.admin)
def check_admin_registry(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every registered model admin is an ActionModelAdmin or refuses every write."""
    from django.contrib.admin import site

    request = type("Request", (), {"user": _Everyone(), "method": "GET", "GET": {}, "POST": {}})()
    errors: list[checks.CheckMessage] = []
    for model, model_admin in site._registry.items():
        if isinstance(model_admin, ActionModelAdmin):
            continue
        writes = [
            name
            for name in ("add", "change", "delete")
            if getattr(model_admin, f"has_{name}_permission")(request)
        ]
        if writes:
            errors.append(
                checks.Error(
                    f"{type(model_admin).__name__} lets the admin {'/'.join(writes)} "
                    f"{model._meta.label} without a HAL action, re-auth or audit.",
                    hint="Subclass hal.views.adminsite.ActionModelAdmin or make it read-only.",
                    obj=model_admin,
                    id="hal.E101",
                )
            )
    return errors
