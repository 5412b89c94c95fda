"""Routes of the alerts app: the receivers, the sources' page and JSON API (docs/alerts.md)."""

from django.urls import path

from alerts import views, views_postmortem

app_name = "alerts"

urlpatterns = [
    path("api/alerts/alertmanager", views.alertmanager, name="alertmanager"),
    path("api/alerts/grafana", views.grafana, name="grafana"),
    path("api/alerts/sources", views.api_sources, name="api_sources"),
    path("api/alerts/sources/<int:source_id>", views.api_source, name="api_source"),
    path("alerts/", views.page, name="alert_sources"),
]

urlpatterns += [
    path(
        "api/incidents/<int:incident_id>/catch-up",
        views_postmortem.api_catch_up,
        name="api_catch_up",
    ),
    path(
        "api/incidents/<int:incident_id>/postmortem",
        views_postmortem.api_postmortem,
        name="api_postmortem",
    ),
    path(
        "api/incidents/<int:incident_id>/postmortem/publish",
        views_postmortem.api_publish,
        name="api_postmortem_publish",
    ),
    path("incidents/<int:incident_id>/postmortem.md", views_postmortem.export, name="export"),
    path(
        "incidents/<int:incident_id>/postmortem/",
        views_postmortem.page_action,
        name="postmortem_action",
    ),
]
