"""Label values are bounded (issue 47): after a scripted conversation every label value
of the registry is from a fixed set or a configured connection/model name; a family that
labels by an id or by user input fails."""

from __future__ import annotations

import platform

import pytest
from django.urls import get_resolver
from prometheus_client import REGISTRY, CollectorRegistry, Counter

from chatrooms.run.observed import ERROR_TYPES, OUTCOMES
from hal.models.proposals import Proposal
from investigations.models import Investigation
from notifications.models import Channel, Delivery
from providers.models import AIConnection
from reviews.models import ProposalReview
from tests.fakes.script import Reply
from webfetch.metrics import FAILURE_REASONS

from .conftest import room_for, send

_major, _minor, _patch = platform.python_version_tuple()
PYTHON_INFO = {
    "implementation": platform.python_implementation(),
    "major": _major,
    "minor": _minor,
    "patchlevel": _patch,
    "version": platform.python_version(),
}


async def test_a_conversation_leaves_only_bounded_labels(models, aclient, orchestrator):
    before = snapshot()
    for model in models:
        room_id = await room_for(aclient, model.id)
        model.fake.replies.push(Reply(text="fine words", input_tokens=5, output_tokens=3))
        await send(aclient, room_id, "a question with an id 4711 and text")
    models[1].fake.fail_next(500)
    await send(aclient, await room_for(aclient, models[1].id), "fails")
    await orchestrator.wait_idle()
    await aclient.get("/api/ai/rooms/987654/messages")  # an id in a path
    await aclient.get("/not/a/route/with-user-input")
    await aclient.get("/metrics")  # the database's gauges too
    from asgiref.sync import sync_to_async

    await sync_to_async(assert_labels_bounded)(REGISTRY, before)


@pytest.mark.django_db
def test_a_label_from_an_id_fails_the_check():
    registry = CollectorRegistry()
    Counter("bad_rooms", "by id", ["route"], registry=registry).labels("room/987654").inc()
    with pytest.raises(AssertionError, match="unbounded"):
        assert_labels_bounded(registry)
    other = CollectorRegistry()
    Counter("bad_text", "by text", ["message"], registry=other).labels("hello").inc()
    with pytest.raises(AssertionError, match="no bounded set"):
        assert_labels_bounded(other)


def route_names() -> set[str]:
    """Every named route of the URLconf, namespaced as resolver_match.view_name is."""
    names: set[str] = set()

    def walk(resolver, prefix: str) -> None:
        for pattern in resolver.url_patterns:
            if hasattr(pattern, "url_patterns"):
                ns = pattern.namespace
                walk(pattern, f"{prefix}{ns}:" if ns else prefix)
            elif pattern.name:
                names.add(prefix + pattern.name)

    walk(get_resolver(), "")
    return names


def snapshot(registry: CollectorRegistry = REGISTRY) -> dict[tuple, float]:
    """Every sample of the registry now: (name, labels) → value."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in registry.collect()
        for s in family.samples
    }


def assert_labels_bounded(
    registry: CollectorRegistry = REGISTRY, since: dict[tuple, float] | None = None
) -> None:
    """Every label value in this process's registry comes from a fixed or configured set:
    a value taken from an id, a path, message text or user input fails here."""
    connections = list(AIConnection.objects.values_list("name", "model", "provider"))
    allowed = {
        "route": route_names() | {"unmatched"},
        "method": {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"},
        "path": {"/ws/ai/", "/ws/ops/"},
        "direction": {"in", "out", "input", "output"},
        "gen_ai_provider_name": {kind for kind, _l in AIConnection.PROVIDER_CHOICES} | {"unknown"},
        "gen_ai_request_model": {c[1] for c in connections} | {""},
        "gen_ai_operation_name": {"chat"},
        "gen_ai_token_type": {"input", "output"},
        "error_type": set(ERROR_TYPES) | {"other"},
        "connection": {c[0] for c in connections},
        "period": {"day", "month"},
        "outcome": set(OUTCOMES) | set(FAILURE_REASONS) | {"ok", "other"},
        "channel_kind": {kind for kind, _label in Channel.KIND_CHOICES},
        "state": {state for state, _label in Proposal.STATUS_CHOICES},
        "status": {str(code) for code in range(100, 600)}
        | {s for s, _l in Delivery.STATUS_CHOICES}
        | {s for s, _l in ProposalReview.STATUS_CHOICES}
        | {s for s, _l in Investigation.STATUS_CHOICES},
        # prometheus_client's own process and Python families.
        "generation": {"0", "1", "2"},
        **{k: {str(v)} for k, v in PYTHON_INFO.items()},
    }
    seen = 0
    for family in registry.collect():
        for s in family.samples:
            if since is not None and since.get((s.name, frozenset(s.labels.items()))) == s.value:
                # Unchanged since the test began: an earlier test's (its connections, with
                # their names, are gone from the database), not this conversation's.
                continue
            for label, value in s.labels.items():
                if label in ("le", "quantile"):
                    continue
                assert label in allowed, f"{s.name}: label {label!r} has no bounded set"
                assert value in allowed[label], f"{s.name}: {label}={value!r} is unbounded"
                seen += 1
    assert seen
