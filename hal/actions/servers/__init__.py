"""Server actions: register, approve, maintenance, isolate, delete; agent enrolment and heartbeats.

Views, AI tools and commands call the `check_*` functions only, through this package.
records < lifecycle, agents, heartbeats.
"""

from hal.actions.servers.agents import (
    authenticate_agent,
    check_create_enrolment_token,
    check_enrol_agent,
    check_issue_agent_token,
    check_revoke_agent_tokens,
)
from hal.actions.servers.heartbeats import (
    check_record_heartbeat,
    clean_metrics,
    do_touch_agent_token,
    live_servers,
)
from hal.actions.servers.lifecycle import (
    check_approve_server,
    check_delete_server,
    check_isolate_server,
    check_register_server,
    check_set_maintenance,
    do_approve_server,
    do_register_server,
)
from hal.actions.servers.records import (
    ENROLMENT_TTL_DEFAULT,
    clean_hostname,
    resolve_server,
)

__all__ = [
    "ENROLMENT_TTL_DEFAULT",
    "authenticate_agent",
    "check_approve_server",
    "check_create_enrolment_token",
    "check_delete_server",
    "check_enrol_agent",
    "check_isolate_server",
    "check_issue_agent_token",
    "check_record_heartbeat",
    "check_register_server",
    "check_revoke_agent_tokens",
    "check_set_maintenance",
    "clean_hostname",
    "clean_metrics",
    "do_approve_server",
    "do_register_server",
    "do_touch_agent_token",
    "live_servers",
    "resolve_server",
]
