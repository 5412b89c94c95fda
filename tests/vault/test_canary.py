"""A per-run canary secret appears nowhere but as ciphertext: DB, audit, logs, reprs, errors."""

from __future__ import annotations

import io
import logging
import secrets
import sys

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.views.debug import ExceptionReporter

from hal.errors import HalError
from hal.models import AuditEntry
from vault import api, crypto, keyring
from vault.models import Secret

pytestmark = pytest.mark.django_db(transaction=True)


def needles(canary: str) -> list[bytes]:
    # The hint legitimately shows 3 + 4 characters; the hidden middle must never appear.
    return [canary.encode(), canary[3:-4].encode()]


def assert_absent(canary: str, blob: str | bytes, where: str) -> None:
    data = blob.encode("utf-8", "replace") if isinstance(blob, str) else bytes(blob)
    for needle in needles(canary):
        assert needle not in data, f"canary found in {where}"


def dump_database() -> list[tuple[str, object]]:
    values = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            for row in cursor.fetchall():
                values.extend((table, value) for value in row)
    return values


def frames_below_the_test(exc_info) -> str:
    """Locals of every frame the error report shows, except this test's own frame."""
    reporter = ExceptionReporter(None, *exc_info)
    frames = [f for f in reporter.get_traceback_frames() if f["filename"] != __file__]
    assert frames
    return "\n".join(f"{f['function']} {f['vars']}" for f in frames)


def test_canary_never_leaves_the_vault_in_clear(operator, caplog, settings):
    from hal.actions.base import Actor

    actor = Actor(user=operator, via="web")
    canary = "sk-" + secrets.token_urlsafe(32)
    replacement = "sk-" + secrets.token_urlsafe(32)
    caplog.set_level(logging.DEBUG)
    # Django sets its own loggers to INFO; open the SQL log explicitly.
    caplog.set_level(logging.DEBUG, logger="django")
    connection.force_debug_cursor = True  # log every SQL statement with its parameters
    outputs: list[str] = []
    errors: list[BaseException] = []
    try:
        secret = api.put_secret(
            purpose="connection.api_key",
            owner_type="connection",
            owner_id="1",
            plaintext=canary,
            actor=actor,
        )
        other = api.put_secret(
            purpose="oauth.refresh_token",
            owner_type="connection",
            owner_id="2",
            plaintext=canary,
            actor=actor,
        )
        revealed = api.get_plaintext(secret.pk, purpose="connection.api_key", actor_label="t")
        assert revealed.reveal() == canary
        outputs += [
            str(revealed),
            repr(revealed),
            f"{revealed}",
            str(secret),
            repr(secret),
            repr(keyring.get_keyring()),
            api.hint_for(secret),
        ]
        logging.getLogger("test").info("using %s / %r / %s", revealed, revealed, secret)

        # Failure paths: tampered row, wrong purpose, malformed keyring.
        Secret.objects.filter(pk=other.pk).update(ciphertext=b"\x00" * 48)
        for call in (
            lambda: api.get_plaintext(other.pk, purpose="oauth.refresh_token", actor_label="t"),
            lambda: api.get_plaintext(secret.pk, purpose="oauth.access_token", actor_label="t"),
            lambda: api.put_secret(
                purpose="connection.api_key",
                owner_type="connection",
                owner_id="1",
                plaintext=canary + "\x00" * 70000,
                actor=actor,
            ),
            lambda: api.put_secret(
                purpose="Bad Purpose",
                owner_type="connection",
                owner_id="1",
                plaintext=canary,
                actor=actor,
            ),
        ):
            with pytest.raises(HalError) as info:
                call()
            errors.append(info.value)

        # Maintenance: add a key, rotate, verify (fails on the tampered row).
        kid, key = keyring.generate_key("k-canary")
        keyring.prepend_key_to_file(kid, key)
        for args in (("rotate",), ("verify",)):
            out, err = io.StringIO(), io.StringIO()
            with pytest.raises(CommandError) as info:
                call_command("vault", *args, stdout=out, stderr=err)
            outputs += [out.getvalue(), err.getvalue()]
            errors.append(info.value)

        # Replace, then delete.
        api.put_secret(
            purpose="connection.api_key",
            owner_type="connection",
            owner_id="1",
            plaintext=replacement,
            actor=actor,
        )
        assert (
            api.get_plaintext(secret.pk, purpose="connection.api_key", actor_label="t").reveal()
            == replacement
        )
        out = io.StringIO()
        call_command("dumpdata", "vault", "hal", stdout=out)
        outputs.append(out.getvalue())
    finally:
        connection.force_debug_cursor = False

    for table, value in dump_database():
        assert_absent(
            canary, value if isinstance(value, bytes | memoryview) else str(value), f"table {table}"
        )
        assert_absent(
            replacement,
            value if isinstance(value, bytes | memoryview) else str(value),
            f"table {table}",
        )
    assert AuditEntry.objects.filter(action="vault.put").exists()
    for entry in AuditEntry.objects.all():
        assert_absent(canary, repr(entry.__dict__), "audit")
    assert "vault.decrypt" in set(AuditEntry.objects.values_list("action", flat=True))
    assert "SELECT" in caplog.text  # the SQL log really was captured
    for text in (caplog.text, *outputs, *(repr(e) + str(e) for e in errors)):
        assert_absent(canary, text, "logs/output/errors")
        assert_absent(replacement, text, "logs/output/errors")
    assert_absent(canary, keyring.key_file_path().read_bytes(), "key file")


def test_error_report_of_a_crash_inside_the_vault_hides_the_plaintext(
    operator, monkeypatch, settings
):
    """Django's error reports (mail_admins, 500 pages) show frame locals: they are cleansed."""
    from hal.actions.base import Actor

    settings.DEBUG = False
    canary = "sk-" + secrets.token_urlsafe(32)

    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("vault.api.seal", explode)
    try:
        api.put_secret(
            purpose="connection.api_key",
            owner_type="connection",
            owner_id="1",
            plaintext=canary,
            actor=Actor(user=operator, via="web"),
        )
    except RuntimeError:
        report = frames_below_the_test(sys.exc_info())
    assert "put_secret" in report and "_store" in report
    assert_absent(canary, report, "error report")


def test_crypto_frames_are_cleansed_too(settings):
    settings.DEBUG = False
    canary = secrets.token_urlsafe(32)
    binding = crypto.Binding(secret_id="x", purpose="a.b", owner_type="t", owner_id="1")
    try:
        crypto.seal(canary.encode(), binding=binding, key_id="k", key=b"short")
    except ValueError:
        report = frames_below_the_test(sys.exc_info())
    assert "seal" in report
    assert_absent(canary, report, "error report")
