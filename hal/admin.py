"""Accounts and groups in the admin site, through hal.actions.accounts (re-auth, audited)."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.forms import AdminPasswordChangeForm
from django.contrib.auth.models import Group, User

from hal.actions import accounts
from hal.actions.base import Actor
from hal.errors import HalError
from hal.views.adminsite import (
    ActionModelAdmin,
    admin_actor,
    check_admin_gate,
    current_request,
    error_text,
)

USER_FORM_FIELDS = (
    "username",
    "email",
    "first_name",
    "last_name",
    "is_active",
    "is_staff",
    "is_superuser",
    "groups",
    "user_permissions",
)


class UserPasswordForm(AdminPasswordChangeForm):
    """The admin's "change password" form of an account: accounts.check_set_user_password."""

    def clean(self) -> dict[str, Any]:
        # Django's stubs allow None; these forms always return their cleaned_data.
        cleaned = cast(dict[str, Any], super().clean())
        request = current_request()
        if self.errors or request is None:
            return cleaned
        usable = cleaned.get("set_usable_password")
        if not usable and "unset-password" not in request.POST:
            return cleaned  # the view refuses this conflicting submission itself
        actor = admin_actor(request)
        try:
            check_admin_gate(actor, "accounts.user_set_password", target=self.user)
            self.user = accounts.check_set_user_password(
                actor=actor,
                user=self.user.pk,
                password=cleaned.get("password1") if usable else None,
            )
        except HalError as exc:
            # The admin's template shows field errors only.
            self.add_error("password1", error_text(exc))
        return cleaned

    def save(self, commit: bool = True) -> Any:
        return self.user  # the action stored it


admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class HalUserAdmin(ActionModelAdmin, UserAdmin):
    """Accounts: add, change, password and delete through hal.actions.accounts."""

    change_password_form = UserPasswordForm
    readonly_fields = ("last_login", "date_joined")
    action_codes = {
        "add": "accounts.user_create",
        "change": "accounts.user_update",
        "delete": "accounts.user_delete",
    }
    error_fields = {
        "invalid_username": "username",
        "duplicate_username": "username",
        "invalid_email": "email",
        "invalid_password": "password2",
        "invalid_group": "groups",
        "invalid_permission": "user_permissions",
    }

    def run_save(self, actor: Actor, form: Any, pk: Any) -> Any:
        data = form.cleaned_data
        if pk is None:
            password = data.get("password1") if data.get("set_usable_password", True) else None
            return accounts.check_create_user(
                actor=actor, data={"username": data["username"]}, password=password
            )
        changes = {k: data[k] for k in USER_FORM_FIELDS if k in form.changed_data and k in data}
        if not changes:
            return form.instance.__class__.objects.get(pk=pk)
        for key in ("groups", "user_permissions"):
            if key in changes:
                changes[key] = [row.pk for row in changes[key]]
        return accounts.check_update_user(actor=actor, user=pk, data=changes)

    def run_delete(self, actor: Actor, obj: Any) -> None:
        accounts.check_delete_user(actor=actor, user=obj.pk)


@admin.register(Group)
class HalGroupAdmin(ActionModelAdmin, GroupAdmin):
    """Groups: name and permissions through hal.actions.accounts."""

    action_codes = {
        "add": "accounts.group_save",
        "change": "accounts.group_save",
        "delete": "accounts.group_delete",
    }
    error_fields = {
        "invalid_name": "name",
        "duplicate_name": "name",
        "invalid_permission": "permissions",
    }

    def run_save(self, actor: Actor, form: Any, pk: Any) -> Any:
        data = form.cleaned_data
        body = {"name": data["name"], "permissions": [p.pk for p in data.get("permissions", [])]}
        return accounts.check_save_group(actor=actor, group=pk, data=body)

    def run_delete(self, actor: Actor, obj: Any) -> None:
        accounts.check_delete_group(actor=actor, group=obj.pk)
