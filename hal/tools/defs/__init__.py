"""HAL's built-in tools: every console capability of SPEC §4, declared once.

Read tools call the permission-filtered queries; write and high-risk tools call the
very `check_*` functions the web UI calls (but only after an operator approved the
proposal; see hal.actions.proposals). No tool takes a shell command, a file path or
a free network target: servers, modules, releases, jobs and settings are referenced
by identifiers that the actions resolve against HAL's own records.

Importing this package registers them, in this order (the order the tool lists show):
reads, writes, high-risk. HalConfig.ready() hands its import to the registry as a loader.
"""

# isort: skip_file  (the registration order is the order of the tool lists: keep it)
import importlib

# Imported one by one, in this order, because the registration order is the order of the
# tool lists a model sees (an import statement would be re-sorted by the linter).
for _part in ("reads", "writes", "high_risk"):
    importlib.import_module(f"hal.tools.defs.{_part}")
