"""Routes of the ops domain (ops): pages and JSON API; included by hal/urls.py."""

from django.urls import path

from hal.views import ops

urlpatterns: list = [
    path("incidents/", ops.incidents_page, name="incidents"),
    path("incidents/<int:incident_id>/", ops.incident_detail_page, name="incident_detail"),
    path("settings/", ops.settings_page, name="settings"),
    path("dr/", ops.dr_page, name="dr"),
    path("mail/", ops.mail_page, name="mail"),
    path("emergency/", ops.emergency_page, name="emergency"),
    path("changes/", ops.changes_page, name="changes"),
    path("metrics/", ops.metrics_page, name="metrics"),
    path("api/overview", ops.api_overview, name="api_overview"),
    path("api/counters", ops.api_counters, name="api_counters"),
    path("api/metrics", ops.api_metrics, name="api_metrics"),
    path("api/incidents", ops.api_incidents, name="api_incidents"),
    path("api/incidents/<int:incident_id>", ops.api_incident, name="api_incident"),
    path("api/incidents/<int:incident_id>/notes", ops.api_incident_note, name="api_incident_notes"),
    path(
        "api/incidents/<int:incident_id>/close", ops.api_incident_close, name="api_incident_close"
    ),
    path(
        "api/incidents/<int:incident_id>/escalate",
        ops.api_incident_escalate,
        name="api_incident_escalate",
    ),
    path(
        "api/incidents/<int:incident_id>/reopen",
        ops.api_incident_reopen,
        name="api_incident_reopen",
    ),
    path("api/settings", ops.api_settings, name="api_settings"),
    path("api/settings/<str:name>", ops.api_setting, name="api_setting"),
    path("api/dr", ops.api_dr, name="api_dr"),
    path("api/dr/snapshots", ops.api_dr_snapshots, name="api_dr_snapshots"),
    path("api/mail", ops.api_mail, name="api_mail"),
    path("api/mail/check", ops.api_mail_check, name="api_mail_check"),
    path("api/emergency", ops.api_emergency, name="api_emergency"),
    path("api/emergency/enter", ops.api_emergency_enter, name="api_emergency_enter"),
    path("api/emergency/leave", ops.api_emergency_leave, name="api_emergency_leave"),
    path("api/changes", ops.api_changes, name="api_changes"),
]

# AI proposals (hal/views/proposals.py): the approvals page and the API of SPEC §10.
from hal.views import proposals as proposal_views  # noqa: E402

urlpatterns += [
    path("proposals/", proposal_views.proposals_page, name="proposals"),
    path("api/ai/proposals", proposal_views.api_list, name="api_proposals"),
    path("api/ai/proposals/<int:proposal_id>", proposal_views.api_detail, name="api_proposal"),
    path(
        "api/ai/proposals/<int:proposal_id>/confirm",
        proposal_views.api_confirm,
        name="api_proposal_confirm",
    ),
    path(
        "api/ai/proposals/<int:proposal_id>/approve",
        proposal_views.api_approve,
        name="api_proposal_approve",
    ),
    path(
        "api/ai/proposals/<int:proposal_id>/reject",
        proposal_views.api_reject,
        name="api_proposal_reject",
    ),
]
