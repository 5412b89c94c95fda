"""The actions layer: the only code that changes state. check_* validates, do_* changes."""

from hal.actions.base import (
    Actor,
    action,
    record_audit,
    require_perm,
    require_recent,
)

__all__ = ["Actor", "action", "record_audit", "require_perm", "require_recent"]
