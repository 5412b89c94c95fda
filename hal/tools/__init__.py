"""AI tools: the registry, validation and dispatch, the skill document, the continuation hook.

Public API:
    run_tool_call(name, raw_args, *, actor, origin)  -> ToolOutcome
    register_tool(Tool(...)), get_tool(name), all_tools(tiers)
    anthropic_tools(), openai_tools(), tool_specs()
    skill_text()
    proposal_decided (signal, see hal.tools.continuation)
"""

from hal.tools.continuation import proposal_decided, tool_result_payload
from hal.tools.dispatch import Origin, ToolOutcome, run_tool_call
from hal.tools.registry import (
    HIGH_RISK,
    READ,
    WRITE,
    Tool,
    ToolArgs,
    all_tools,
    anthropic_tools,
    get_tool,
    openai_tools,
    register_tool,
    registry_version,
    tool_specs,
    unregister_tool,
)
from hal.tools.skill import skill_text

__all__ = [
    "HIGH_RISK",
    "READ",
    "WRITE",
    "Origin",
    "Tool",
    "ToolArgs",
    "ToolOutcome",
    "all_tools",
    "anthropic_tools",
    "get_tool",
    "openai_tools",
    "proposal_decided",
    "register_tool",
    "registry_version",
    "run_tool_call",
    "skill_text",
    "tool_result_payload",
    "tool_specs",
    "unregister_tool",
]
