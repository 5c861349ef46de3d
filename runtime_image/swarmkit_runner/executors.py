"""The executor of every implementation type, registered with :mod:`.skills`."""

from __future__ import annotations

from .agents import agent_executor
from .commands import command_executor
from .composed import composed_executor
from .llm import llm_prompt_executor
from .skills import mcp_tool_executor, register_executor


def register_all() -> None:
    """Register ``mcp_tool``, ``llm_prompt``, ``composed``, ``command`` and ``agent``."""
    register_executor("mcp_tool", mcp_tool_executor)
    register_executor("llm_prompt", llm_prompt_executor)
    register_executor("composed", composed_executor)
    register_executor("command", command_executor)
    register_executor("agent", agent_executor)
