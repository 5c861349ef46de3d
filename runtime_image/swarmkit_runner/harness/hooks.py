"""The runner's decision point for a harness's own built-in tools (its pre-tool-use hook).

With ``harness.builtinTools: true`` a harness's built-ins the Agent's ``nativeTools`` switch
on are offered to its model (Claude Code's Read/Edit/Write/Bash…), and before each use the
harness runs its pre-tool-use hook (:mod:`.hook_cli`), which asks here. Each built-in is a
catalog entry of kind ``native`` behind a :class:`..permissions.Gate`: one layer, the node's
``builtinToolsPermission`` tier, and the effects of its class
(:data:`swarmkit_api.harness.NATIVE_EFFECTS`: reading ``read``, edits ``write``, a shell
``unknown``). A use is then one call of that entry through the in-pod gateway's own call
path (:meth:`.gateway.RunGateway.call_tool`), so it gets what any tool call gets:

* the grant: a built-in this node did not switch on is refused (``ToolNotGranted``);
* the tier (:func:`..permissions.guard`): ``open``/``cautious`` allow, ``readonly`` refuses
  anything that is not a read (``ReadOnlyTier``), ``strict`` asks a person: the Run parks
  for an ``approval`` Review (:func:`..pipeline.approval`), the harness is stopped, and on
  resume the same use (same tool and input) gets the decision;
* a read-only Run (a funnel's reviewer, ``spec.readOnly``) refuses every non-read use;
* the audit line (``tool.call`` or ``tool.refused``, with tier and effects), the
  ``execute_tool`` span, the Run's tool-call count, and a journal effect keyed by content.

The harness runs the tool itself once allowed: the decision point never runs it. An
``allow`` is the hook's ``permissionDecision: allow``; anything else is a ``deny`` whose
reason the model reads.
"""

from __future__ import annotations

import hmac
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from swarmkit_api.common import PermissionTier
from swarmkit_api.harness import NATIVE_EFFECTS

from ..catalog import ToolEntry
from ..errors import ToolRefused
from ..permissions import Gate, Layer, guard
from ..pipeline import approval
from . import hook_cli
from .base import NativeGrant, NativeToolNames

if TYPE_CHECKING:
    import mcp_types
    from starlette.applications import Starlette

    from swarmkit_api.bundle import BundleAgent

    from ..context import RunContext
    from .gateway import RunGateway

#: Where the decision point listens on its loopback port.
HOOK_PATH: Final = "/hook"
#: What an allowed use's call returns (the tool.call line's output; the harness runs it).
ALLOWED: Final = "allowed: the harness runs it"
#: The largest hook input read (a Write's content is in it).
MAX_HOOK_BODY: Final = 4 * 1024 * 1024


def hook_command() -> tuple[str, ...]:
    """argv of :mod:`.hook_cli`: this interpreter, isolated, running the file."""
    return (sys.executable, "-I", str(Path(hook_cli.__file__).resolve()))


def builtin_entries(
    ctx: RunContext,
    agent: BundleAgent,
    names: NativeToolNames,
    native: NativeGrant,
    tier: PermissionTier,
) -> list[ToolEntry]:
    """One ``native`` entry per built-in ``native`` switches on, behind the node's tier."""
    entries: list[ToolEntry] = []
    for tool in names.granted(native):
        klass = names.class_of(tool)
        assert klass is not None  # granted() lists only named tools
        gate = Gate(
            layers=(
                Layer(
                    f"built-in tool {tool} (harness.builtinToolsPermission)",
                    tier,
                    approve_hint="a reviewer approves this use's Review",
                ),
            ),
            effects=NATIVE_EFFECTS[klass],
        )

        async def allowed(args: dict[str, Any]) -> str:
            return ALLOWED

        async def approve(
            refused: ToolRefused, args: dict[str, Any], tool: str = tool
        ) -> str | None:
            answered = await approval(ctx, agent, refused, tool, args)
            # A reviewer's answer cannot stand in for a built-in's result (the harness runs
            # it): the use is denied with the reviewer's text.
            if answered is not None:
                raise ToolRefused(f"a reviewer answered instead: {answered}", "ApprovalAnswered")
            return None

        description = f"{klass} built-in of the harness (its own tool, asked through its hook)"
        handler = guard(agent, gate, allowed, approve)
        entries.append(ToolEntry(tool, description, {}, "native", handler, gate=gate))
    return entries


def answer(result: mcp_types.CallToolResult) -> dict[str, Any]:
    """The hook's output for a governed call's result (an error: deny, with its text)."""
    text = "".join(getattr(block, "text", "") for block in result.content)
    allowed = not result.is_error
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow" if allowed else "deny",
            "permissionDecisionReason": (
                "allowed by the runner's governance" if allowed else text[:2000]
            ),
        }
    }


def hook_app(gateway: RunGateway, token: str) -> Starlette:
    """POST :data:`HOOK_PATH`: a hook input in, the decision out (bearer ``token``)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def decide(request: Request) -> Response:
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), token.encode()):
            gateway.audit.emit(
                "auth.refused", agent=gateway.agent.name, reason="hook token", outcome="refused"
            )
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        body = await request.body()
        try:
            hook = json.loads(body) if len(body) <= MAX_HOOK_BODY else None
        except ValueError:
            hook = None
        if not isinstance(hook, dict) or not isinstance(hook.get("tool_name"), str):
            return JSONResponse({"error": "a PreToolUse hook input is expected"}, 400)
        tool_input = hook.get("tool_input")
        args = tool_input if isinstance(tool_input, dict) else {"input": tool_input}
        result = await gateway.decide_builtin(hook["tool_name"], args)
        return JSONResponse(answer(result))

    return Starlette(routes=[Route(HOOK_PATH, decide, methods=["POST"])])


__all__ = ["ALLOWED", "HOOK_PATH", "answer", "builtin_entries", "hook_app", "hook_command"]
