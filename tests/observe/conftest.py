"""HAL observed: the chat-room fixtures (fake models behind real connections) and a reader
of this process's metrics."""

from __future__ import annotations

from prometheus_client import REGISTRY

from tests.chatrooms.conftest import *  # noqa: F403


def sample(name: str, **labels: str) -> float:
    """The current value of one sample of this process's registry (0 when absent)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0
