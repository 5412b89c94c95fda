"""From a notification to incidents: one incident per alert group, alerts kept by
fingerprint, repeats only counted, resolutions and re-firings on the timeline, and storms
of new groups folded into one incident (docs/alerts.md, ADR 0021).

Everything of one notification happens in one transaction under the source's row lock
(two posts of one source never race to open twin incidents); a refusal changes nothing.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from alerts.models import Alert, AlertGroup, AlertSource, AlertStorm
from alerts.schema import Batch, Item
from alerts.sources import DEFAULT_SEVERITY, DEFAULT_SEVERITY_MAP
from hal import i18n
from hal.actions.base import Actor, record_audit
from hal.actions.incidents import MAX_TITLE, do_close_incident, do_open_incident, do_record_alert
from hal.models import Incident

MAX_ALERTS_PER_GROUP = 500  # alerts kept per group; more are counted, not stored
MAX_LISTED = 20  # alerts named in one timeline entry
STORM_WINDOW_SETTING = "alerts.storm_window_seconds"
STORM_GROUPS_SETTING = "alerts.storm_groups"
CLOSE_SETTING = "alerts.close_when_resolved"
HOST_LABELS = ("instance", "host", "hostname", "nodename")
LAST_USED_GRANULARITY = timedelta(seconds=60)


def source_actor(source: AlertSource) -> Actor:
    """The receiver acts as the source (a system actor), never as an operator."""
    return Actor.for_system("system", f"alerts:{source.name}"[:150])


def _setting(name: str) -> Any:
    from hal.actions.settings import get_setting

    return get_setting(name)


def severity_of(source: AlertSource, items: list[Item]) -> str:
    """The most severe mapping among the firing alerts' severity labels (default sev3)."""
    mapping = {**DEFAULT_SEVERITY_MAP, **(source.severity_map or {})}
    found = [
        mapping[value.lower()]
        for item in items
        if (value := item.labels.get(source.severity_label)) and value.lower() in mapping
    ]
    return min(found) if found else DEFAULT_SEVERITY  # "sev1" < "sev2" < …


def servers_of(items: list[Item]) -> list[str]:
    """HAL servers named by an instance/host label (`web-1:9100` names `web-1`)."""
    from hal.models import Server

    names: list[str] = []
    for item in items:
        for label in HOST_LABELS:
            value = item.labels.get(label, "")
            host = value.rsplit(":", 1)[0] if value.count(":") == 1 else value
            if host and host not in names:
                names.append(host[:253])
    if not names:
        return []
    known = set(
        Server.objects.exclude(status="deleted")
        .filter(hostname__in=names[:50])
        .values_list("hostname", flat=True)
    )
    return [n for n in names if n in known]


def _summary(item: Item) -> str:
    return (item.annotations.get("summary") or item.annotations.get("description") or "")[:500]


def _line(item: Item) -> str:
    where = f" <{item.generator_url}>" if item.generator_url else ""
    text = _summary(item)
    return f"- {item.name or item.fingerprint} [{item.status}]{': ' + text if text else ''}{where}"


def describe(source: AlertSource, batch: Batch, items: list[Item]) -> str:
    """The incident's description: the alerts, their annotations and links (model input,
    redacted on its way to a model like every other)."""
    lines = [f"Alerts from {source.kind} source {source.name!r}, group {batch.group_key[:300]}:"]
    for item in items[:MAX_LISTED]:
        lines.append(_line(item))
        labels = ", ".join(f"{k}={v}" for k, v in sorted(item.labels.items()))[:1000]
        lines.append(f"  labels: {labels}")
        for key, value in sorted(item.annotations.items()):
            lines.append(f"  {key}: {value[:2000]}")
    if len(items) > MAX_LISTED:
        lines.append(f"(and {len(items) - MAX_LISTED} more)")
    return "\n".join(lines)[:10_000]


def _title(source: AlertSource, items: list[Item]) -> str:
    first = items[0]
    more = f" (+{len(items) - 1})" if len(items) > 1 else ""
    text = _summary(first)
    title = f"{first.name or 'alert'}{more}{': ' + text if text else ''}"
    return " ".join(title.split())[:MAX_TITLE]


