"""HAL's management commands (`manage.py hal_worker`, `mcp`, `dr_snapshot`, `dr_restore`,
`hal_bootstrap`, `hal_local_agent`): front ends like the views, they change state only
through `actions`."""
