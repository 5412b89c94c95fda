"""HAL's MCP server: the stdio server over the tool registry (`server`), Streamable HTTP at
/mcp (`http`), the OAuth authorization server its clients sign in with (`oauth`), where
this process's own /mcp is (`address`) and the secretless start-up of the stdio process
(`secretless`).

Imports the tools, actions, models and the core; nothing imports it but the ASGI wiring,
the `mcp` management command, the vault's secretless hook and the OAuth views.
"""
