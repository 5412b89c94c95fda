"""HAL's core models; the ops-domain models live in sibling modules."""

from hal.models.audit import AuditEntry
from hal.models.confirmation import Confirmation
from hal.models.operators import OperatorProfile
from hal.models.worker import WorkerHeartbeat

__all__ = ["AuditEntry", "Confirmation", "OperatorProfile", "WorkerHeartbeat"]
