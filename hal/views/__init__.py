"""The console's front ends: pages and JSON API views with their routes (`fleet/urls.py`,
`ops/urls.py`), the template context, the status labels and proposal-card strings, and the
Django admin site whose every change runs a `check_*` action.

Imports every room below it (`queries`, `actions`, `mcp` for the MCP access page …); only
the wiring (hal/urls.py, hal/apps.py), `templatetags` and `hal/admin.py` import it.
"""