def _entry(
    actor: Actor, incident: Incident | None, msgid: str, items: list[Item], **params: Any
) -> None:
    if incident is None:
        return
    text = i18n.text(msgid, count=len(items), **params)
    listed = [
        {"name": i.name, "fingerprint": i.fingerprint, "status": i.status, "url": i.generator_url}
        for i in items[:MAX_LISTED]
    ]
    # The alerts' lines are the source's words: kept as written, in every language.
    lines = [_line(i) for i in items[:MAX_LISTED]]
    english = "\n".join([i18n.english(text), *lines])
    do_record_alert(
        actor, incident, text=english, data={"text_i18n": [text, *lines], "alerts": listed}
    )


def receive(source_id: int, batch: Batch) -> dict[str, Any]:
    """Apply one notification; returns what it did (the receiver's 200 body)."""
    with transaction.atomic():
        source = AlertSource.objects.select_for_update().get(pk=source_id)
        now = timezone.now()
        if source.last_used_at is None or now - source.last_used_at > LAST_USED_GRANULARITY:
            # At most one write a minute: not a row update per notification of a storm.
            source.last_used_at = now
            source.save(update_fields=["last_used_at"])
        key_hash = hashlib.sha256(batch.group_key.encode("utf-8")).hexdigest()
        group = AlertGroup.objects.filter(source=source, key_hash=key_hash).first()
        if group is None:
            return _new_group(source, batch, key_hash, now)
        return _known_group(source, group, batch, now)


def _store_alerts(group: AlertGroup, items: list[Item]) -> list[Alert]:
    room = MAX_ALERTS_PER_GROUP - Alert.objects.filter(group=group).count()
    rows = [
        Alert(
            group=group,
            fingerprint=i.fingerprint,
            status=i.status,
            name=i.name,
            labels=i.labels,
            annotations=i.annotations,
            generator_url=i.generator_url,
            starts_at=i.starts_at,
            ends_at=i.ends_at,
        )
        for i in items[: max(room, 0)]
    ]
    return Alert.objects.bulk_create(rows)


def _new_group(source: AlertSource, batch: Batch, key_hash: str, now: Any) -> dict[str, Any]:
    actor = source_actor(source)
    firing = [i for i in batch.items if i.status == Alert.FIRING]
    storm = _storm_for(source, now) if firing else None
    group = AlertGroup.objects.create(
        source=source,
        group_key=batch.group_key[:1000],
        key_hash=key_hash,
        status=AlertGroup.FIRING if firing else AlertGroup.RESOLVED,
        notifications=1,
        truncated_alerts=batch.truncated,
        resolved_at=None if firing else now,
        incident=storm.incident if storm else None,
        folded=storm is not None,
    )
    _store_alerts(group, list(batch.items))
    if not firing:
        # Resolved before HAL heard it fire (a restart, a new source): kept, no incident.
        return {"group": group.pk, "incident": None, "result": "resolved_unseen"}
    if storm is not None:
        storm.groups += 1
        storm.alerts += len(batch.items)
        storm.last_at = now
        storm.save(update_fields=["groups", "alerts", "last_at"])
        return {"group": group.pk, "incident": storm.incident_id, "result": "folded"}
    incident = do_open_incident(
        actor,
        severity=severity_of(source, firing),
        title=_title(source, firing),
        description=describe(source, batch, firing),
        servers=servers_of(firing),
        modules=[],
    )
    group.incident = incident
    group.save(update_fields=["incident"])
    record_audit(
        actor,
        "alerts.receive",
        target=incident,
        after={"group": group.pk, "alerts": len(batch.items), "result": "opened"},
    )
    return {"group": group.pk, "incident": incident.pk, "result": "opened"}


def _storm_for(source: AlertSource, now: Any) -> AlertStorm | None:
    """The storm a new group folds into, opened now if this group starts one; else None."""
    window = timedelta(seconds=int(_setting(STORM_WINDOW_SETTING)))
    limit = int(_setting(STORM_GROUPS_SETTING))
    storm = (
        AlertStorm.objects.filter(source=source, last_at__gte=now - window)
        .select_related("incident")
        .first()
    )
    if storm is not None and storm.incident and storm.incident.status == Incident.OPEN:
        return storm
    recent = AlertGroup.objects.filter(
        source=source, folded=False, first_seen_at__gte=now - window, incident__isnull=False
    ).count()
    if recent < limit:
        return None
    actor = source_actor(source)
    incident = do_open_incident(
        actor,
        severity="sev2",
        title=f"Alert storm from {source.name}: more than {limit} groups within "
        f"{int(window.total_seconds())} s"[:MAX_TITLE],
        description=f"New alert groups from {source.name!r} beyond the first {limit} of the "
        "window are folded into this incident and counted (see its alert panel).",
        servers=[],
        modules=[],
    )
    record_audit(actor, "alerts.storm", target=incident, after={"source": source.pk})
    return AlertStorm.objects.create(source=source, incident=incident, last_at=now)


