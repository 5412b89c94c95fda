"""Write tools: each becomes a proposal that runs the web UI's own check_* once approved."""

from __future__ import annotations

from typing import Annotated, Literal

from django.utils.translation import gettext_noop
from pydantic import Field, StringConstraints

from hal import i18n

# Importing the action modules registers their high-risk actions with the confirmation.
from hal.actions import dr, emergency, incidents, incidents_escalate, jobs, mail, releases, servers
from hal.tools.defs.base import (
    Hostname,
    IncidentId,
    ModuleName,
    NoArgs,
    Reason,
    Required500,
    ServerRef,
    define_write,
    hints,
)
from hal.tools.defs.reads import JobArgs, ServerArgs
from hal.tools.registry import ToolArgs


class RegisterServerArgs(ToolArgs):
    hostname: Hostname
    description: Reason = ""


class MaintenanceArgs(ToolArgs):
    server: ServerRef
    enabled: bool = Field(description="true = enter maintenance, false = leave it.")
    reason: Reason = ""


class OpenIncidentArgs(ToolArgs):
    severity: Literal["sev1", "sev2", "sev3", "sev4"]
    title: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    description: Annotated[str, StringConstraints(max_length=5000)] = ""
    servers: Annotated[list[Hostname], Field(max_length=20)] = []
    modules: Annotated[list[ModuleName], Field(max_length=20)] = []


class CloseIncidentArgs(ToolArgs):
    incident_id: IncidentId
    resolution: Annotated[str, StringConstraints(min_length=1, max_length=5000)]


class AnnotateIncidentArgs(ToolArgs):
    incident_id: IncidentId
    text: Annotated[str, StringConstraints(min_length=1, max_length=5000)]


class EscalateIncidentArgs(ToolArgs):
    incident_id: IncidentId
    reason: Required500


class ReopenIncidentArgs(ToolArgs):
    incident_id: IncidentId
    reason: Required500


class ModuleHealthArgs(ToolArgs):
    module: ModuleName
    server: ServerRef | None = Field(
        None, description="Run it on this server's agent; omit to check from HAL."
    )


class RestartModuleArgs(ToolArgs):
    module: ModuleName
    server: ServerRef
    reason: Reason = ""


class ReasonArgs(ToolArgs):
    reason: Required500


class OptionalReasonArgs(ToolArgs):
    reason: Reason = ""


define_write(
    "register_server",
    "Register a new server by hostname (it starts pending until approved).",
    RegisterServerArgs,
    lambda actor, a: servers.check_register_server(
        actor=actor, hostname=a["hostname"], description=a.get("description", "")
    ),
    summarize=lambda a: i18n.text(
        gettext_noop("Register server {hostname} (pending until approved)."), hostname=a["hostname"]
    ),
    target=lambda a: a["hostname"],
    action="servers.register",
    hints=hints(destructive=False, idempotent=False),
)
define_write(
    "approve_server",
    "Approve a pending server so its agent receives jobs.",
    ServerArgs,
    lambda actor, a: servers.check_approve_server(actor=actor, server=a["server"]),
    summarize=lambda a: i18n.text(
        gettext_noop("Approve pending server {server}."), server=a["server"]
    ),
    target=lambda a: a["server"],
    action="servers.approve",
    hints=hints(destructive=False, idempotent=True),
)
define_write(
    "set_server_maintenance",
    "Put an active server into maintenance (enabled=true) or bring it back (enabled=false).",
    MaintenanceArgs,
    lambda actor, a: servers.check_set_maintenance(
        actor=actor, server=a["server"], enabled=a["enabled"], reason=a.get("reason", "")
    ),
    summarize=lambda a: i18n.text(
        gettext_noop("Start maintenance of server {server}.")
        if a["enabled"]
        else gettext_noop("End maintenance of server {server}."),
        server=a["server"],
    ),
    target=lambda a: a["server"],
    action="servers.maintenance",
    hints=hints(destructive=False, idempotent=True),
)
define_write(
    "open_incident",
    "Open an incident with a severity (sev1 worst … sev4), title and affected servers/modules.",
    OpenIncidentArgs,
    lambda actor, a: incidents.check_open_incident(
        actor=actor,
        severity=a["severity"],
        title=a["title"],
        description=a.get("description", ""),
        servers=a.get("servers") or None,
        modules=a.get("modules") or None,
    ),
    summarize=lambda a: i18n.text(
        gettext_noop("Open a {severity} incident: {title}"),
        severity=a["severity"],
        title=a["title"],
    ),
    target=lambda a: a["title"],
    action="incidents.open",
    hints=hints(destructive=False, idempotent=False),
)
define_write(
    "close_incident",
    "Close an open incident with its resolution.",
    CloseIncidentArgs,
    lambda actor, a: incidents.check_close_incident(
        actor=actor, incident_id=a["incident_id"], resolution=a["resolution"]
    ),
    summarize=lambda a: i18n.text(gettext_noop("Close incident INC-{id}."), id=a["incident_id"]),
    target=lambda a: f"INC-{a['incident_id']}",
    action="incidents.close",
    hints=hints(destructive=False, idempotent=True),
)
define_write(
    "annotate_incident",
    "Add a note to an open incident's timeline.",
    AnnotateIncidentArgs,
    lambda actor, a: incidents.check_annotate_incident(
        actor=actor, incident_id=a["incident_id"], text=a["text"]
    ),
    summarize=lambda a: i18n.text(
        gettext_noop("Add a note to incident INC-{id}."), id=a["incident_id"]
    ),
    target=lambda a: f"INC-{a['incident_id']}",
    action="incidents.annotate",
    hints=hints(destructive=False, idempotent=False),
)
define_write(
    "escalate_incident",
    "Escalate an open incident one severity step (sev4→sev3→sev2→sev1), with the reason.",
    EscalateIncidentArgs,
    lambda actor, a: incidents_escalate.check_escalate_incident(
        actor=actor, incident_id=a["incident_id"], reason=a["reason"]
    ),
    summarize=lambda a: i18n.text(
        gettext_noop("Escalate incident INC-{id} one severity step."), id=a["incident_id"]
    ),
    target=lambda a: f"INC-{a['incident_id']}",
    action="incidents.escalate",
    hints=hints(destructive=False, idempotent=False),
)
define_write(
    "reopen_incident",
    "Reopen a closed incident.",
    ReopenIncidentArgs,
    lambda actor, a: incidents.check_reopen_incident(
        actor=actor, incident_id=a["incident_id"], reason=a["reason"]
    ),
    summarize=lambda a: i18n.text(gettext_noop("Reopen incident INC-{id}."), id=a["incident_id"]),
    target=lambda a: f"INC-{a['incident_id']}",
    action="incidents.reopen",
    hints=hints(destructive=False, idempotent=True),
)
# The summary msgids are spelled out so that makemessages extracts each one.
for _verb, _fn, _what, _summary in (
    (
        "cancel",
        jobs.check_cancel_job,
        "Cancel a queued job (a running job must be stopped).",
        gettext_noop("Cancel job #{job}."),
    ),
    (
        "retry",
        jobs.check_retry_job,
        "Retry a failed, cancelled or stopped job as a new job.",
        gettext_noop("Retry job #{job}."),
    ),
    (
        "resume",
        jobs.check_resume_job,
        "Put a stopped job back in the queue.",
        gettext_noop("Resume job #{job}."),
    ),
    ("stop", jobs.check_stop_job, "Ask a running job to stop.", gettext_noop("Stop job #{job}.")),
):
    define_write(
        f"{_verb}_job",
        _what,
        JobArgs,
        (lambda fn: lambda actor, a: fn(actor=actor, job=a["job"]))(_fn),
        summarize=(lambda msgid: lambda a: i18n.text(msgid, job=a["job"]))(_summary),
        target=lambda a: f"job-{a['job']}",
        action=f"jobs.{_verb}",
        # cancel/stop end work in flight; retry queues a new job each time.
        hints=hints(destructive=_verb in ("cancel", "stop"), idempotent=_verb != "retry"),
    )
