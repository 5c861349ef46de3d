"""Platform builtin tools, each gated by the permission of the same name.

``agent_message`` and ``mailbox_send`` need no permission. This runtime has no mailbox or
scheduler attached: messages are recorded in the audit stream (``mailbox.send``) and
acknowledged; ``human_task_*`` and ``schedule`` answer with a clear ``NotSupported`` tool error.
"""

from __future__ import annotations

from typing import Any

from swarmkit_api.bundle import BundleAgent
from swarmkit_api.workspace import PLATFORM_BUILTINS

from .catalog import ToolEntry, as_text
from .context import RunContext
from .errors import ToolError

_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "Recipient (agent or mailbox)."},
        "message": {"type": "string"},
    },
    "required": ["to", "message"],
}
_GENERIC_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
_DESCRIPTIONS = {
    "agent_message": "Send a message to another agent.",
    "mailbox_send": "Put a message in a mailbox.",
    "human_task_request": "Open a task for a human and wait for the result.",
    "human_task_decide": "Record a human's decision on a task.",
    "schedule": "Schedule a future timer event.",
}


def is_builtin(name: str) -> bool:
    return name in PLATFORM_BUILTINS


def builtin_tool(ctx: RunContext, agent: BundleAgent, name: str) -> ToolEntry | None:
    """The builtin ``name`` if the agent holds its permission (None otherwise, warned)."""
    permission = PLATFORM_BUILTINS[name]
    if permission is not None and permission not in agent.permissions:
        ctx.warn_once(
            f"builtin:{agent.name}:{name}",
            f"agent {agent.name} lists {name} but lacks the {permission!r} permission; "
            "the tool is not offered",
            agent=agent.name,
            tool=name,
        )
        return None
    if name in ("agent_message", "mailbox_send"):

        async def send(args: dict[str, Any]) -> str:
            ctx.audit.emit(
                "mailbox.send",
                agent=agent.name,
                tool=name,
                to=str(args.get("to", "")),
                message=str(args.get("message", "")),
                outcome="recorded",
            )
            return as_text({"status": "recorded", "note": "recorded in the run's audit stream"})

        return ToolEntry(name, _DESCRIPTIONS[name], _MESSAGE_SCHEMA, "builtin", send)

    async def unsupported(args: dict[str, Any]) -> str:
        raise ToolError(f"{name} is not supported by this runtime yet", "NotSupported")

    return ToolEntry(name, _DESCRIPTIONS[name], _GENERIC_SCHEMA, "builtin", unsupported)
