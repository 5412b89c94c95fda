#!/usr/bin/env python
"""Django's command-line utility for HAL."""

import os
import sys


def main() -> None:
    """Run administrative tasks."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hal.settings")
    if sys.argv[1:2] == ["mcp"]:
        # HAL's MCP server runs read tools only: no secret key, no vault, whatever the
        # environment it was started with (docs/providers.md).
        os.environ["HAL_SECRETLESS"] = "1"
        for name in ("DJANGO_SECRET_KEY", "HAL_VAULT_KEYS", "HAL_VAULT_KEY_FILE"):
            os.environ.pop(name, None)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
