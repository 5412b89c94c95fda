"""Mail service: what HAL can honestly observe — whether the configured SMTP relay
(settings HAL_SMTP_HOST / HAL_SMTP_PORT) accepts a TCP connection, greets with a 220
banner and answers EHLO. HAL sends no mail to check this."""

from __future__ import annotations

import smtplib
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from hal.actions.base import Actor, action, record_audit, require_perm
from hal.errors import Conflict
from hal.live.events import OPS_GROUP, publish
from hal.models import MailCheck

EHLO_NAME = "hal.localdomain"


def smtp_target() -> tuple[str, int]:
    """The configured relay, read lazily (HAL_SMTP_HOST default '', HAL_SMTP_PORT 25)."""
    host = str(getattr(settings, "HAL_SMTP_HOST", "") or "").strip()
    try:
        port = int(getattr(settings, "HAL_SMTP_PORT", 25) or 25)
    except (TypeError, ValueError):
        port = 25
    return host, port


@dataclass
class ProbeResult:
    """The outcome of one SMTP reachability probe."""

    ok: bool
    banner: str = ""
    ehlo: str = ""
    latency_ms: int | None = None
    error: str = ""


def _decode(value: bytes | str) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _probe(host: str, port: int, timeout: float) -> ProbeResult:
    started = time.monotonic()
    smtp = smtplib.SMTP(timeout=timeout, local_hostname=EHLO_NAME)
    try:
        code, banner = smtp.connect(host, port)
        latency = int((time.monotonic() - started) * 1000)
        banner_text = f"{code} {_decode(banner)}"[:500]
        if code != 220:
            return ProbeResult(
                False, banner_text, latency_ms=latency, error=f"unexpected greeting {code}"
            )
        ehlo_code, ehlo_text = smtp.ehlo()
        ehlo = f"{ehlo_code} {_decode(ehlo_text)}"[:2000]
        if ehlo_code != 250:
            return ProbeResult(False, banner_text, ehlo, latency, f"EHLO refused ({ehlo_code})")
        return ProbeResult(True, banner_text, ehlo, latency)
    finally:
        try:
            smtp.quit()
        except (smtplib.SMTPException, OSError):
            smtp.close()


def probe_smtp(host: str, port: int, timeout: float) -> ProbeResult:
    """Connect, read the banner and say EHLO in a worker thread, bounded by `timeout`."""
    # The thread bounds the whole exchange (DNS included), not just each socket call.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hal-smtp-check")
    future = pool.submit(_probe, host, port, timeout)
    try:
        return future.result(timeout=timeout + 1)
    except FutureTimeout:
        return ProbeResult(False, error=f"timed out after {timeout:g}s")
    except (TimeoutError, smtplib.SMTPException, OSError) as exc:
        return ProbeResult(False, error=f"{type(exc).__name__}: {exc}"[:500])
    finally:
        pool.shutdown(wait=False)


@action("mail.check")
def check_mail_now(*, actor: Actor) -> MailCheck:
    """Check the SMTP relay now (write): stores and returns the result."""
    from hal.actions.settings import get_setting

    require_perm(actor, "operate")
    host, port = smtp_target()
    if not host:
        raise Conflict(
            _("No SMTP relay is configured (HAL_SMTP_HOST)."), code="mail_not_configured"
        )
    result = probe_smtp(host, port, float(get_setting("mail.check_timeout_seconds")))
    return do_record_mail_check(actor, host, port, result)


def do_record_mail_check(actor: Actor, host: str, port: int, result: ProbeResult) -> MailCheck:
    with transaction.atomic():
        check = MailCheck.objects.create(
            host=host[:255],
            port=port,
            ok=result.ok,
            banner=result.banner,
            ehlo=result.ehlo,
            latency_ms=result.latency_ms,
            error=result.error[:500],
            checked_by=actor.label[:150],
        )
        record_audit(
            actor,
            "mail.check",
            target=check,
            target_label=f"{host}:{port}",
            after={"ok": result.ok, "banner": result.banner[:200], "error": result.error[:200]},
        )
        publish(OPS_GROUP, "mail.checked", {"check": check.as_dict()})
    return check
