"""Versions: regenerate a model reply, edit an operator message, choose the shown
version (what the panel lists and what models see afterwards), with their error codes."""

from __future__ import annotations

import json

from chatrooms.models import Turn
from tests.fakes.script import Reply

from .conftest import last_user_text, messages, room_for, send, unified_room


def said(request) -> str:
    """Everything a fake model was sent, as one string (history included)."""
    return json.dumps(request.json["messages"], ensure_ascii=False)


async def regenerate(client, room_id: int, message_id: int):
    return await client.post(f"/api/ai/rooms/{room_id}/messages/{message_id}/regenerate")


async def show(client, room_id: int, message_id: int):
    return await client.post(f"/api/ai/rooms/{room_id}/messages/{message_id}/show")


async def edit(client, room_id: int, message_id: int, text: str):
    return await client.patch(
        f"/api/ai/rooms/{room_id}/messages/{message_id}",
        {"text": text},
        content_type="application/json",
    )


def code(response) -> str:
    return response.json()["error"]["code"]


async def test_regenerate_keeps_versions_and_models_see_the_shown_one(
    models, aclient, orchestrator
):
    from hal.models import AuditEntry

    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="first answer"))
    await send(aclient, room_id, "the question")
    await orchestrator.wait_idle()
    first = next(m for m in await messages(aclient, room_id) if m["author_kind"] == "model")

    alpha.fake.replies.push(Reply(text="second answer"))
    response = await regenerate(aclient, room_id, first["id"])
    assert response.status_code == 202, response.content
    await orchestrator.wait_idle()
    # Asked again with the same history up to the question, without the first answer.
    assert last_user_text(alpha.requests[-1]).endswith("the question")
    assert "first answer" not in said(alpha.requests[-1])
    rows = await messages(aclient, room_id)
    assert [m["text"] for m in rows] == ["the question", "second answer"]
    second = rows[1]
    assert second["versions"]["index"] == 2 and second["versions"]["count"] == 2
    assert second["versions"]["ids"] == [first["id"], second["id"]]
    assert second["model"] == alpha.connection.model

    # Choose the first version again: it is listed in place and models see it.
    response = await show(aclient, room_id, first["id"])
    assert response.status_code == 200, response.content
    assert response.json()["message"]["versions"]["index"] == 1
    rows = await messages(aclient, room_id)
    assert [m["text"] for m in rows] == ["the question", "first answer"]
    alpha.fake.replies.push(Reply(text="ok"))
    await send(aclient, room_id, "and then?")
    await orchestrator.wait_idle()
    assert "first answer" in said(alpha.requests[-1])
    assert "second answer" not in said(alpha.requests[-1])
    for action in ("chat.message.regenerate", "chat.message.show_version"):
        assert await AuditEntry.objects.filter(action=action, result="ok").aexists()

    # Error codes; nothing changes.
    operator_id = rows[0]["id"]
    response = await regenerate(aclient, room_id, operator_id)
    assert response.status_code == 409 and code(response) == "not_regenerable"
    response = await regenerate(aclient, room_id, second["id"])  # not the shown version
    assert response.status_code == 409 and code(response) == "version_not_shown"
    response = await show(aclient, room_id, operator_id)
    assert response.status_code == 409 and code(response) == "no_versions"
    response = await regenerate(aclient, room_id, 999999)
    assert response.status_code == 404 and code(response) == "message_not_found"
    assert len(await messages(aclient, room_id)) == 4


async def test_regenerated_reply_relays_once_in_the_unified_room(models, aclient, orchestrator):
    alpha, beta = models[0], models[1]
    room_id = await unified_room(aclient)
    alpha.fake.replies.push(Reply(text="over to @beta"))
    beta.fake.replies.push(Reply(text="beta here"))
    await send(aclient, room_id, "@alpha start")
    await orchestrator.wait_idle()
    rows = await messages(aclient, room_id)
    alpha_reply = next(m for m in rows if m["author"] == "alpha")
    assert len(beta.requests) == 1

    # The regenerated reply mentions @beta again: beta answers once (a relay, depth 1).
    alpha.fake.replies.push(Reply(text="again, @beta"))
    beta.fake.replies.push(Reply(text="beta again, ask @alpha"))
    assert (await regenerate(aclient, room_id, alpha_reply["id"])).status_code == 202
    await orchestrator.wait_idle()
    assert len(beta.requests) == 2
    assert len(alpha.requests) == 2  # beta's relay reply mentioning @alpha relays no further
    relays = [t async for t in Turn.objects.filter(room_id=room_id, relay_depth=1)]
    assert len(relays) == 2
    rows = await messages(aclient, room_id)
    assert [m["text"] for m in rows if m["author"] == "alpha"] == ["again, @beta"]

    # Regenerating the relay reply is a relay again: it never relays further.
    relay_reply = next(m for m in rows if m["text"] == "beta again, ask @alpha")
    beta.fake.replies.push(Reply(text="beta third, @alpha"))
    assert (await regenerate(aclient, room_id, relay_reply["id"])).status_code == 202
    await orchestrator.wait_idle()
    assert len(alpha.requests) == 2
    assert len(beta.requests) == 3


