"""A conversation as a record: JSON (versioned schema, docs/schemas/chat-export-v1.json)
and Markdown rendered from that same JSON, so the two never say different things.

What goes in: the shown messages (the branch and versions on screen), authors, models,
times, relay markers, tool-call chips, attachments by name and sha256, the proposals
raised in the conversation with their decision, execution result and audit row ids."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from chatrooms.models import Message, Room
from hal.models import AuditEntry
from hal.models.proposals import Proposal

SCHEMA = "hal.chat-export"
VERSION = 1
KINDS = ("room", "archive", "incident")


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


def _message(m: Message) -> dict[str, Any]:
    meta = m.meta or {}
    facts = meta.get("facts") or {}
    out: dict[str, Any] = {
        "id": m.pk,
        "author_kind": m.author_kind,
        "author": m.author,
        "connection_id": m.connection_id,
        "model": facts.get("model") or None,
        "created_at": _iso(m.created_at),
        "status": m.status,
        "relay": m.relay_depth > 0,
        "relay_depth": m.relay_depth,
        "reply_to": m.reply_to_id,
        "text": m.text,
        "tool_calls": [
            {"name": str(c.get("name", "")), "status": str(c.get("status", ""))}
            for c in facts.get("tool_calls") or []
        ],
        "attachments": [
            {
                "name": a["name"],
                "sha256": a["sha256"],
                "size": a["size"],
                "kind": a["kind"],
                "media_type": a["media_type"],
                "lines": a.get("lines"),
            }
            for a in meta.get("attachments") or []
        ],
        "proposal_ids": [int(p) for p in meta.get("proposals") or []],
    }
    if m.status == Message.FAILED:
        out["error"] = {"code": m.error_code, "message": m.error_message}
    return out


def _proposals(room: Room, ids: list[int], reader: Any) -> list[dict[str, Any]]:
    rows = list(Proposal.objects.filter(room_id=room.pk, message_id__in=ids).order_by("id"))
    audits: dict[str, list[dict[str, Any]]] = {}
    for entry in AuditEntry.objects.filter(
        target_type="proposal", target_id__in=[str(p.pk) for p in rows]
    ).order_by("id"):
        audits.setdefault(entry.target_id, []).append(
            {
                "id": entry.pk,
                "action": entry.action,
                "result": entry.result,
                "actor": entry.actor_label,
                "at": _iso(entry.created_at),
            }
        )
    out = []
    for p in rows:
        visible = p.details_visible_to(reader)
        item: dict[str, Any] = {
            "id": p.pk,
            "message_id": p.message_id,
            "tool": p.tool,
            "tier": p.tier,
            "status": p.status,
            "target": p.target_identifier,
            "summary": p.impact_summary,
            "requested_by": p.requested_label,
            "created_at": _iso(p.created_at),
            "decided_by": p.decided_label or None,
            "decided_at": _iso(p.decided_at),
            "decision_reason": p.decision_reason,
            "executed_at": _iso(p.executed_at),
            "error_code": p.error_code,
            "error_message": p.error_message,
            "audit": audits.get(str(p.pk), []),
        }
        if visible:  # the arguments and result only for those who may read them
            item["arguments"] = p.arguments
            item["result"] = p.result
        out.append(item)
    return out


def build(
    room: Room,
    messages: list[Message],
    *,
    kind: str,
    title: str,
    reader: Any,
    archive_id: int | None = None,
) -> dict[str, Any]:
    """The export document (schema `hal.chat-export`, version 1)."""
    shown = [_message(m) for m in messages if m.status != Message.STREAMING]
    participants = sorted({m["author"] for m in shown if m["author_kind"] == Message.MODEL})
    source: dict[str, Any] = {
        "kind": kind,
        "room_id": room.pk,
        "room_kind": room.kind,
        "title": title,
    }
    if archive_id is not None:
        source["archive_id"] = archive_id
    if room.incident_id is not None:
        source["incident_id"] = room.incident_id
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "exported_at": _iso(timezone.now()),
        "exported_by": getattr(reader, "username", "") or "",
        "source": source,
        "participants": participants,
        "messages": shown,
        "proposals": _proposals(room, [m["id"] for m in shown], reader),
    }


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines()) or ">"


def markdown(doc: dict[str, Any]) -> str:
    """The Markdown record of an export document (for a ticket or a postmortem)."""
    src = doc["source"]
    lines = [
        f"# {src['title']}",
        "",
        f"- Exported: {doc['exported_at']} by {doc['exported_by'] or '-'}",
        f"- Source: {src['kind']} (room #{src['room_id']}"
        + (f", archive #{src['archive_id']}" if "archive_id" in src else "")
        + (f", incident #{src['incident_id']}" if "incident_id" in src else "")
        + ")",
        f"- Participants: {', '.join('@' + p for p in doc['participants']) or '-'}",
        f"- Format: {doc['schema']} v{doc['version']}",
        "",
    ]
    proposals = {p["id"]: p for p in doc["proposals"]}
    for m in doc["messages"]:
        who = m["author"] if m["author_kind"] != "model" else f"@{m['author']}"
        head = f"## {who}"
        if m["model"]:
            head += f" ({m['model']})"
        head += f" · {m['created_at']}"
        if m["relay"]:
            head += f" · relay reply to #{m['reply_to']}"
        if m["status"] != "complete":
            head += f" · {m['status']}"
        lines += [head, "", m["text"] or "_(no text)_", ""]
        if m.get("error"):
            lines += [f"> Failed: `{m['error']['code']}` {m['error']['message']}", ""]
        for a in m["attachments"]:
            size = f"{a['lines']} lines" if a["kind"] == "text" else a["media_type"]
            lines.append(
                f"- Attachment: `{a['name']}` ({size}, {a['size']} bytes, sha256 `{a['sha256']}`)"
            )
        for c in m["tool_calls"]:
            lines.append(f"- Tool call: `{c['name']}` ({c['status']})")
        for pid in m["proposal_ids"]:
            p = proposals.get(pid)
            if p is not None:
                lines.append(_proposal_line(p))
        if m["attachments"] or m["tool_calls"] or m["proposal_ids"]:
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _proposal_line(p: dict[str, Any]) -> str:
    line = f"- Proposal #{p['id']}: `{p['tool']}` ({p['tier']}) — {p['status']}"
    if p["summary"]:
        line += f"; {p['summary']}"
    if p["decided_by"]:
        line += f"; decided by {p['decided_by']} at {p['decided_at']}"
        if p["decision_reason"]:
            line += f" ({p['decision_reason']})"
    if p["executed_at"]:
        line += f"; executed at {p['executed_at']}"
    if p["error_code"]:
        line += f"; failed: `{p['error_code']}` {p['error_message']}"
    if p["audit"]:
        line += "; audit ids " + ", ".join(str(a["id"]) for a in p["audit"])
    return line
