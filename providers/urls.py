"""Routes of the AI connections API, the /ops/ai screen and the OAuth callback."""

from django.urls import path

from providers import views, views_budgets

app_name = "providers"

urlpatterns = [
    path("ops/ai", views.ops_ai, name="ops_ai"),
    path("ops/ai/oauth/callback", views.oauth_callback, name="oauth_callback"),
    path("api/ai/connections", views.connections, name="api_connections"),
    path("api/ai/connections/<int:pk>", views.connection, name="api_connection"),
    path("api/ai/connections/<int:pk>/secret", views.connection_secret, name="api_secret"),
    path("api/ai/connections/<int:pk>/verify", views.connection_verify, name="api_verify"),
    path("api/ai/connections/<int:pk>/disable", views.connection_disable, name="api_disable"),
    path("api/ai/connections/<int:pk>/enable", views.connection_enable, name="api_enable"),
    path(
        "api/ai/connections/<int:pk>/budget",
        views_budgets.connection_budget,
        name="api_budget",
    ),
    path(
        "api/ai/connections/<int:pk>/redaction",
        views.connection_redaction,
        name="api_redaction",
    ),
    path("api/ai/connections/<int:pk>/prices", views_budgets.connection_price, name="api_prices"),
    path(
        "api/ai/connections/<int:pk>/oauth/start",
        views.connection_oauth_start,
        name="api_oauth_start",
    ),
]
