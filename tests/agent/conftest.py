"""Agent fixtures: reuse the fleet fixtures (actors, artifacts, local HTTP server, seeds)."""

from tests.fleet.conftest import http_server, make_artifact, op  # noqa: F401
