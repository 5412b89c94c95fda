"""Vault test helpers: actors and a clean keyring cache per test."""

from __future__ import annotations

import pytest

from hal.actions.base import Actor
from vault import keyring


@pytest.fixture(autouse=True)
def _fresh_keyring_cache():
    keyring.reset_cache()
    yield
    keyring.reset_cache()


@pytest.fixture
def actor(operator):
    """The operator acting from the web console."""
    return Actor(user=operator, via="web")
