"""URL routes of webfetch: the /ops/web page and the budgets API (webfetch.urls is the
module that finds URLs in messages, so the routes live here)."""

from django.urls import path

from webfetch import views

app_name = "webfetch"

urlpatterns = [
    path("ops/web", views.web_page, name="web"),
    path("api/ai/budgets", views.budgets_api, name="api_budgets"),
    path("api/ai/budgets/<int:connection_id>", views.budget_limit_api, name="api_budget_limit"),
]
