"""A canary secret entered through every path is readable nowhere but as ciphertext."""

from __future__ import annotations

import io
import logging
import secrets
from urllib.parse import urlsplit

import pytest
from django.apps import apps
from django.core.management import call_command

from providers.models import AIConnection

from .conftest import API, call
from .test_admin import ADD, change_url, form


def _rows_text() -> tuple[str, bytes]:
    """Every row of every model, as text and as raw bytes (BinaryFields included)."""
    text, raw = [], []
    for model in apps.get_models():
        for row in model._base_manager.all().values_list():
            for value in row:
                if isinstance(value, bytes | memoryview):
                    raw.append(bytes(value))
                else:
                    text.append(repr(value))
    return "\n".join(text), b"\n".join(raw)


@pytest.mark.django_db
def test_canaries_appear_nowhere_but_as_ciphertext(
    reauthed, client_op, operator, fake_oauth, fake_anthropic, caplog, capfd
):
    caplog.set_level(logging.DEBUG)
    canaries = {
        path: f"sk-{path}-" + secrets.token_urlsafe(32)
        for path in (
            "api-create",
            "api-put",
            "api-refused",
            "form-create",
            "form-secret",
            "admin-add",
            "admin-change",
            "admin-refused",
            "oauth-client",
        )
    }
    responses: list[str] = []

    def keep(response):
        responses.append(response.content.decode(errors="replace"))
        for header, value in response.items():
            responses.append(f"{header}: {value}")
        return response

    # API
    created = keep(
        call(
            reauthed,
            "POST",
            API,
            {
                "name": "api",
                "provider": "anthropic",
                "auth_method": "api_key",
                "base_url": fake_anthropic.base_url,
                "api_key": canaries["api-create"],
            },
        )
    ).json()
    keep(call(reauthed, "PUT", f"{API}/{created['id']}/secret", {"api_key": canaries["api-put"]}))
    fake_anthropic.accepted_credentials = {canaries["api-put"]}
    keep(call(reauthed, "POST", f"{API}/{created['id']}/verify"))
    fake_anthropic.accepted_credentials = {"something-else-" + secrets.token_hex(8)}
    keep(call(reauthed, "POST", f"{API}/{created['id']}/verify"))  # 401: error path too
    # /ops/ai forms (no JavaScript)
    keep(
        reauthed.post(
            "/ops/ai",
            {
                "op": "create",
                "name": "form",
                "provider": "openai_compat",
                "auth_method": "api_key",
                "api_key": canaries["form-create"],
            },
        )
    )
    form_conn = AIConnection.objects.get(name="form")
    keep(
        reauthed.post(
            "/ops/ai", {"op": "secret", "id": form_conn.pk, "api_key": canaries["form-secret"]}
        )
    )
    # admin
    keep(reauthed.post(ADD, form(name="admin", api_key=canaries["admin-add"])))
    admin_conn = AIConnection.objects.get(name="admin")
    data = form(name="admin", api_key=canaries["admin-change"])
    del data["provider"], data["auth_method"]
    keep(reauthed.post(change_url(admin_conn.pk), data))
    # OAuth: client secret, code verifier, access and refresh tokens
    oauth = keep(
        call(
            reauthed,
            "POST",
            API,
            {
                "name": "oauth",
                "provider": "anthropic",
                "auth_method": "oauth",
                "oauth": {
                    "authorize_url": fake_oauth.authorize_url,
                    "token_url": fake_oauth.token_url,
                    "client_id": fake_oauth.client_id,
                    "client_secret": canaries["oauth-client"],
                },
            },
        )
    ).json()
    fake_oauth.client_secret = canaries["oauth-client"]
    start = keep(call(reauthed, "POST", f"{API}/{oauth['id']}/oauth/start")).json()
    location = urlsplit(fake_oauth.approve(start["authorize_url"]))
    keep(reauthed.get(f"{location.path}?{location.query}"))
    assert fake_oauth.exchange_calls == 1 and fake_oauth.access_tokens
    # Refused attempts (re-auth expired): nothing stored, nothing echoed.
    from django.conf import settings

    settings.HAL_REAUTH_SECONDS = 0
    keep(
        call(reauthed, "PUT", f"{API}/{created['id']}/secret", {"api_key": canaries["api-refused"]})
    )
    keep(reauthed.post(ADD, form(name="refused", api_key=canaries["admin-refused"])))
    settings.HAL_REAUTH_SECONDS = 600
    # Every read path.
    keep(reauthed.get(API))
    for conn in AIConnection.objects.all():
        keep(reauthed.get(f"{API}/{conn.pk}"))
        keep(reauthed.get(change_url(conn.pk)))
    keep(reauthed.get("/ops/ai"))
    keep(reauthed.get("/admin/providers/aiconnection/"))
    keep(reauthed.get("/api/audit"))
    keep(reauthed.get("/audit/"))

    secrets_to_hide = (
        list(canaries.values()) + fake_oauth.access_tokens + sorted(fake_oauth.refresh_tokens)
    )
    rows, raw = _rows_text()
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    out, err = capfd.readouterr()
    haystacks = {
        "responses": "\n".join(responses),
        "db rows": rows,
        "dumpdata": dump.getvalue(),
        "logs": caplog.text,
        "stdout/stderr": out + err,
    }
    for secret in secrets_to_hide:
        for where, text in haystacks.items():
            assert secret not in text, f"a secret leaked into {where}"
        assert secret.encode() not in raw, "a secret is stored in clear in a binary column"
    # The hints did make it through (proves the paths actually ran).
    assert f"{canaries['api-put'][:3]}…{canaries['api-put'][-4:]}" in haystacks["responses"]
    assert AIConnection.objects.filter(name="refused").count() == 0
