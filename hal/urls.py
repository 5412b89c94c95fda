"""URL routes of the console: pages, the JSON API, admin, and each app's routes."""

from django.contrib import admin
from django.urls import include, path

from hal.views import auth as auth_views
from hal.views import confirmations, health, mcp_access, mcp_oauth, metrics, oidc, pages
from hal.views.fleet.urls import urlpatterns as fleet_patterns
from hal.views.ops.urls import urlpatterns as ops_patterns

app_name = "hal"

hal_patterns = [
    path("", pages.overview, name="overview"),
    path("login/", auth_views.login_page, name="login"),
    path("logout/", auth_views.logout_page, name="logout"),
    path("reauth/", auth_views.reauth_page, name="reauth"),
    path("oidc/login/<slug:provider>/", oidc.oidc_login, name="oidc_login"),
    path("oidc/callback/<slug:provider>/", oidc.oidc_callback, name="oidc_callback"),
    path("oidc/reauth/", oidc.oidc_reauth, name="oidc_reauth"),
    path("oidc/reauth/done/", oidc.oidc_reauth_done, name="oidc_reauth_done"),
    path("language/", auth_views.set_language, name="language"),
    path("audit/", pages.audit_list, name="audit"),
    path("api/health", health.health, name="api_health"),
    path("metrics", metrics.metrics, name="metrics"),
    path("api/metrics/token", metrics.api_metrics_token, name="api_metrics_token"),
    path("api/auth/reauth", auth_views.api_reauth, name="api_reauth"),
    path("api/audit", pages.api_audit, name="api_audit"),
    path("api/confirmations", confirmations.start, name="api_confirmations"),
    path("api/confirmations/<str:token>/target", confirmations.target, name="api_confirm_target"),
    path(
        "api/confirmations/<str:token>/execute", confirmations.execute, name="api_confirm_execute"
    ),
    # The MCP access page and its API (the /mcp endpoint itself is ASGI: hal/asgi.py).
    path("mcp-access/", mcp_access.mcp_access_page, name="mcp_access"),
    path("api/mcp/tokens", mcp_access.api_mcp_tokens, name="api_mcp_tokens"),
    path(
        "api/mcp/tokens/<int:token_id>/revoke",
        mcp_access.api_mcp_token_revoke,
        name="api_mcp_token_revoke",
    ),
    # OAuth for /mcp (hal/mcp/oauth.py): metadata, registration, consent, tokens.
    path(
        ".well-known/oauth-protected-resource",
        mcp_oauth.protected_resource,
        name="oauth_protected_resource",
    ),
    path(
        ".well-known/oauth-protected-resource/mcp",
        mcp_oauth.protected_resource,
        name="oauth_protected_resource_mcp",
    ),
    path(
        ".well-known/oauth-authorization-server",
        mcp_oauth.authorization_server,
        name="oauth_authorization_server",
    ),
    path("oauth/authorize", mcp_oauth.authorize, name="oauth_authorize"),
    path("oauth/token", mcp_oauth.token, name="oauth_token"),
    path("oauth/register", mcp_oauth.register, name="oauth_register"),
    path("oauth/revoke", mcp_oauth.revoke, name="oauth_revoke"),
]

hal_patterns += fleet_patterns + ops_patterns

urlpatterns = [
    # The chat's routes first: Django tries patterns in order, and a chat send is the
    # request that waits on everything before the model is asked. No route of another
    # app matches a chat path, so the order changes no resolution.
    path("", include("chatrooms.urls")),
    path("", include((hal_patterns, "hal"))),
    path("", include("providers.urls")),
    path("", include("webfetch.routes")),
    path("", include("runbooks.urls")),
    path("", include("investigations.urls")),
    path("", include("notifications.urls")),
    path("", include("alerts.urls")),
    path("admin/", admin.site.urls),
]

# An address that does not exist: the console's own page (or the API's JSON error), and
# `/page/` sent to `/page` when only that exists (hal/views/errors.py).
handler404 = "hal.views.errors.not_found"
