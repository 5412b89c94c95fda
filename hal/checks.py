"""System checks for HAL's deployment invariants."""

from __future__ import annotations

from django.core.checks import register  # noqa: F401  (other apps register their checks)
