"""The receivers' strict payload schemas: Alertmanager's webhook (version "4") and Grafana's
webhook contact point, both normalised to one shape (`Batch`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from hal.errors import InvalidInput

MAX_ALERTS = 1000  # per notification (Alertmanager's max_alerts is 0 = all: HAL bounds it)
MAX_LABELS = 100
Key = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Short = Annotated[str, StringConstraints(max_length=2000)]
Long = Annotated[str, StringConstraints(max_length=16_000)]
Labels = Annotated[dict[Key, Short], Field(max_length=MAX_LABELS)]
Annotations = Annotated[dict[Key, Long], Field(max_length=MAX_LABELS)]
Status = Literal["firing", "resolved"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class AmAlert(_Strict):
    """One alert of an Alertmanager notification."""

    status: Status
    labels: Labels
    annotations: Annotations = {}
    startsAt: str
    endsAt: str = ""
    generatorURL: Short = ""
    fingerprint: Annotated[str, StringConstraints(min_length=1, max_length=64)]


class AmPayload(_Strict):
    """Alertmanager's webhook payload, version "4" (prometheus/alertmanager notify/webhook)."""

    version: Literal["4"]
    groupKey: Annotated[str, StringConstraints(min_length=1, max_length=100_000)]
    truncatedAlerts: Annotated[int, Field(ge=0)] = 0
    status: Status
    receiver: Short = ""
    groupLabels: Labels = {}
    commonLabels: Labels = {}
    commonAnnotations: Annotations = {}
    externalURL: Short = ""
    alerts: Annotated[list[AmAlert], Field(max_length=MAX_ALERTS)]


class GrafanaAlert(AmAlert):
    """One alert of a Grafana webhook notification (Alertmanager's, plus Grafana's links)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    fingerprint: Annotated[str, StringConstraints(max_length=64)] = ""
    silenceURL: Short = ""
    dashboardURL: Short = ""
    panelURL: Short = ""
    imageURL: Short = ""
    embeddedImage: str = ""  # bounded by the body's 1 MiB; not stored
    ruleUID: Short = ""
    values: dict[Key, Any] | None = None
    valueString: Long = ""
    orgId: int | None = None
    enrichments: Any = None  # Grafana's alert enrichments: not stored


class GrafanaPayload(AmPayload):
    """Grafana's webhook contact point payload (version "1"; docs: webhook notifier)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    version: Literal["1"]  # type: ignore[assignment]
    alerts: Annotated[list[GrafanaAlert], Field(max_length=MAX_ALERTS)]  # type: ignore[assignment]
    orgId: int | None = None
    appVersion: Short = ""
    title: Long = ""
    state: Short = ""
    message: Long = ""


@dataclass(frozen=True)
class Item:
    """One alert, normalised."""

    fingerprint: str
    status: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    generator_url: str
    starts_at: datetime | None
    ends_at: datetime | None


@dataclass(frozen=True)
class Batch:
    """One notification, normalised: its group, status and alerts."""

    group_key: str
    status: str
    truncated: int
    items: tuple[Item, ...]


def _time(value: str) -> datetime | None:
    """RFC 3339 (Go's zero time 0001-01-01 and "" mean unset)."""
    if not value or value.startswith("0001-01-01"):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            format_lazy(_("Not an RFC 3339 time: {value!r}."), value=value[:40]),
            code="invalid_time",
        ) from None
    if when.tzinfo is None:
        raise InvalidInput(_("A time must carry its zone."), code="invalid_time")
    return when


def _fingerprint(labels: dict[str, str]) -> str:
    """A fingerprint from the labels when the sender gave none (Grafana before 9.x)."""
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]


def _why(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "payload"
    return f"{where}: {first.get('msg', 'invalid')}"[:300]


def _nulls_as_empty(data: dict[str, Any]) -> dict[str, Any]:
    """Grafana (Go) sends an empty map as null in places: read it as {}."""
    out = {k: ({} if v is None and k in _MAPS else v) for k, v in data.items()}
    if isinstance(out.get("alerts"), list):
        out["alerts"] = [
            {k: ({} if v is None and k in _MAPS else v) for k, v in a.items()}
            if isinstance(a, dict)
            else a
            for a in out["alerts"]
        ]
    return out


_MAPS = {"labels", "annotations", "groupLabels", "commonLabels", "commonAnnotations"}


def parse(kind: str, data: dict[str, Any]) -> Batch:
    """The notification in `data` from a source of `kind`, or invalid_payload (nothing read)."""
    model = GrafanaPayload if kind == "grafana" else AmPayload
    if kind == "grafana":
        data = _nulls_as_empty(data)
    try:
        payload = model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(
            format_lazy(_("The payload does not match the schema: {why}"), why=_why(exc)),
            code="invalid_payload",
        ) from None
    items = []
    seen: set[str] = set()
    for alert in payload.alerts:
        fingerprint = alert.fingerprint or _fingerprint(dict(alert.labels))
        if fingerprint in seen:  # one notification names an alert once; keep the first
            continue
        seen.add(fingerprint)
        items.append(
            Item(
                fingerprint=fingerprint,
                status=alert.status,
                name=alert.labels.get("alertname", "")[:200],
                labels=dict(alert.labels),
                annotations=dict(alert.annotations),
                generator_url=alert.generatorURL,
                starts_at=_time(alert.startsAt),
                ends_at=_time(alert.endsAt),
            )
        )
    return Batch(
        group_key=payload.groupKey,
        status=payload.status,
        truncated=payload.truncatedAlerts,
        items=tuple(items),
    )
