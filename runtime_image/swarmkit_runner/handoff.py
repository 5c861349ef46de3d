"""What one agent hands another: the task text of an ``agent`` skill call.

Shared by local child runs (:mod:`.agents`) and remote A2A agents (:mod:`.a2a`); it lives
below both so neither imports the other for it.
"""

from __future__ import annotations

import json
from typing import Any

#: The arguments of an ``agent`` skill without declared ``inputs``.
AGENT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "The task for the other agent."},
        "context": {"type": "string", "description": "Optional background for it."},
    },
    "required": ["input"],
}


def task_text(args: dict[str, Any]) -> str:
    """The task the other agent gets from the call's arguments."""
    if "input" in args and set(args) <= {"input", "context"}:
        text = str(args.get("input") or "")
        context = args.get("context")
        if isinstance(context, str) and context.strip():
            text += f"\n\nContext:\n{context}"
        return text
    return json.dumps(args, ensure_ascii=False)
