"""HAL's core models; the ops-domain models live in sibling modules."""

from hal.models.audit import AuditEntry
from hal.models.confirmation import Confirmation
from hal.models.oidc import OidcIdentity, OidcSession
from hal.models.operators import OperatorProfile
from hal.models.worker import WorkerHeartbeat

__all__ = [
    "AuditEntry",
    "Confirmation",
    "OidcIdentity",
    "OidcSession",
    "OperatorProfile",
    "WorkerHeartbeat",
]

from hal.models.fleet import (
    AgentToken,
    EnrolmentToken,
    Job,
    JobLogLine,
    Module,
    ModuleDeployment,
    Release,
    Server,
    ServerMetric,
)

__all__ += [
    "AgentToken",
    "EnrolmentToken",
    "Job",
    "JobLogLine",
    "Module",
    "ModuleDeployment",
    "Release",
    "Server",
    "ServerMetric",
]

from hal.models.ops import (  # noqa: E402
    EmergencyState,
    Incident,
    IncidentEvent,
    MailCheck,
    Setting,
    SettingChange,
    Snapshot,
)

__all__ += [
    "EmergencyState",
    "Incident",
    "IncidentEvent",
    "MailCheck",
    "Setting",
    "SettingChange",
    "Snapshot",
]

from hal.models.proposals import Proposal  # noqa: E402

__all__ += ["Proposal"]

from hal.models.mcp_tokens import McpToken  # noqa: E402

__all__ += ["McpToken"]

from hal.models.mcp_oauth import (  # noqa: E402
    McpOAuthClient,
    McpOAuthCode,
    McpOAuthGrant,
    McpOAuthToken,
)

__all__ += ["McpOAuthClient", "McpOAuthCode", "McpOAuthGrant", "McpOAuthToken"]
