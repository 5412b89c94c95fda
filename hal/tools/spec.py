"""A tool as the providers send it: name, description, JSON schema, and its wire forms.

It lives with HAL's tools (the lowest layer that needs it: `Tool.spec()`), and the provider
adapters import it from here (also as `providers.base.ToolSpec`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from hal.live import fastjson


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: name, description and a JSON schema for its input."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})

    def to_anthropic(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }

    # The wire forms, built once per spec (the tool registry keeps its specs until the tool
    # set changes, so once per process and tool-set version). Read-only: they are handed to
    # the SDKs as a pre-built body part (`extra_body`), which skips the SDK's per-call walk
    # of every schema (about a fifth of a web process's CPU in an 8-model fan-out).
    @functools.cached_property
    def anthropic_wire(self) -> dict[str, Any]:
        return self.to_anthropic()

    @functools.cached_property
    def openai_wire(self) -> dict[str, Any]:
        return self.to_openai()

    @functools.cached_property
    def openai_json(self) -> bytes:
        """The OpenAI wire form as JSON bytes, encoded once (a part of every request body)."""
        return fastjson.dumpb(self.openai_wire)
