"""Operator accounts and groups: create, change, set password, delete (administer, re-auth).

These widen or narrow who may do what, so every one needs `hal.administer` and a recent
re-authentication, and is audited with before/after (never a password). The Django admin
(hal/views/adminsite.py) reaches them only through these `check_*` functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from hal.actions.base import Actor, action, record_audit, require_perm, require_recent
from hal.actions.oneline import check_one_line
from hal.errors import Conflict, HalError, InvalidInput, NotFound, PermissionDenied
from hal.web.ids import as_id

USER_FIELDS = {
    "username",
    "email",
    "first_name",
    "last_name",
    "is_active",
    "is_staff",
    "is_superuser",
    "groups",
    "user_permissions",
}
NAME_MAX = 150


def _gate(actor: Actor) -> None:
    require_perm(actor, "administer")
    require_recent(actor)


def _is_superuser(actor: Actor) -> bool:
    return actor.system or bool(getattr(actor.user, "is_superuser", False))


def _perm_label(perm: Permission) -> str:
    return f"{perm.content_type.app_label}.{perm.codename}"


def user_snapshot(user: Any) -> dict[str, Any]:
    """What the audit log records of an account (no password, no hash)."""
    return {
        "username": user.username,
        "email": user.email,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "is_active": user.is_active,
        "is_staff": user.is_staff,
        "is_superuser": user.is_superuser,
        "groups": sorted(user.groups.values_list("name", flat=True)),
        "user_permissions": sorted(
            _perm_label(p) for p in user.user_permissions.select_related("content_type")
        ),
        "has_usable_password": user.has_usable_password(),
    }


def group_snapshot(group: Group) -> dict[str, Any]:
    """What the audit log records of a group."""
    return {
        "name": group.name,
        "permissions": sorted(
            _perm_label(p) for p in group.permissions.select_related("content_type")
        ),
    }


def _load_user(ref: Any) -> Any:
    User = get_user_model()
    user = ref if isinstance(ref, User) else None
    if user is None:
        try:
            user = User.objects.get(pk=int(ref))
        except (TypeError, ValueError, User.DoesNotExist):
            raise NotFound(_("No such account."), code="user_not_found") from None
    return user


def _load_group(ref: Any) -> Group:
    if isinstance(ref, Group):
        return ref
    try:
        return Group.objects.get(pk=int(ref))
    except (TypeError, ValueError, Group.DoesNotExist):
        raise NotFound(_("No such group."), code="group_not_found") from None


def _ids(values: Any, model: Any, code: str) -> list[Any]:
    if values is None:
        return []
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidInput(_("Send a list of ids."), code=code)
    ids = []
    for value in values:
        # hal/web/ids.py: an id past the database's range reached the `IN` query (OverflowError).
        pk = as_id(getattr(value, "pk", value))
        if pk is None:
            raise InvalidInput(_("Send a list of ids."), code=code)
        ids.append(pk)
    rows = list(model.objects.filter(pk__in=ids))
    if len(rows) != len(set(ids)):
        raise InvalidInput(_("Unknown id in the list."), code=code)
    return rows


def _check_grant(actor: Actor, perms: Iterable[Permission], groups: Iterable[Group] = ()) -> None:
    """Nobody hands out a permission they do not hold themselves."""
    if _is_superuser(actor):
        return
    wanted = {_perm_label(p) for p in perms}
    for group in groups:
        wanted |= {_perm_label(p) for p in group.permissions.select_related("content_type")}
    missing = sorted(p for p in wanted if not actor.user.has_perm(p))
    if missing:
        raise PermissionDenied(
            format_lazy(_("You cannot grant permissions you do not hold: {perms}."), perms=missing),
            code="privilege_escalation",
        )


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str) or len(value) > NAME_MAX:
        raise InvalidInput(
            format_lazy(_("{name} must be text of at most 150 characters."), name=key),
            code="invalid_input",
        )
    return check_one_line(value.strip(), key)  # names, e-mail: all one-line


def _flag(data: dict[str, Any], key: str) -> bool:
    value = data[key]
    if not isinstance(value, bool):
        raise InvalidInput(
            format_lazy(_("{name} must be true or false."), name=key), code="invalid_input"
        )
    return value


def _clean_user(actor: Actor, data: Any, user: Any = None) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInput(_("Send a JSON object."), code="invalid_json")
    unknown = set(data) - USER_FIELDS
    if unknown:
        raise InvalidInput(
            format_lazy(_("Unknown field(s): {unknown}."), unknown=sorted(unknown)),
            code="unknown_field",
        )
    User = get_user_model()
    out: dict[str, Any] = {}
    if "username" in data or user is None:
        username = _text(data, "username")
        try:
            User.username_validator(username)
        except ValidationError:
            username = ""
        if not username:
            raise InvalidInput(
                _("Enter a username of letters, digits and @/./+/-/_ only."),
                code="invalid_username",
            )
        taken = User.objects.filter(username=username)
        if user is not None:
            taken = taken.exclude(pk=user.pk)
        if taken.exists():
            raise InvalidInput(
                format_lazy(_("The username {name} is taken."), name=username),
                code="duplicate_username",
            )
        out["username"] = username
    for key in ("first_name", "last_name"):
        if key in data:
            out[key] = _text(data, key)
    if "email" in data:
        email = _text(data, "email")
        if email:
            try:
                validate_email(email)
            except ValidationError:
                raise InvalidInput(
                    _("Enter a valid e-mail address."), code="invalid_email"
                ) from None
        out["email"] = email
    for key in ("is_active", "is_staff", "is_superuser"):
        if key in data:
            out[key] = _flag(data, key)
    if "groups" in data:
        out["groups"] = _ids(data["groups"], Group, "invalid_group")
    if "user_permissions" in data:
        out["user_permissions"] = _ids(data["user_permissions"], Permission, "invalid_permission")
    # Superuser status and other superusers are a superuser's business.
    touches_superuser = out.get("is_superuser") or (user is not None and user.is_superuser)
    if touches_superuser and not _is_superuser(actor):
        raise PermissionDenied(
            _("Only a superuser can grant superuser status or change a superuser."),
            code="privilege_escalation",
        )
    _check_grant(actor, out.get("user_permissions", ()), out.get("groups", ()))
    return out


@sensitive_variables("password")
def _clean_password(password: Any, user: Any) -> str | None:
    """None = password login disabled; else a password that passes the validators."""
    if password is None:
        return None
    if not isinstance(password, str) or not password:
        raise InvalidInput(_("Enter a password."), code="invalid_password")
    try:
        password_validation.validate_password(password, user)
    except ValidationError as exc:
        raise InvalidInput(
            format_lazy(_("Choose another password: {reasons}"), reasons=" ".join(exc.messages)),
            code="invalid_password",
        ) from None
    return password


def _apply(user: Any, fields: dict[str, Any]) -> None:
    for key, value in fields.items():
        if key not in ("groups", "user_permissions"):
            setattr(user, key, value)
    user.save()
    if "groups" in fields:
        user.groups.set(fields["groups"])
    if "user_permissions" in fields:
        user.user_permissions.set(fields["user_permissions"])


@action("accounts.user_create")
@sensitive_variables("password")
def check_create_user(*, actor: Actor, data: Any, password: Any) -> Any:
    """Create an account; `password=None` creates one that cannot log in with a password."""
    _gate(actor)
    fields = _clean_user(actor, data)
    User = get_user_model()
    clean = _clean_password(password, User(username=fields["username"]))
    return do_create_user(actor, fields, clean)


@sensitive_variables("password")
def do_create_user(actor: Actor, fields: dict[str, Any], password: str | None) -> Any:
    """Insert the account, its groups and permissions; audited."""
    User = get_user_model()
    try:
        with transaction.atomic():
            user = User(username=fields["username"])
            if password is None:
                user.set_unusable_password()
            else:
                user.set_password(password)
            _apply(user, fields)
            record_audit(actor, "accounts.user_create", target=user, after=user_snapshot(user))
    except IntegrityError:
        raise InvalidInput(_("That username is taken."), code="duplicate_username") from None
    return user


@action("accounts.user_update")
def check_update_user(*, actor: Actor, user: Any, data: Any) -> Any:
    """Change an account's names, e-mail, flags, groups and permissions."""
    _gate(actor)
    user = _load_user(user)
    fields = _clean_user(actor, data, user)
    if actor.user is not None and user.pk == actor.user.pk and fields.get("is_active") is False:
        raise Conflict(_("You cannot disable your own account."), code="cannot_disable_self")
    return do_update_user(actor, user, fields)


