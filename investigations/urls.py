"""Routes of the investigations app: the incident room page and the JSON API."""

from django.urls import path

from investigations import views

app_name = "investigations"

urlpatterns = [
    path("incidents/<int:incident_id>/room/", views.incident_room_page, name="room"),
    path(
        "incidents/<int:incident_id>/investigation",
        views.incident_investigation_form,
        name="form",
    ),
    path(
        "api/incidents/<int:incident_id>/investigations",
        views.api_investigations,
        name="api_list",
    ),
    path(
        "api/incidents/<int:incident_id>/room/export",
        views.api_room_export,
        name="api_room_export",
    ),
    path(
        "api/investigations/<int:investigation_id>/stop",
        views.api_stop,
        name="api_stop",
    ),
]
