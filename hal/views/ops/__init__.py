"""Pages and JSON API of the ops domain: incidents, settings, DR, mail, emergency recovery,
change history, metrics. Views only translate HTTP to check_* calls and queries.

request < overview, incidents, console; the URLconf imports this package.
"""

from hal.views.ops.console import (
    api_changes,
    api_dr,
    api_dr_snapshots,
    api_emergency,
    api_emergency_enter,
    api_emergency_leave,
    api_mail,
    api_mail_check,
    api_setting,
    api_settings,
    changes_page,
    dr_page,
    emergency_page,
    mail_page,
    settings_page,
)
from hal.views.ops.incidents import (
    api_incident,
    api_incident_close,
    api_incident_escalate,
    api_incident_note,
    api_incident_reopen,
    api_incidents,
    incident_detail_page,
    incidents_page,
)
from hal.views.ops.overview import (
    CHART_SERIES,
    api_metrics,
    api_overview,
    metrics_page,
    overview_context,
    svg_chart,
)

__all__ = [
    "CHART_SERIES",
    "api_changes",
    "api_dr",
    "api_dr_snapshots",
    "api_emergency",
    "api_emergency_enter",
    "api_emergency_leave",
    "api_incident",
    "api_incident_close",
    "api_incident_escalate",
    "api_incident_note",
    "api_incident_reopen",
    "api_incidents",
    "api_mail",
    "api_mail_check",
    "api_metrics",
    "api_overview",
    "api_setting",
    "api_settings",
    "changes_page",
    "dr_page",
    "emergency_page",
    "incident_detail_page",
    "incidents_page",
    "mail_page",
    "metrics_page",
    "overview_context",
    "settings_page",
    "svg_chart",
]
