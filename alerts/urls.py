"""Routes of the alerts app: the receivers, the sources' page and JSON API (docs/alerts.md)."""

from django.urls import path

from alerts import views

app_name = "alerts"

urlpatterns = [
    path("api/alerts/alertmanager", views.alertmanager, name="alertmanager"),
    path("api/alerts/grafana", views.grafana, name="grafana"),
    path("api/alerts/sources", views.api_sources, name="api_sources"),
    path("api/alerts/sources/<int:source_id>", views.api_source, name="api_source"),
    path("alerts/", views.page, name="page"),
]
