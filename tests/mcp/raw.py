"""The raw MCP requests the HTTP tests post without a client library."""

from __future__ import annotations

import json

# An `initialize` request as a client's first POST to /mcp: the message, and its body.
INITIALIZE_MESSAGE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
INITIALIZE = json.dumps(INITIALIZE_MESSAGE).encode()