def _known_group(source: AlertSource, group: AlertGroup, batch: Batch, now: Any) -> dict[str, Any]:
    actor = source_actor(source)
    rows = {a.fingerprint: a for a in Alert.objects.filter(group=group)}
    new = [i for i in batch.items if i.fingerprint not in rows]
    stored = _store_alerts(group, new)
    changed_to: dict[str, list[Item]] = {Alert.FIRING: [], Alert.RESOLVED: []}
    touched = []
    for item in batch.items:
        row = rows.get(item.fingerprint)
        if row is None:
            continue
        if row.status != item.status:
            changed_to[item.status].append(item)
            row.status = item.status
        row.ends_at, row.seen, row.annotations = item.ends_at, row.seen + 1, item.annotations
        row.last_seen_at = now
        touched.append(row)
    Alert.objects.bulk_update(touched, ["status", "ends_at", "seen", "annotations", "last_seen_at"])
    group.notifications += 1
    group.truncated_alerts = batch.truncated
    incident = group.incident
    if group.folded:
        group.save(update_fields=["notifications", "truncated_alerts", "last_seen_at"])
        return {"group": group.pk, "incident": group.incident_id, "result": "folded"}
    new_firing = [i for i in new if i.status == Alert.FIRING][: len(stored)]
    firing_now = Alert.objects.filter(group=group, status=Alert.FIRING).exists()
    result = "repeat"
    if group.status == AlertGroup.RESOLVED and firing_now:
        # A new firing episode: a closed incident gets a new one; an open one a new look.
        group.status, group.resolved_at, group.episode = AlertGroup.FIRING, None, group.episode + 1
        firing = [i for i in batch.items if i.status == Alert.FIRING]
        if incident is None or incident.status != Incident.OPEN:
            incident = do_open_incident(
                actor,
                severity=severity_of(source, firing),
                title=_title(source, firing),
                description=describe(source, batch, firing),
                servers=servers_of(firing),
                modules=[],
            )
            group.incident = incident
        else:
            _entry(actor, incident, gettext_noop("Firing again ({count} alerts)."), firing)
            _look_again(incident)
        result = "refiring"
    else:
        if new_firing:
            _entry(actor, incident, gettext_noop("{count} new alerts firing."), new_firing)
            result = "updated"
        if changed_to[Alert.FIRING]:
            _entry(
                actor, incident, gettext_noop("{count} alerts firing again."), changed_to["firing"]
            )
            result = "updated"
        resolved = changed_to[Alert.RESOLVED] + [i for i in new if i.status == Alert.RESOLVED]
        if resolved:
            _entry(actor, incident, gettext_noop("{count} alerts resolved."), resolved)
            result = "updated"
        if group.status == AlertGroup.FIRING and not firing_now:
            group.status, group.resolved_at = AlertGroup.RESOLVED, now
            _entry(actor, incident, gettext_noop("Resolved at the source."), [])
            result = "resolved"
            if (
                incident is not None
                and incident.status == Incident.OPEN
                and bool(_setting(CLOSE_SETTING))
            ):
                do_close_incident(actor, incident, resolution="Resolved at the source.")
    group.save()
    if result != "repeat":
        record_audit(
            actor,
            "alerts.receive",
            target=incident,
            after={"group": group.pk, "alerts": len(batch.items), "result": result},
        )
    return {"group": group.pk, "incident": group.incident_id, "result": result}


def _look_again(incident: Incident) -> None:
    """A new firing episode on an open incident: the investigator looks once more (none
    when one is still queued or running: one per incident, as always)."""
    from investigations.actions import do_queue_investigation, investigator_actor

    do_queue_investigation(investigator_actor(), incident)