def do_update_user(actor: Actor, user: Any, fields: dict[str, Any]) -> Any:
    """Apply validated changes; audited with before/after."""
    User = get_user_model()
    try:
        with transaction.atomic():
            user = User.objects.select_for_update().get(pk=user.pk)
            before = user_snapshot(user)
            _apply(user, fields)
            record_audit(
                actor, "accounts.user_update", target=user, before=before, after=user_snapshot(user)
            )
    except IntegrityError:
        raise InvalidInput(_("That username is taken."), code="duplicate_username") from None
    return user


@action("accounts.user_set_password")
@sensitive_variables("password")
def check_set_user_password(*, actor: Actor, user: Any, password: Any) -> Any:
    """Set an account's password (`None` disables password login); its sessions end."""
    _gate(actor)
    user = _load_user(user)
    if user.is_superuser and not _is_superuser(actor):
        raise PermissionDenied(
            _("Only a superuser can grant superuser status or change a superuser."),
            code="privilege_escalation",
        )
    return do_set_user_password(actor, user, _clean_password(password, user))


@sensitive_variables("password")
def do_set_user_password(
    actor: Actor, user: Any, password: str | None, audit_as: str = "accounts.user_set_password"
) -> Any:
    """Store the new hash; the audit row says that it changed, never what it is."""
    User = get_user_model()
    with transaction.atomic():
        user = User.objects.select_for_update().get(pk=user.pk)
        before = user.has_usable_password()
        if password is None:
            user.set_unusable_password()
        else:
            user.set_password(password)
        user.save(update_fields=["password"])
        record_audit(
            actor,
            audit_as,
            target=user,
            before={"has_usable_password": before},
            after={"has_usable_password": password is not None, "password_changed": True},
        )
    return user


