"""The incident room exports to Markdown and JSON for whoever may view the incident (the
same reading right as its room page), never anonymously (issue 49)."""

from __future__ import annotations

import json

import pytest

from chatrooms.models import Message
from hal.models.ops import Incident
from investigations.actions import incident_room

pytestmark = pytest.mark.django_db


def test_the_incident_room_exports_for_its_viewers_only(client_op):
    from django.test import Client

    incident = Incident.objects.create(title="Portal down", severity="sev2")
    room = incident_room(incident)
    Message.objects.create(room=room, author_kind="hal", author="HAL", text="Investigation began.")
    Message.objects.create(
        room=room, author_kind="model", author="alpha", text="The portal ran out of memory."
    )
    url = f"/api/incidents/{incident.pk}/room/export"
    response = client_op.get(url + "?format=json")
    assert response.status_code == 200, response.content
    doc = json.loads(response.content)
    assert doc["source"] == {
        "kind": "incident",
        "room_id": room.pk,
        "room_kind": "incident",
        "title": f"Incident #{incident.pk}: Portal down",
        "incident_id": incident.pk,
    }
    assert [m["author"] for m in doc["messages"]] == ["HAL", "alpha"]
    md = client_op.get(url).content.decode()
    assert md.startswith(f"# Incident #{incident.pk}: Portal down\n")
    assert "## @alpha" in md
    # Read like the incident room page itself (any logged-in operator); never anonymously.
    assert Client().get(url).status_code == 401
    assert client_op.get(f"/api/incidents/{incident.pk + 1}/room/export").status_code == 404
