"""``read_flow_data(path)``: read-only reference files listed in the agent's flowDataAccess.

The agent may open exactly the listed files (Workspace ``flowData`` entries): inline content
from the bundle, or the file mounted under the bundle's ``flowDataDir``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swarmkit_api.bundle import BundleAgent

from .catalog import ToolEntry
from .context import RunContext
from .errors import ToolError
from .native import confined

MAX_FLOW_DATA_BYTES = 1024 * 1024


def flow_data_tool(ctx: RunContext, agent: BundleAgent) -> ToolEntry | None:
    allowed = list(agent.spec.flow_data_access)
    if not allowed:
        return None
    files = {f.path: f for f in ctx.bundle.workspace.flow_data}
    for path in allowed:
        if path not in files:
            ctx.warn_once(
                f"flow:{agent.name}:{path}",
                f"agent {agent.name} lists flow data {path!r}, which the workspace does not "
                "declare",
                agent=agent.name,
            )

    async def read_flow_data(args: dict[str, Any]) -> str:
        path = str(args.get("path", ""))
        if path not in allowed or path not in files:
            raise ToolError(
                f"{path!r} is not in this agent's flowDataAccess (allowed: {', '.join(allowed)})",
                "NotAllowed",
            )
        entry = files[path]
        if entry.content is not None:
            return entry.content
        if ctx.bundle.flow_data_dir is None:
            raise ToolError(f"{path!r} is not mounted", "FileNotFound")
        target = confined(Path(ctx.bundle.flow_data_dir), path)
        if not target.is_file():
            raise ToolError(f"{path!r} is not mounted", "FileNotFound")
        data = target.read_bytes()[:MAX_FLOW_DATA_BYTES]
        return data.decode("utf-8", errors="replace")

    schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "enum": allowed}},
        "required": ["path"],
        "additionalProperties": False,
    }
    return ToolEntry(
        "read_flow_data",
        "Read one of the flow's read-only reference files.",
        schema,
        "flow_data",
        read_flow_data,
    )
