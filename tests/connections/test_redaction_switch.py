"""Redaction's pattern part per connection (issue 44): an administrator, re-authenticated,
may turn it off (audited, shown on the connection); the known values stay redacted."""

from __future__ import annotations

import secrets

import pytest
from asgiref.sync import async_to_sync

from hal.models import AuditEntry
from providers import redaction
from providers.base import ChatMessage
from providers.services import forget_provider, get_provider
from tests.redaction.canaries import embed, shaped

from .conftest import API, call, error_code

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_switch_needs_a_recent_reauth_and_is_audited(client_op, operator, make_connection):
    from django.test import Client

    conn = make_connection()
    url = f"{API}/{conn['id']}/redaction"
    assert conn["redact_patterns"] is True
    other = Client()
    other.force_login(operator)  # a session without a recent re-auth
    stale = call(other, "PUT", url, {"patterns": False})
    assert stale.status_code == 403 and error_code(stale) == "reauth_required"
    done = call(client_op, "PUT", url, {"patterns": False})
    assert done.status_code == 200, done.content
    assert done.json()["redact_patterns"] is False
    assert call(client_op, "GET", f"{API}/{conn['id']}").json()["redact_patterns"] is False
    row = AuditEntry.objects.filter(action="connections.redaction_patterns").latest("pk")
    assert row.before == {"redact_patterns": True} and row.after == {"redact_patterns": False}
    bad = call(client_op, "PUT", url, {"patterns": "no"})
    assert bad.status_code == 400


def test_off_sends_shapes_but_never_known_values(reauthed, make_connection, settings):
    from providers.models import AIConnection

    key = "v-" + secrets.token_hex(16)
    conn = make_connection(api_key=key)
    call(reauthed, "PUT", f"{API}/{conn['id']}/redaction", {"patterns": False})
    row = AIConnection.objects.get(pk=conn["id"])
    provider = get_provider(row)
    assert provider.redact_patterns is False
    values = shaped()
    text = f"{embed(values)['aws']} {key} {settings.SECRET_KEY} {values['hal']}"
    _, (message,), held = async_to_sync(redaction.outbound)(
        "", [ChatMessage.user(text)], patterns=provider.redact_patterns
    )
    assert values["aws"] in message.text  # the shape went: the switch is off
    assert key not in message.text and settings.SECRET_KEY not in message.text
    assert values["hal"] not in message.text  # HAL's own tokens count as known values
    assert set(held) == {"hal-connection-api-key", "django-secret-key", "hal-token"}
    forget_provider(row.pk)
