"""Routes of the MCP access page and its API (the /mcp endpoint itself is ASGI: hal/asgi.py)."""

from django.urls import path

from hal.views import mcp_access

urlpatterns: list = [
    path("mcp-access/", mcp_access.mcp_access_page, name="mcp_access"),
    path("api/mcp/tokens", mcp_access.api_mcp_tokens, name="api_mcp_tokens"),
    path(
        "api/mcp/tokens/<int:token_id>/revoke",
        mcp_access.api_mcp_token_revoke,
        name="api_mcp_token_revoke",
    ),
]
