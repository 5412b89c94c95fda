"""Sending one message: e-mail through HAL's SMTP relay, or a signed HTTPS POST.

The webhook goes through webfetch's SSRF guard (one resolution, a pinned connection, no
redirects followed) like every other outbound request of HAL.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import smtplib
import ssl
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate

import httpcore2
from django.conf import settings

from hal.actions.mail import EHLO_NAME, smtp_target
from hal.actions.oneline import flatten
from hal.observe import tracing

SIGNATURE_HEADER = "X-HAL-Signature"
DELIVERY_HEADER = "X-HAL-Delivery"
TIMEOUT_SECONDS = 10.0  # each connect, read or write
# A whole webhook exchange: a receiver trickling a byte at a time never trips the per-read
# timeout, and must not hold a send past the worker's lease (HAL_NOTIFY_LEASE_SECONDS).
SEND_DEADLINE_SECONDS = 30.0


@dataclass(frozen=True)
class SendResult:
    """Whether the receiver accepted the message, and what it said (no secrets)."""

    ok: bool
    detail: str
    retry: bool = True  # False: retrying cannot help (a refused address, a blocked URL)


def sender_address() -> str:
    return str(getattr(settings, "HAL_NOTIFY_FROM", "") or "hal@localhost")


def _no_answer(seconds: float) -> SendResult:
    return SendResult(False, f"no answer within {seconds:g} s")


def _timed_out(exc: BaseException) -> bool:
    # smtplib reports a read that timed out as SMTPServerDisconnected from a TimeoutError.
    return isinstance(exc, TimeoutError) or isinstance(exc.__context__, TimeoutError)


def send_email(
    address: str, subject: str, body: str, message_key: str, *, timeout: float = TIMEOUT_SECONDS
) -> SendResult:
    """Hand the message to the configured relay (HAL_SMTP_HOST/PORT); `timeout` bounds
    each step of the SMTP exchange."""
    host, port = smtp_target()
    if not host:
        return SendResult(False, "no SMTP relay is configured (HAL_SMTP_HOST)")
    try:
        msg = _email_message(address, subject, body, message_key)
    except (ValueError, TypeError, UnicodeError) as exc:
        # The `email` package refuses the header (a CR/LF in a stored address or title):
        # the same message would be refused again, so it fails now, with the reason.
        return SendResult(False, f"the message could not be built: {exc}"[:500], retry=False)
    try:
        with smtplib.SMTP(host, port, timeout=timeout, local_hostname=EHLO_NAME) as smtp:
            refused = smtp.send_message(msg)
    except smtplib.SMTPRecipientsRefused as exc:
        return SendResult(False, f"recipient refused: {exc}"[:500], retry=False)
    except (smtplib.SMTPException, OSError) as exc:
        if _timed_out(exc):
            return _no_answer(timeout)
        return SendResult(False, f"{type(exc).__name__}: {exc}"[:500])
    if refused:
        return SendResult(False, f"recipient refused: {refused}"[:500], retry=False)
    return SendResult(True, "250 accepted")


def _email_message(address: str, subject: str, body: str, message_key: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = sender_address()
    msg["To"] = address
    # A subject is one line whatever a stored title holds (rows from before the one-line
    # check of hal.actions.oneline, a model's words in a label).
    msg["Subject"] = flatten(subject)
    msg["Date"] = formatdate(usegmt=True)
    # The same Message-ID on a retry: mail clients and relays may drop the duplicate.
    msg["Message-ID"] = f"<{message_key}@hal.notifications>"
    msg[DELIVERY_HEADER] = message_key
    msg.set_content(body)
    return msg


def crashed(exc: BaseException) -> SendResult:
    """An error nobody foresaw, as a failed attempt: retried by the outbox's rules."""
    return SendResult(False, f"{type(exc).__name__}: {exc}"[:500])


