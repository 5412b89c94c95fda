"""Notification actions: add/verify/remove a channel, its digest, the operator's preferences.

Each check_* validates and refuses with a stable code; each do_* changes rows in one
transaction with an audit row. An operator acts on their own channels only: another's
channel is "not found" (its existence is not revealed).
"""

from __future__ import annotations

import datetime as dt
import hmac
import json
import math
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone, translation
from django.utils.crypto import salted_hmac
from django.utils.text import format_lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.actions.oneline import check_one_line
from hal.errors import Conflict, InvalidInput, NotFound, RateLimited
from hal.web.ids import as_id
from notifications import render, senders
from notifications.models import EVENT_KINDS, Channel, Preferences
from notifications.schedule import zone
from notifications.worker import SECRET_PURPOSE

MAX_CHANNELS = 10
MAX_NAME = 60
MAX_DIGEST_MINUTES = 24 * 60
CODE_TTL = dt.timedelta(minutes=30)
# Wrong codes a channel takes in all (a new code does not give new guesses); then it must
# be removed and added again, and codes are bounded per operator and hour: at most
# CODES_PER_HOUR × MAX_CODE_FAILURES guesses an hour against a million codes.
MAX_CODE_FAILURES = 5
CODE_RESEND_SECONDS = 60  # between two codes for one channel
CODES_PER_HOUR = 10  # codes sent per operator (channel adds and resends), rolling hour
CODE_ACTIONS = ("notifications.channel_add", "notifications.code_send")
SECRET_OWNER = "notify_channel"


@dataclass
class Added:
    """A new channel; `signing_secret` is shown once (webhooks), then only the vault has it."""

    channel: Channel
    code_sent: bool
    detail: str
    signing_secret: str = ""


def operator_of(actor: Actor) -> Any:
    require_perm(actor, "view")
    if actor.user is None or not getattr(actor.user, "pk", None):
        raise InvalidInput(_("Notifications belong to an operator."), code="no_operator")
    return actor.user


