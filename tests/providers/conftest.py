"""Provider tests use the wire-true fakes."""

from tests.fakes.fixtures import *  # noqa: F403