def sign(secret: str, body: bytes) -> str:
    """The X-HAL-Signature value: sha256=<hex HMAC-SHA256 of the body>."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def check_webhook_url(url: str) -> str | None:
    """Why this URL cannot be a webhook (None: fine to try). https only, except for the
    tests' loopback receivers (HAL_WEBFETCH_ALLOW_LOOPBACK)."""
    from webfetch.guard import GuardError, allow_loopback, parse_url

    try:
        parsed = parse_url(url)
    except GuardError as exc:
        return exc.detail
    if parsed.scheme != "https" and not allow_loopback():
        return "a webhook URL must use https"
    return None


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every webhook (loading the CA bundle took ~0.1 s a send)."""
    return httpcore2.default_ssl_context()


async def _post(
    url: str, body: bytes, headers: list[tuple[bytes, bytes]], deadline: float
) -> SendResult:
    try:
        return await asyncio.wait_for(_post_once(url, body, headers, deadline), deadline)
    except TimeoutError:
        return _no_answer(deadline)


async def _post_once(
    url: str, body: bytes, headers: list[tuple[bytes, bytes]], deadline: float
) -> SendResult:
    from webfetch.client import PinnedBackend
    from webfetch.guard import GuardError, guard_url

    try:
        target = await guard_url(url)
    except GuardError as exc:
        return SendResult(False, f"{exc.reason}: {exc.detail}"[:500], retry=False)
    request_url = httpcore2.URL(
        scheme=target.scheme.encode("ascii"),
        host=target.host.encode("ascii"),
        port=target.port,
        target=target.target.encode("utf-8"),
    )
    all_headers = [
        (b"Host", target.authority.encode("ascii")),
        (b"Content-Type", b"application/json"),
        (b"Content-Length", str(len(body)).encode("ascii")),
        (b"User-Agent", b"HAL-notifications/1"),
        (b"Connection", b"close"),
        *headers,
    ]
    step = min(TIMEOUT_SECONDS, deadline)
    timeouts = {"connect": step, "read": step, "write": step}
    try:
        async with httpcore2.AsyncConnectionPool(
            ssl_context=_ssl_context(),
            network_backend=PinnedBackend(target),
            max_connections=1,
            retries=0,
        ) as pool:
            response = await pool.request(
                "POST",
                request_url,
                headers=all_headers,
                content=body,
                extensions={"timeout": {**timeouts, "pool": step}},
            )
    except (httpcore2.TimeoutException, TimeoutError) as exc:
        return SendResult(False, f"timed out: {exc}"[:500])
    except (httpcore2.NetworkError, httpcore2.ProtocolError, ssl.SSLError, OSError) as exc:
        return SendResult(False, f"{type(exc).__name__}: {exc}"[:500])
    status = response.status
    if 200 <= status < 300:
        return SendResult(True, f"HTTP {status}")
    # 4xx other than 408/429 will not get better by retrying; redirects are not followed.
    retry = status >= 500 or status in (408, 429)
    return SendResult(False, f"HTTP {status}", retry=retry)


def send_webhook(
    url: str, body: bytes, secret: str, message_key: str, *, deadline: float | None = None
) -> SendResult:
    """POST the JSON body, signed with the channel's secret, with its idempotency key;
    the whole exchange within `deadline` seconds (default SEND_DEADLINE_SECONDS)."""
    bound = float(deadline if deadline is not None else SEND_DEADLINE_SECONDS)
    headers = [
        (SIGNATURE_HEADER.encode("ascii"), sign(secret, body).encode("ascii")),
        (DELIVERY_HEADER.encode("ascii"), message_key.encode("ascii")),
    ]
    if tracing.on():
        with tracing.span("notification.webhook", {"http.request.method": "POST"}) as made:
            # W3C trace context: the receiver's spans join this delivery's trace.
            headers += [(k.encode("ascii"), v.encode("ascii")) for k, v in tracing.inject().items()]
            result = _send(url, body, headers, bound)
            if not result.ok:
                tracing.mark_error(made, "delivery_failed")
            return result
    return _send(url, body, headers, bound)


def _send(url: str, body: bytes, headers: list[tuple[bytes, bytes]], bound: float) -> SendResult:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_post(url, body, headers, bound))
    # Called from a thread that runs a loop (an async test, a consumer): a thread of its own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, _post(url, body, headers, bound)).result()