def _text(value: Any, code: str, limit: int, field: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > limit:
        raise InvalidInput(
            format_lazy(
                _("{code}: expected text of at most {limit} characters."), code=code, limit=limit
            ),
            code=code,
        )
    return check_one_line(value.strip(), field)


def _digest(value: Any) -> int:
    if value in (None, ""):
        return 0
    try:
        minutes = int(value)
    except (TypeError, ValueError):
        minutes = -1
    if isinstance(value, bool) or not 0 <= minutes <= MAX_DIGEST_MINUTES:
        raise InvalidInput(
            format_lazy(_("digest_minutes must be 0 to {n}."), n=MAX_DIGEST_MINUTES),
            code="invalid_digest",
        )
    return minutes


def load_channel(actor: Actor, channel_id: Any, *, lock: bool = False) -> Channel:
    """The actor's own channel with this id (404 channel_not_found for anyone else's)."""
    user = operator_of(actor)
    pk = as_id(channel_id)
    qs = Channel.objects.select_for_update() if lock else Channel.objects
    found = qs.filter(pk=pk, owner_id=user.pk).first() if pk else None
    if found is None:
        raise NotFound(_("No such notification channel."), code="channel_not_found")
    return found


def _code_hash(channel: Channel, code: str) -> str:
    return salted_hmac("hal.notifications.verify", f"{channel.pk}:{code}").hexdigest()


# --- add ---------------------------------------------------------------------------------


@action("notifications.channel_add")
def check_add_channel(
    *,
    actor: Actor,
    kind: Any,
    name: Any,
    address: Any,
    body_format: Any = Channel.JSON,
    digest_minutes: Any = 0,
) -> Added:
    """Add an e-mail or webhook channel for yourself; a verification code is sent to it."""
    user = operator_of(actor)
    if kind not in (Channel.EMAIL, Channel.WEBHOOK):
        raise InvalidInput(_("kind must be email or webhook."), code="invalid_kind")
    name = _text(name, "invalid_name", MAX_NAME, "name")
    address = _text(address, "invalid_address", 500, "address")
    if kind == Channel.EMAIL:
        try:
            validate_email(address)
        except ValidationError:
            raise InvalidInput(_("Not an e-mail address."), code="invalid_address") from None
        body_format = Channel.JSON
    else:
        why = senders.check_webhook_url(address)
        if why:
            raise InvalidInput(
                format_lazy(_("Not a usable webhook URL: {why}."), why=why),
                code="invalid_address",
            )
        if body_format in (None, ""):
            body_format = Channel.JSON
        if body_format not in (Channel.JSON, Channel.SLACK):
            raise InvalidInput(_("format must be json or slack."), code="invalid_format")
    digest = _digest(digest_minutes)
    if Channel.objects.filter(owner_id=user.pk).count() >= MAX_CHANNELS:
        raise Conflict(
            format_lazy(_("At most {n} channels per operator."), n=MAX_CHANNELS),
            code="too_many_channels",
        )
    return do_add_channel(actor, kind, name, address, str(body_format), digest)


def do_add_channel(
    actor: Actor, kind: str, name: str, address: str, body_format: str, digest: int
) -> Added:
    from vault.api import put_secret

    secret = secrets.token_urlsafe(32) if kind == Channel.WEBHOOK else ""
    with transaction.atomic():
        _lock_operator(actor.user)
        _require_code_budget(actor.user)
        channel = Channel.objects.create(
            owner=actor.user,
            kind=kind,
            name=name,
            address=address,
            body_format=body_format,
            digest_minutes=digest,
        )
        if secret:
            row = put_secret(
                purpose=SECRET_PURPOSE,
                owner_type=SECRET_OWNER,
                owner_id=channel.pk,
                plaintext=secret,
                actor=actor,
            )
            channel.secret_id = row.pk
            channel.save(update_fields=["secret_id"])
        code = _new_code(channel)
        record_audit(
            actor,
            "notifications.channel_add",
            target=channel,
            after={"kind": kind, "name": name, "address": address, "digest": digest},
        )
    sent = send_code(channel, code)
    return Added(channel, sent.ok, sent.detail, secret)


def _new_code(channel: Channel) -> str:
    """A fresh code for a locked channel row; its failure count is kept (not a reset)."""
    code = f"{secrets.randbelow(1_000_000):06d}"
    channel.verify_code_sha256 = _code_hash(channel, code)
    channel.verify_sent_at = timezone.now()
    channel.save(update_fields=["verify_code_sha256", "verify_sent_at"])
    return code


def _rate_limited(seconds: float) -> RateLimited:
    wait = max(1, math.ceil(seconds))
    return RateLimited(
        format_lazy(_("Too many verification codes; try again in {n} s."), n=wait),
        code="rate_limited",
        details={"retry_after": wait},
    )


def _lock_operator(user: Any) -> None:
    """Serialise an operator's code sends (PostgreSQL: their row; SQLite: the IMMEDIATE
    transaction already holds the write lock). Taken first, before any channel row."""
    from django.contrib.auth import get_user_model

    get_user_model().objects.select_for_update().filter(pk=user.pk).first()


def _require_code_budget(user: Any) -> None:
    """At most CODES_PER_HOUR codes per operator and rolling hour, counted from the audit
    log inside the transaction that writes the next one (under _lock_operator)."""
    from hal.models import AuditEntry

    since = timezone.now() - dt.timedelta(hours=1)
    recent = AuditEntry.objects.filter(
        actor_id=user.pk, action__in=CODE_ACTIONS, result="ok", created_at__gt=since
    )
    if recent.count() >= CODES_PER_HOUR:
        oldest = recent.order_by("created_at").values_list("created_at", flat=True).first()
        assert oldest is not None
        raise _rate_limited((oldest - since).total_seconds())


def _require_no_lockout(channel: Channel) -> None:
    if channel.verify_failures >= MAX_CODE_FAILURES:
        raise Conflict(
            _("Too many wrong codes: remove this channel and add it again."),
            code="verification_locked",
        )


def verify_timeout() -> float:
    """HAL_NOTIFY_VERIFY_TIMEOUT_SECONDS (3): how long the operator's request waits for a
    verification code's receiver (the whole webhook exchange; each SMTP step)."""
    return float(getattr(settings, "HAL_NOTIFY_VERIFY_TIMEOUT_SECONDS", 3))


def send_code(channel: Channel, code: str) -> senders.SendResult:
    """Send the code straight away, within verify_timeout() (not through the outbox:
    nothing else goes to an unverified channel, and the operator waits for it). Whatever
    fails is the answer's `detail`; the channel stays, and a new code can be asked for."""
    try:
        return _send_code(channel, code)
    except Exception as exc:  # the vault, rendering: say so rather than a 500 after the add
        return senders.crashed(exc)


def _send_code(channel: Channel, code: str) -> senders.SendResult:
    key = str(uuid.uuid4())
    lang = render.language_of(channel.owner_id)
    body = render.verification_text(code, lang)
    if channel.kind == Channel.EMAIL:
        with translation.override(lang):
            title = "[HAL] " + gettext("Verification code")
        return senders.send_email(channel.address, title, body, key, timeout=verify_timeout())
    from vault.api import get_plaintext

    if channel.secret_id is None:
        return senders.SendResult(False, "the channel has no signing secret", retry=False)
    secret = get_plaintext(channel.secret_id, purpose=SECRET_PURPOSE, actor_label="notifications")
    if channel.body_format == Channel.SLACK:
        payload: dict[str, Any] = {"text": body.strip()}
    else:
        payload = {
            "version": render.BODY_VERSION,
            "message": key,
            "channel": channel.pk,
            "verification": True,
            "language": lang,
            "text": body.strip(),
            "events": [],
        }
    data = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    return senders.send_webhook(
        channel.address, data, secret.reveal(), key, deadline=verify_timeout()
    )


# --- verify ------------------------------------------------------------------------------


@action("notifications.code_send")
def check_send_code(*, actor: Actor, channel_id: Any) -> senders.SendResult:
    """Send a fresh verification code to one of your channels (the old one stops working)."""
    user = operator_of(actor)
    load_channel(actor, channel_id)
    with transaction.atomic():
        _lock_operator(user)  # the operator, then the channel: one order for every path
        channel = load_channel(actor, channel_id, lock=True)
        if channel.verified:
            raise Conflict(_("This channel is verified already."), code="channel_verified")
        _require_no_lockout(channel)
        if channel.verify_sent_at is not None:
            since = (timezone.now() - channel.verify_sent_at).total_seconds()
            if since < CODE_RESEND_SECONDS:
                raise _rate_limited(CODE_RESEND_SECONDS - since)
        _require_code_budget(user)
        code = _new_code(channel)
        record_audit(actor, "notifications.code_send", target=channel)
    return send_code(channel, code)


@action("notifications.channel_verify")
def check_verify_channel(*, actor: Actor, channel_id: Any, code: Any) -> Channel:
    """Prove the channel reaches you: enter the code it received."""
    load_channel(actor, channel_id)
    if not isinstance(code, str) or not code.strip().isdigit():
        raise InvalidInput(_("Enter the six-digit code."), code="invalid_code")
    # Read, compare and count under the row's lock (SQLite: the write lock an IMMEDIATE
    # transaction takes): parallel guesses are compared one after another, never more than
    # MAX_CODE_FAILURES in all.
    with transaction.atomic():
        channel = load_channel(actor, channel_id, lock=True)
        if channel.verified:
            raise Conflict(_("This channel is verified already."), code="channel_verified")
        _require_no_lockout(channel)
        if (
            not channel.verify_code_sha256
            or channel.verify_sent_at is None
            or timezone.now() - channel.verify_sent_at > CODE_TTL
        ):
            raise Conflict(_("The code expired; send a new one."), code="code_expired")
        right = hmac.compare_digest(_code_hash(channel, code.strip()), channel.verify_code_sha256)
        if right:
            return do_verify_channel(actor, channel)
        channel.verify_failures += 1
        channel.save(update_fields=["verify_failures"])
    # Outside the transaction: the refusal must not roll the count back.
    raise InvalidInput(_("That code is not right."), code="wrong_code")


def do_verify_channel(actor: Actor, channel: Channel) -> Channel:
    with transaction.atomic():
        channel = Channel.objects.select_for_update().get(pk=channel.pk)
        channel.verified_at = timezone.now()
        channel.verify_code_sha256 = ""
        channel.save(update_fields=["verified_at", "verify_code_sha256"])
        record_audit(
            actor, "notifications.channel_verify", target=channel, after={"verified": True}
        )
    return channel


# --- update / remove ---------------------------------------------------------------------


@action("notifications.channel_update")
def check_update_channel(*, actor: Actor, channel_id: Any, digest_minutes: Any) -> Channel:
    """Change a channel's digest window (0: a message per event)."""
    load_channel(actor, channel_id)
    digest = _digest(digest_minutes)
    with transaction.atomic():
        channel = load_channel(actor, channel_id, lock=True)
        before = {"digest": channel.digest_minutes}
        channel.digest_minutes = digest
        channel.save(update_fields=["digest_minutes"])
        record_audit(
            actor,
            "notifications.channel_update",
            target=channel,
            before=before,
            after={"digest": digest},
        )
    return channel


@action("notifications.channel_remove")
def check_remove_channel(*, actor: Actor, channel_id: Any) -> int:
    """Remove one of your channels, its signing secret and its outbox rows."""
    channel = load_channel(actor, channel_id)
    return do_remove_channel(actor, channel)


def do_remove_channel(actor: Actor, channel: Channel) -> int:
    from vault.api import delete_secrets_for

    pk = channel.pk
    with transaction.atomic():
        record_audit(
            actor,
            "notifications.channel_remove",
            target=channel,
            before={"kind": channel.kind, "name": channel.name, "address": channel.address},
        )
        delete_secrets_for(owner_type=SECRET_OWNER, owner_id=pk, actor=actor)
        channel.delete()
    return pk


# --- preferences -------------------------------------------------------------------------


def preferences_of(user: Any) -> Preferences:
    """The operator's preferences (defaults when never saved; not stored by reading)."""
    return Preferences.objects.filter(user_id=user.pk).first() or Preferences(user=user)


def _time(value: Any, code: str) -> dt.time | None:
    if value in (None, ""):
        return None
    if isinstance(value, str):
        try:
            return dt.time.fromisoformat(value.strip()).replace(second=0, microsecond=0)
        except ValueError:
            pass
    raise InvalidInput(_("Quiet hours are times like 22:00."), code=code)


@action("notifications.preferences")
def check_set_preferences(
    *,
    actor: Actor,
    disabled_kinds: Any = None,
    time_zone: Any = "UTC",
    quiet_start: Any = None,
    quiet_end: Any = None,
) -> Preferences:
    """Which kinds of event you do not want, your time zone and your quiet hours."""
    user = operator_of(actor)
    kinds = [] if disabled_kinds in (None, "") else disabled_kinds
    if not isinstance(kinds, list | tuple) or any(k not in EVENT_KINDS for k in kinds):
        raise InvalidInput(
            format_lazy(_("Event kinds are: {kinds}."), kinds=", ".join(EVENT_KINDS)),
            code="invalid_kinds",
        )
    tz = (time_zone or "UTC").strip() if isinstance(time_zone, str) else ""
    if not tz or len(tz) > 64 or zone(tz).key != tz:
        raise InvalidInput(_("Unknown time zone."), code="invalid_time_zone")
    start, end = _time(quiet_start, "invalid_quiet_hours"), _time(quiet_end, "invalid_quiet_hours")
    if (start is None) != (end is None) or (start is not None and start == end):
        raise InvalidInput(
            _("Quiet hours need a different start and end, or neither."),
            code="invalid_quiet_hours",
        )
    return do_set_preferences(actor, user, sorted(set(kinds)), tz, start, end)


def do_set_preferences(
    actor: Actor, user: Any, kinds: list[str], tz: str, start: Any, end: Any
) -> Preferences:
    with transaction.atomic():
        prefs, _created = Preferences.objects.select_for_update().get_or_create(user=user)
        before = prefs.as_dict()
        prefs.disabled_kinds, prefs.time_zone = kinds, tz
        prefs.quiet_start, prefs.quiet_end = start, end
        prefs.save()
        record_audit(
            actor,
            "notifications.preferences",
            target=prefs,
            target_label=user.username,
            before=before,
            after=prefs.as_dict(),
        )
    return prefs
