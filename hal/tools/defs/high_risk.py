"""High-risk tools: proposals that also need the operator's re-authenticated confirmation."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

# Importing the action modules registers their high-risk actions with the confirmation.
from hal.actions import settings as settings_actions
from hal.tools.defs.base import (
    ModuleName,
    Reason,
    ReleaseRef,
    Required500,
    ServerRef,
    SettingName,
    define_high_risk,
    hints,
)
from hal.tools.defs.reads import JobArgs
from hal.tools.registry import ToolArgs


class ServerReasonArgs(ToolArgs):
    server: ServerRef
    reason: Required500


class DeployArgs(ToolArgs):
    release: ReleaseRef
    server: ServerRef


class ModuleServerArgs(ToolArgs):
    module: ModuleName
    server: ServerRef


class ModuleArgs(ToolArgs):
    module: ModuleName


class ReleaseArgs(ToolArgs):
    release: ReleaseRef


class ChangeSettingArgs(ToolArgs):
    name: SettingName
    value: (
        bool
        | Annotated[int, Field(ge=-(2**53), le=2**53)]
        | Annotated[str, StringConstraints(max_length=500)]
    ) = Field(description="The new value (its type must match the setting).")
    reason: Reason | None = None


define_high_risk(
    "isolate_server",
    "Isolate a server: no more jobs; queued jobs cancelled, running jobs asked to stop.",
    ServerReasonArgs,
    "servers.isolate",
    hints(destructive=True, idempotent=True),
)
define_high_risk(
    "delete_server",
    "Delete a server from the fleet (history kept); revokes its agent tokens.",
    ServerReasonArgs,
    "servers.delete",
    hints(destructive=True, idempotent=True),
)
define_high_risk(
    "deploy_release",
    "Deploy an approved release (module@version) to a server (queues a deploy job).",
    DeployArgs,
    "releases.deploy",
    hints(destructive=True, idempotent=False),
)
define_high_risk(
    "rollback_module",
    "Roll a module on a server back to its previous release (queues a rollback job).",
    ModuleServerArgs,
    "modules.rollback",
    hints(destructive=True, idempotent=False),
)
define_high_risk(
    "reconcile_module",
    "Bring every server of a module to its desired release (one deploy per drifted server).",
    ModuleArgs,
    "modules.reconcile",
    hints(destructive=True, idempotent=True),
)
define_high_risk(
    "approve_release",
    "Approve a draft release for deployment (its artifact's sha256 is verified first).",
    ReleaseArgs,
    "releases.approve",
    hints(destructive=False, idempotent=True),
)
define_high_risk(
    "revert_job",
    "Undo a succeeded deploy/rollback job by rolling back to the release it replaced.",
    JobArgs,
    "jobs.revert",
    hints(destructive=True, idempotent=False),
)
define_high_risk(
    "change_setting",
    "Change a console setting (see list_settings for names, types and bounds).",
    ChangeSettingArgs,
    settings_actions.CHANGE_CODE,
    hints(destructive=True, idempotent=True),
)
