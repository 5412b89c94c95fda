"""Routes of the runbooks app: the page and the JSON API (docs/API.md)."""

from django.urls import path

from runbooks import views

app_name = "runbooks"

urlpatterns = [
    path("runbooks/", views.runbooks_page, name="list"),
    path("runbooks/<int:runbook_id>/", views.runbook_page, name="detail"),
    path("api/runbooks", views.api_runbooks, name="api_list"),
    path("api/runbooks/<int:runbook_id>", views.api_runbook, name="api_detail"),
    path("api/runbooks/<int:runbook_id>/archive", views.api_runbook_archive, name="api_archive"),
]
