"""The incident room is live: a socket on /ws/ai/ that watches the room ("room.watch") gets
each investigator message and tool call (`message.created`, the chat rooms' event, on the
room's group) and each status change (`investigation.updated`) as it happens; no polling."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from chatrooms.models import Room
from investigations.models import Investigation
from investigations.runner import run_many
from tests.chatrooms.test_api_ws import communicator, events_until
from tests.investigations.conftest import script_investigation
from tests.investigations.test_controls import open_incident


async def _watch(comm, room_id) -> dict:
    await comm.send_json_to({"type": "room.watch", "room_id": room_id, "ref": "w"})
    (answer,) = (await events_until(comm, lambda e: e.get("ref") == "w"))[-1:]
    return answer


async def test_a_watching_socket_sees_the_investigation_as_it_happens(
    investigator, operator, viewer
):
    script_investigation(investigator.fake)
    incident = await sync_to_async(open_incident)(operator)
    room = await Room.objects.aget(kind=Room.INCIDENT, incident=incident)
    # A viewer (may view incidents, may change nothing) watches from the room page.
    comm = communicator(viewer)
    connected, _ = await comm.connect()
    assert connected
    answer = await _watch(comm, room.pk)
    assert answer == {
        "type": "room.watching",
        "ref": "w",
        "data": {"room_id": room.pk, "incident_id": incident.pk},
    }
    # The worker's runner, on this loop (its events go through the channel layer).
    [(inv_id, status)] = await run_many("test-worker", 2)
    assert status == Investigation.DONE
    events = await events_until(
        comm,
        lambda e: (
            e["type"] == "investigation.updated" and e["data"]["investigation"]["status"] == "done"
        ),
    )
    statuses = [
        e["data"]["investigation"]["status"] for e in events if e["type"] == "investigation.updated"
    ]
    assert statuses[0] == "running" and statuses[-1] == "done"
    created = [e["data"] for e in events if e["type"] == "message.created"]
    assert all(m["room_id"] == room.pk for m in created)
    calls = [m["entry"]["call"]["name"] for m in created if m["entry"]["call"]]
    assert calls == ["get_health", "list_jobs", "search_audit"]
    anchors = [m["entry"]["anchor"] for m in created if m["entry"]["call"]]
    assert anchors[0] == "call-toolu_inv_health" and created[0]["entry"]["seed"]
    summary = [m for m in created if m["entry"]["summary"]]
    assert len(summary) == 1
    assert summary[0]["entry"]["summary"]["likely_cause"] == "portal is down on its host."
    assert summary[0]["entry"]["proposals"]  # the next step, waiting for approval
    assert all(m["entry"]["investigation"] == inv_id for m in created)
    await comm.disconnect()


async def test_only_incident_rooms_the_operator_may_view_can_be_watched(models, operator, viewer):
    from chatrooms.actions import ensure_rooms

    comm = communicator(viewer)
    connected, _ = await comm.connect()
    assert connected
    # Another operator's own chat room: not watchable (it does not exist for the viewer).
    others = await sync_to_async(ensure_rooms)(operator)
    for room_id in (others[0].pk, 999999, "x"):
        answer = await _watch(comm, room_id)
        assert answer["type"] == "error" and answer["data"]["code"] == "room_not_found"
    await comm.disconnect()
