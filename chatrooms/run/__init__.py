"""Running model turns in the web process, one module per job (docs/architecture.md).

`chatrooms.orchestrator` is the public path (`get_orchestrator()` and the names it had);
bottom to top: config, prompt, framing, recovery, turn, scheduling.
"""