async def test_edit_last_message_answers_again_and_keeps_versions(models, aclient, orchestrator):
    from hal.models import AuditEntry

    alpha, beta = models[0], models[1]
    room_id = await unified_room(aclient)
    alpha.fake.replies.push(Reply(text="alpha answer one"))
    await send(aclient, room_id, "@alpha hello")
    await orchestrator.wait_idle()
    original = (await messages(aclient, room_id))[0]

    # The edit is a new version; the models it addresses answer it.
    beta.fake.replies.push(Reply(text="beta answer"))
    response = await edit(aclient, room_id, original["id"], "@beta hello again")
    assert response.status_code == 202, response.content
    edited = response.json()
    assert edited["versions"] == {
        "group": original["id"],
        "index": 2,
        "count": 2,
        "ids": [original["id"], edited["id"]],
    }
    await orchestrator.wait_idle()
    assert last_user_text(beta.requests[-1]).endswith("@beta hello again")
    assert "alpha answer one" not in said(beta.requests[-1])
    assert [m["text"] for m in await messages(aclient, room_id)] == [
        "@beta hello again",
        "beta answer",
    ]
    assert await AuditEntry.objects.filter(action="chat.message.edit", result="ok").aexists()

    # Back to the first version: its own reply is shown again, the edit's is not.
    assert (await show(aclient, room_id, original["id"])).status_code == 200
    assert [m["text"] for m in await messages(aclient, room_id)] == [
        "@alpha hello",
        "alpha answer one",
    ]
    alpha.fake.replies.push(Reply(text="fine"))
    await send(aclient, room_id, "@alpha and now?")
    await orchestrator.wait_idle()
    assert "alpha answer one" in said(alpha.requests[-1])
    assert "beta answer" not in said(alpha.requests[-1])

    # Any shown operator message can be edited or switched (issue 49: branches nest,
    # tests/chatrooms/test_branches.py); a hidden version cannot be edited.
    response = await edit(aclient, room_id, edited["id"], "@alpha late edit")
    assert response.status_code == 409 and code(response) == "version_not_shown"
    rows = await messages(aclient, room_id)
    model_reply = next(m for m in rows if m["author_kind"] == "model")
    response = await edit(aclient, room_id, model_reply["id"], "mine now")
    assert response.status_code == 409 and code(response) == "not_editable"
    last = [m for m in rows if m["author_kind"] == "operator"][-1]
    response = await edit(aclient, room_id, last["id"], "   ")
    assert response.status_code == 400 and code(response) == "invalid_text"
    response = await edit(aclient, room_id, last["id"], "@nobody hi")
    assert response.status_code == 400 and code(response) == "unknown_addressee"
    assert len(await messages(aclient, room_id)) == len(rows)


async def test_edit_in_an_individual_room(models, aclient, orchestrator):
    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="one"), Reply(text="two"))
    await send(aclient, room_id, "v1")
    await orchestrator.wait_idle()
    first = (await messages(aclient, room_id))[0]
    assert (await edit(aclient, room_id, first["id"], "v2")).status_code == 202
    await orchestrator.wait_idle()
    assert [m["text"] for m in await messages(aclient, room_id)] == ["v2", "two"]
    assert "v1" not in said(alpha.requests[-1]) and "one" not in said(alpha.requests[-1])


async def test_a_reply_waiting_for_approval_cannot_be_regenerated(models, aclient, orchestrator):
    from .test_tools_failures import start_write

    _alpha, room_id, _proposal, turn = await start_write(models, aclient, orchestrator)
    response = await regenerate(aclient, room_id, turn.reply_id)
    assert response.status_code == 409 and code(response) == "reply_running"
    # (Editing the message instead stops the turn and cancels the proposal with a notice:
    # tests/chatrooms/test_branch_waiting.py.)


async def test_a_version_change_names_the_request_that_made_it(
    models, aclient, orchestrator, monkeypatch
):
    """Each `message.versions` event carries the X-Request-ID of the change's request: the
    tab that sent it knows the event for its own and does not reload the room a second
    time (it reloads on the API's answer); every other tab reloads on the event."""
    from chatrooms import versions

    sent: list[dict] = []
    real = versions.publish

    def record(group, event_type, payload):
        if event_type == "message.versions":
            sent.append(payload)
        real(group, event_type, payload)

    monkeypatch.setattr(versions, "publish", record)
    alpha = models[0]
    room_id = await room_for(aclient, alpha.id)
    alpha.fake.replies.push(Reply(text="first answer"))
    await send(aclient, room_id, "the question")
    await orchestrator.wait_idle()
    mine, first = await messages(aclient, room_id)

    alpha.fake.replies.push(Reply(text="second answer"))
    url = f"/api/ai/rooms/{room_id}/messages"
    made = await aclient.post(
        f"{url}/{first['id']}/regenerate", headers={"X-Request-ID": "tab1.r1"}
    )
    assert made.status_code == 202, made.content
    await orchestrator.wait_idle()
    shown = await aclient.post(f"{url}/{first['id']}/show", headers={"X-Request-ID": "tab1.s2"})
    assert shown.status_code == 200, shown.content
    alpha.fake.replies.push(Reply(text="edited answer"))
    edited = await aclient.patch(
        f"{url}/{mine['id']}",
        {"text": "the question, again"},
        content_type="application/json",
        headers={"X-Request-ID": "tab1.e3"},
    )
    assert edited.status_code == 202, edited.content
    await orchestrator.wait_idle()
    assert [(e["group"], e["request_id"]) for e in sent] == [
        (first["id"], "tab1.r1"),
        (first["id"], "tab1.s2"),
        (mine["id"], "tab1.e3"),
    ]
    # A request without the header gets the server's id, which no tab claims as its own.
    await show(aclient, room_id, mine["id"])
    assert sent[-1]["request_id"] not in {"tab1.r1", "tab1.s2", "tab1.e3", ""}
