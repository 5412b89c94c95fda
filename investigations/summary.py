"""The end of an investigation: its summary in the room, each next step as an ordinary
proposal, and the timeline entry (hal.actions.incidents) with links to the evidence.

HAL believes evidence: a claim keeps a link only to a read call of this investigation that
succeeded; a claim citing anything else is shown as unsupported.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils.translation import gettext_noop

from hal import i18n
from investigations import actions, wording
from investigations.models import Investigation

log = logging.getLogger("hal.investigations")

MAX_CLAIMS = 10
MAX_STEPS = 3
MAX_TEXT = 1000


MAX_ALERTS = 20  # alerts named in a summary


def _clip(value: Any, limit: int = MAX_TEXT) -> str:
    return str(value or "").strip()[:limit]


def room_url(inv: Investigation, anchor: str = "") -> str:
    return f"/incidents/{inv.incident_id}/room/" + (f"#{anchor}" if anchor else "")


def cited(inv: Investigation, findings: dict[str, Any]) -> list[dict[str, Any]]:
    """The claims with their evidence checked against the calls that really ran."""
    good = {c["id"]: c for c in inv.calls if c.get("ok")}
    out = []
    for item in (findings.get("checked") or [])[:MAX_CLAIMS]:
        if not isinstance(item, dict):
            continue
        evidence = [str(e) for e in (item.get("evidence") or []) if isinstance(e, str | int)]
        found = [good[e] for e in evidence if e in good]
        out.append({"claim": _clip(item.get("claim")), "evidence": found})
    return out


def propose_steps(
    inv: Investigation, steps: Any, message_id: int
) -> tuple[list[int], list[dict[str, Any]]]:
    """Each next step through the ordinary tool path: a write or high-risk call becomes a
    pending proposal (nothing runs); a read or a refusal is only noted."""
    from hal.tools import run_tool_call
    from hal.tools.registry import READ, get_tool

    ids: list[int] = []
    notes: list[dict[str, Any]] = []
    actor = actions.investigator_actor()
    for n, step in enumerate((steps or [])[:MAX_STEPS], start=1):
        if not isinstance(step, dict):
            continue
        name = str(step.get("tool", ""))
        tool = get_tool(name)
        if tool is None or tool.tier == READ:
            notes.append(
                i18n.text(
                    gettext_noop(
                        "- {tool}: not a change (only write and high-risk tools are proposed)"
                    ),
                    tool=name or "?",
                )
            )
            continue
        arguments = dict(step.get("arguments") or {})
        if step.get("runbook") not in (None, ""):
            arguments["runbook"] = step["runbook"]
        outcome = run_tool_call(
            name,
            arguments,
            actor=actor,
            origin={
                "connection_id": inv.connection_id,
                "room_id": inv.room_id,
                "message_id": message_id,
                "turn_id": f"investigation-{inv.pk}",
                "tool_call_id": f"investigation-{inv.pk}-step-{n}",
            },
        )
        if outcome.proposal is not None:
            ids.append(outcome.proposal.pk)
        else:
            notes.append(
                i18n.text(
                    gettext_noop("- {tool}: refused ({code})"),
                    tool=name,
                    code=(outcome.error or {}).get("code", "error"),
                )
            )
    return ids, notes


def compose(
    inv: Investigation,
    claims: list[dict[str, Any]],
    cause: str,
    proposals: list[Any],
    notes: list[dict[str, Any]],
    fallback: str,
) -> tuple[list[Any], list[dict[str, Any]]]:
    """(timeline lines, links): numbered claims citing [n] evidence, cause, next steps —
    each line a hal.i18n text whose string params are the model's or the fleet's words."""
    links: list[dict[str, Any]] = []
    number: dict[str, int] = {}
    model = f"@{inv.connection.name}" if inv.connection else "@?"
    lines: list[Any] = [i18n.text(gettext_noop("First look by {model}"), model=model)]
    lines += alert_lines(inv.incident)
    if claims:
        lines.append(i18n.text(gettext_noop("Checked:")))
    for claim in claims:
        refs = []
        for call in claim["evidence"]:
            if call["id"] not in number:
                number[call["id"]] = len(number) + 1
                links.append(
                    {
                        "label": f"[{number[call['id']]}] {call['tool']}",
                        "url": room_url(inv, call["anchor"]),
                    }
                )
            refs.append(f"[{number[call['id']]}]")
        if refs:
            line = i18n.text(
                gettext_noop("- {claim} {refs}"), claim=claim["claim"], refs=" ".join(refs)
            )
        else:
            line = i18n.text(gettext_noop("- {claim} (unsupported)"), claim=claim["claim"])
        lines.append(line)
    if cause:
        lines.append(i18n.text(gettext_noop("Likely cause: {cause}"), cause=cause))
    elif fallback:
        lines.append(fallback[:MAX_TEXT])
    if proposals:
        lines.append(i18n.text(gettext_noop("Next steps (waiting for approval):")))
    for p in proposals:
        book = (p.runbook or {}).get("title") if p.runbook else None
        step = {"pk": p.pk, "tool": p.tool, "target": p.target_identifier or ""}
        if book:
            line = i18n.text(
                gettext_noop("- proposal #{pk}: {tool} {target} (runbook: {runbook})"),
                runbook=book,
                **step,
            )
        else:
            line = i18n.text(gettext_noop("- proposal #{pk}: {tool} {target}"), **step)
        lines.append(line)
        links.append(
            {
                "label": f"proposal #{p.pk} {p.tool}",
                "label_i18n": i18n.text(
                    gettext_noop("proposal #{pk} {tool}"), pk=p.pk, tool=p.tool
                ),
                "url": f"/proposals/#proposal-{p.pk}",
            }
        )
    lines.extend(notes)
    links.append(_room_link(inv))
    return lines, links


def alert_lines(incident: Any) -> list[Any]:
    """The alerts that raised the incident (an alert source's), each with its source link."""
    from hal.hooks.incidents import incident_sources

    found = incident_sources(incident)
    if not found:
        return []
    lines: list[Any] = [i18n.text(gettext_noop("Alerts:"))]
    for item in found[:MAX_ALERTS]:
        lines.append(
            i18n.text(
                gettext_noop("- {name} [{status}] {url}"),
                name=item.get("name", "")[:200],
                status=item.get("status", ""),
                url=item.get("url", "")[:2000],
            )
        )
    if len(found) > MAX_ALERTS:
        lines.append(i18n.text(gettext_noop("(and {count} more)"), count=len(found) - MAX_ALERTS))
    return lines


def _room_link(inv: Investigation) -> dict[str, Any]:
    label = wording.room_link(inv.incident_id)
    return {"label": i18n.english(label), "label_i18n": label, "url": room_url(inv)}


def english_lines(lines: list[Any]) -> str:
    """The English text of the lines (the timeline row, the API, the audit, models)."""
    return "\n".join(i18n.english(line).rstrip() for line in lines)


def post_summary(
    investigation_id: int, findings: dict[str, Any], text: str, *, owner: str | None = None
) -> str:
    """Post the findings (a DB thread): room message, proposals, timeline; its status.
    Given the run's claim (`owner`), nothing is posted once another run holds the row."""
    from chatrooms.models import Message
    from hal.actions.incidents import check_record_investigation
    from hal.models import Proposal

    with transaction.atomic():
        inv = (
            # Only this row is locked (PostgreSQL refuses FOR UPDATE on the outer join's
            # nullable side: the connection may be gone).
            Investigation.objects.select_for_update(of=("self",))
            .select_related("connection", "incident")
            .get(pk=investigation_id)
        )
        if not inv.active or (owner is not None and inv.owner != owner):
            return inv.status
        if inv.stop_requested:
            # Stopped (or the incident closed) while it finished: nothing is posted.
            actions.do_finish(
                actions.investigator_actor(), inv, Investigation.STOPPED, reason="stopped"
            )
            return Investigation.STOPPED
        claims = cited(inv, findings)
        cause = _clip(findings.get("likely_cause"))
        summary: dict[str, Any] = {
            "checked": [
                {
                    "claim": c["claim"],
                    "evidence": [e["id"] for e in c["evidence"]],
                    "refs": [{"id": e["id"], "anchor": e["anchor"]} for e in c["evidence"]],
                }
                for c in claims
            ],
            "likely_cause": cause,
            "text": _clip(text, 4000),
        }
        message = Message.objects.create(
            room_id=inv.room_id,
            author_kind=Message.MODEL,
            author=inv.connection.name if inv.connection else "?",
            connection=inv.connection,
            text=text or cause,
            meta={"investigation": inv.pk, "summary": summary},
        )
        ids, notes = propose_steps(inv, findings.get("next_steps"), message.pk)
        proposals = list(Proposal.objects.filter(pk__in=ids).order_by("id"))
        lines, links = compose(inv, claims, cause, proposals, notes, text)
        summary["proposals"] = ids
        message.meta = {**message.meta, "summary": summary, "proposals": ids}
        message.save(update_fields=["meta"])
        from investigations.live import publish_message

        publish_message(message)
        check_record_investigation(
            actor=actions.investigator_actor(),
            incident_id=inv.incident_id,
            text=english_lines(lines),
            text_i18n=lines,
            links=links,
        )
        actions.do_finish(
            actions.investigator_actor(),
            inv,
            Investigation.DONE,
            summary=summary,
            proposal_ids=ids,
        )
    return Investigation.DONE


def post_budget_entry(investigation_id: int, reason: str) -> None:
    """A budget ran out: the timeline says so, with links to what was read so far."""
    from hal.actions.incidents import check_record_investigation

    inv = Investigation.objects.select_related("connection").get(pk=investigation_id)
    if inv.stop_requested or inv.incident.status != "open":
        return
    links = [
        {"label": f"[{n}] {c['tool']}", "url": room_url(inv, c["anchor"])}
        for n, c in enumerate((c for c in inv.calls if c.get("ok")), start=1)
    ]
    links.append(_room_link(inv))
    entry = wording.budget_entry(reason, len(inv.calls))
    check_record_investigation(
        actor=actions.investigator_actor(),
        incident_id=inv.incident_id,
        text=i18n.english(entry),
        text_i18n=[entry],
        links=links,
    )
