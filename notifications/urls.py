"""Routes of the notifications app: the page and the JSON API (docs/notifications.md)."""

from django.urls import path

from notifications import views

app_name = "notifications"

urlpatterns = [
    path("notifications/", views.page, name="page"),
    path("api/notifications", views.api_overview, name="api"),
    path("api/notifications/channels", views.api_channels, name="api_channels"),
    path("api/notifications/channels/<int:channel_id>", views.api_channel, name="api_channel"),
    path(
        "api/notifications/channels/<int:channel_id>/verify",
        views.api_verify,
        name="api_verify",
    ),
    path("api/notifications/channels/<int:channel_id>/code", views.api_send_code, name="api_code"),
    path("api/notifications/preferences", views.api_preferences, name="api_preferences"),
]