@action("accounts.own_password")
@sensitive_variables("old_password", "new_password")
def check_change_own_password(*, actor: Actor, old_password: Any, new_password: Any) -> Any:
    """Change one's own password: the old one, and a recent re-auth like any password."""
    require_perm(actor, "view")
    require_recent(actor)
    user = _load_user(actor.user.pk)
    if not isinstance(old_password, str) or not user.check_password(old_password):
        raise HalError(_("Wrong password."), code="invalid_credentials", http_status=403)
    if new_password is None:
        raise InvalidInput(_("Enter a password."), code="invalid_password")
    clean = _clean_password(new_password, user)
    return do_set_user_password(actor, user, clean, audit_as="accounts.own_password")


@action("accounts.user_delete")
def check_delete_user(*, actor: Actor, user: Any) -> None:
    """Delete an account (not your own; a superuser only by a superuser)."""
    _gate(actor)
    user = _load_user(user)
    if actor.user is not None and user.pk == actor.user.pk:
        raise Conflict(_("You cannot delete your own account."), code="cannot_delete_self")
    if user.is_superuser and not _is_superuser(actor):
        raise PermissionDenied(
            _("Only a superuser can grant superuser status or change a superuser."),
            code="privilege_escalation",
        )
    do_delete_user(actor, user)


def do_delete_user(actor: Actor, user: Any) -> None:
    """Remove the row; the audit keeps what it was."""
    with transaction.atomic():
        before = user_snapshot(user)
        record_audit(actor, "accounts.user_delete", target=user, before=before)
        user.delete()


def _clean_group(actor: Actor, data: Any, group: Group | None = None) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInput(_("Send a JSON object."), code="invalid_json")
    unknown = set(data) - {"name", "permissions"}
    if unknown:
        raise InvalidInput(
            format_lazy(_("Unknown field(s): {unknown}."), unknown=sorted(unknown)),
            code="unknown_field",
        )
    out: dict[str, Any] = {}
    if "name" in data or group is None:
        name = _text(data, "name")
        if not name:
            raise InvalidInput(_("Enter a group name."), code="invalid_name")
        taken = Group.objects.filter(name=name)
        if group is not None:
            taken = taken.exclude(pk=group.pk)
        if taken.exists():
            raise InvalidInput(
                format_lazy(_("A group named {name} already exists."), name=name),
                code="duplicate_name",
            )
        out["name"] = name
    if "permissions" in data:
        out["permissions"] = _ids(data["permissions"], Permission, "invalid_permission")
        _check_grant(actor, out["permissions"])
    return out


@action("accounts.group_save")
def check_save_group(*, actor: Actor, group: Any = None, data: Any) -> Group:
    """Create (group=None) or change a group's name and permissions."""
    _gate(actor)
    row = None if group is None else _load_group(group)
    fields = _clean_group(actor, data, row)
    return do_save_group(actor, row, fields)


def do_save_group(actor: Actor, group: Group | None, fields: dict[str, Any]) -> Group:
    """Insert or update the group; audited with before/after."""
    try:
        with transaction.atomic():
            if group is None:
                before = None
                group = Group(name=fields["name"])
            else:
                group = Group.objects.select_for_update().get(pk=group.pk)
                before = group_snapshot(group)
                group.name = fields.get("name", group.name)
            group.save()
            if "permissions" in fields:
                group.permissions.set(fields["permissions"])
            record_audit(
                actor,
                "accounts.group_save",
                target=group,
                before=before,
                after=group_snapshot(group),
            )
    except IntegrityError:
        raise InvalidInput(_("That group name is taken."), code="duplicate_name") from None
    return group


@action("accounts.group_delete")
def check_delete_group(*, actor: Actor, group: Any) -> None:
    """Delete a group (its members lose what it granted)."""
    _gate(actor)
    do_delete_group(actor, _load_group(group))


def do_delete_group(actor: Actor, group: Group) -> None:
    """Remove the group; the audit keeps what it was."""
    with transaction.atomic():
        record_audit(actor, "accounts.group_delete", target=group, before=group_snapshot(group))
        group.delete()
