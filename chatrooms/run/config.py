"""The chat run's settings (read at each use) and the reasons it gives when a turn fails."""

from __future__ import annotations

from django.conf import settings

from chatrooms import actions

ERROR_REASONS = actions.PROVIDER_FAILURE_REASONS  # translatable, defined with the rest
INTERNAL_REASON = "HAL could not finish this reply."  # a msgid of actions.FAILURE_REASONS


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def frame_seconds() -> float:
    return _setting("HAL_CHAT_FRAME_MS", 40) / 1000.0


def max_tool_rounds() -> int:
    return int(_setting("HAL_CHAT_MAX_TOOL_ROUNDS", 4))


def history_limit() -> int:
    return int(_setting("HAL_CHAT_HISTORY_MESSAGES", 50))


def turn_timeout() -> float:
    return _setting("HAL_CHAT_TURN_TIMEOUT", 300)