define_write(
    "check_module_health",
    "Run a module's configured health check (on a server's agent, or from HAL).",
    ModuleHealthArgs,
    lambda actor, a: releases.check_module_health(
        actor=actor, module=a["module"], server=a.get("server")
    ),
    summarize=lambda a: (
        i18n.text(
            gettext_noop("Health-check {module} on {server}."),
            module=a["module"],
            server=a["server"],
        )
        if a.get("server")
        else i18n.text(gettext_noop("Health-check {module} from HAL."), module=a["module"])
    ),
    target=lambda a: a["module"],
    action="modules.health_check",
    hints=hints(destructive=False, idempotent=False),
)
define_write(
    "restart_module",
    "Restart a module on a server with its administrator-configured command.",
    RestartModuleArgs,
    lambda actor, a: releases.check_restart_module(
        actor=actor, module=a["module"], server=a["server"], reason=a.get("reason", "")
    ),
    summarize=lambda a: i18n.text(
        gettext_noop("Restart {module} on {server}."), module=a["module"], server=a["server"]
    ),
    target=lambda a: f"{a['module']} on {a['server']}",
    action="modules.restart",
    hints=hints(destructive=True, idempotent=False),
)
define_write(
    "take_dr_snapshot",
    "Take a DR snapshot (database backup with a checksum manifest) now.",
    NoArgs,
    lambda actor, a: dr.check_snapshot_now(actor=actor),
    summarize=lambda a: i18n.text(gettext_noop("Take a DR snapshot now.")),
    target=lambda a: "dr",
    action="dr.snapshot",
    hints=hints(destructive=False, idempotent=False),
)
define_write(
    "check_mail_relay",
    "Check the configured SMTP relay now (connect, banner, EHLO) and record the result.",
    NoArgs,
    lambda actor, a: mail.check_mail_now(actor=actor),
    summarize=lambda a: i18n.text(gettext_noop("Check the SMTP relay now.")),
    target=lambda a: "mail",
    action="mail.check",
    hints=hints(destructive=False, idempotent=False, open_world=True),
)
define_write(
    "enter_emergency_mode",
    "Enter emergency-recovery mode (a banner on every screen) with a reason.",
    ReasonArgs,
    lambda actor, a: emergency.check_enter_emergency(actor=actor, reason=a["reason"]),
    summarize=lambda a: i18n.text(gettext_noop("Enter emergency-recovery mode.")),
    target=lambda a: "emergency",
    action="emergency.enter",
    hints=hints(destructive=False, idempotent=True),
)
define_write(
    "leave_emergency_mode",
    "Leave emergency-recovery mode.",
    OptionalReasonArgs,
    lambda actor, a: emergency.check_leave_emergency(actor=actor, reason=a.get("reason", "")),
    summarize=lambda a: i18n.text(gettext_noop("Leave emergency-recovery mode.")),
    target=lambda a: "emergency",
    action="emergency.leave",
    hints=hints(destructive=False, idempotent=True),
)
