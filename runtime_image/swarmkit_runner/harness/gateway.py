"""The governed MCP gateway inside a harness node's pod: the Agent's catalog for one Run.

The same gateway that serves an Agent to harnesses outside the cluster
(:class:`..gateway.Gateway`: listing, ``agent__<skill>`` names, refusal of any unlisted name,
the pipeline of every call, the audit) bound to the Run instead of a Deployment: one session
over the Run's own context, so every call counts in the Run's steps, tool calls, spend and
audit stream (with the Run's correlation id), child Runs of agent skills are the Run's
children, and the MCP servers are the Run's (started and closed by the Run). Its one token
is random per node and lives only in the harness's MCP config.

The harness's own built-in tools, when the node switches them on, are a second session
over the same context, never listed over MCP: its pre-tool-use hook asks
:meth:`RunGateway.decide_builtin` (through :mod:`.hooks`), which governs a use exactly as a
call (grant, tier, audit, journal, Review) and answers whether the harness may run it.

A call that would end the Run (a ``strict`` tier without approval, an escalation, a limit)
is answered as a tool error and ends the node (:attr:`RunGateway.ended`, :attr:`stop`): the
Run parks for the Review as a model node's does. Each call is a journal effect keyed by its
content (``<node>.<sha of tool and arguments>.<n-th such call>``), not by its order: a resumed
harness re-runs its conversation, and when it makes the parked call again the decision
applies to it (approve runs it, reject answers the reviewer's reason, answer is its result);
calls it makes again that already ran return their recorded result instead of running twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING, Any

from ..catalog import ToolCatalog, ToolEntry
from ..errors import RunEnded
from ..gateway import Gateway, Session, listed_name
from ..toolset import agent_catalog

if TYPE_CHECKING:
    from collections.abc import Iterable

    import mcp_types

    from swarmkit_api.bundle import BundleAgent

    from ..context import RunContext


class _NotRecorded(Exception):
    """A call that ended the node: its answer goes to the harness, not into the journal."""

    def __init__(self, result: mcp_types.CallToolResult) -> None:
        super().__init__("not recorded")
        self.result = result


class RunGateway(Gateway):
    """:class:`..gateway.Gateway` over a running Run's context (one session, one token)."""

    def __init__(
        self,
        ctx: RunContext,
        agent: BundleAgent,
        token: str,
        node: str,
        builtins: Iterable[ToolEntry] = (),
    ) -> None:
        # Not Gateway.__init__: no gateway bundle, no MCP servers of its own, no Review API.
        self.bundle = ctx.bundle
        self.agent = agent
        self.paths = ctx.paths
        self.audit = ctx.audit
        self.secrets = ctx.secrets
        self.root = ctx
        self.sessions = OrderedDict()
        self.ready = False
        self.failed = None
        self._tokens = [("harness", token)]
        catalog, _skills, _prompt = agent_catalog(ctx, agent)
        tools: dict[str, ToolEntry] = {listed_name(e, self.bundle): e for e in catalog.entries()}
        self._session = Session(
            "run", "harness", ctx.bundle.run.correlation_id, ctx, catalog, tools
        )
        # The harness's own built-ins, asked through its hook (:mod:`.hooks`): a session of
        # their own over the same context, never listed over MCP.
        builtin_catalog = ToolCatalog(agent.name, ctx.audit, ctx.stats)
        for entry in builtins:
            builtin_catalog.add(entry)
        self._builtins = Session(
            "run",
            "harness-hook",
            ctx.bundle.run.correlation_id,
            ctx,
            builtin_catalog,
            {e.name: e for e in builtin_catalog.entries()},
        )
        self.node = node
        #: What ended the node from a call (a park for a Review, a limit), if anything.
        self.ended: RunEnded | None = None
        #: Set when :attr:`ended` is: the driver stops the harness.
        self.stop = asyncio.Event()
        self._seen: Counter[str] = Counter()

    @property
    def tool_names(self) -> list[str]:
        return sorted(self._session.tools)

    def call_key(self, name: str, arguments: dict[str, Any] | None) -> str:
        """The journal key of this call (see the module docstring)."""
        text = json.dumps([name, arguments or {}], sort_keys=True, default=str)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        n = self._seen[digest]
        self._seen[digest] += 1
        return f"h.{self.node}.{digest}.{n}"

    async def call_tool(
        self, session: Session, name: str, arguments: dict[str, Any] | None
    ) -> mcp_types.CallToolResult:
        import mcp_types

        if self.ended is not None:  # the node is ending: nothing more runs
            text = f"{self.ended.outcome}: {self.ended.message}"
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(type="text", text=text)], is_error=True
            )

        async def live() -> mcp_types.CallToolResult:
            result = await Gateway.call_tool(self, session, name, arguments)
            if self.ended is not None:
                raise _NotRecorded(result)  # a parked call is decided on resume, not replayed
            return result

        with self.root.journal.keyed(self.call_key(name, arguments)):
            try:
                return await self.root.journal.effect(
                    "tool",
                    live,
                    lambda r: r.model_dump(mode="json", by_alias=True, exclude_none=True),
                    mcp_types.CallToolResult.model_validate,
                )
            except _NotRecorded as exc:
                return exc.result

    async def decide_builtin(
        self, tool: str, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult:
        """One use of the harness's built-in ``tool``, governed like a call (an error result:
        refused, or the node is ending)."""
        return await self.call_tool(self._builtins, tool, arguments)

    def run_ended(self, exc: RunEnded) -> None:
        if self.ended is None:
            self.ended = exc
        self.stop.set()

    async def start(self) -> None:
        self.ready = True

    def session(self, session_id: str, identity: str, client: str | None = None) -> Session:
        """Every MCP session of the harness is the Run's one session."""
        return self._session

    async def aclose(self) -> None:
        """The Run owns its MCP servers and context: nothing to close here."""


__all__ = ["RunGateway"]
