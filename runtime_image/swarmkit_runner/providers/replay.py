"""The replay provider: scripted turns from the Agent spec, no HTTP.

Turns are played in order, one per model call (text and tool calls). When they run out the
agent ends with the last text the script contained. Tool names are written as the agent
sees them (``pg.list_tables``, ``load_skill``, ``delegate_to_worker``). A turn reports the
``usage`` it scripts (zero when it has none), so spend can be tested without a paid API.
"""

from __future__ import annotations

from swarmkit_api.agent import ReplayTurn

from .base import ModelRequest, ModelResponse, ToolCall, Usage


class ReplayProvider:
    type = "replay"

    def __init__(self, name: str, turns: list[ReplayTurn]) -> None:
        self.name = name
        self.model = "replay"
        self._turns = list(turns)
        self._next = 0
        self._last_text = ""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self._next >= len(self._turns):
            return ModelResponse(self._last_text, [], Usage(), "end_turn")
        turn = self._turns[self._next]
        step = self._next
        self._next += 1
        if turn.text is not None:
            self._last_text = turn.text
        calls = [
            ToolCall(id=f"replay-{step}-{n}", name=c.name, arguments=dict(c.arguments))
            for n, c in enumerate(turn.tool_calls)
        ]
        u = turn.usage
        usage = Usage(u.input_tokens, u.output_tokens, u.cached_input_tokens) if u else Usage()
        return ModelResponse(turn.text or "", calls, usage, "tool_use" if calls else "end_turn")

    def skip(self) -> None:
        """A recorded turn was replayed from the run's journal: move past it."""
        if self._next < len(self._turns):
            turn = self._turns[self._next]
            if turn.text is not None:
                self._last_text = turn.text
            self._next += 1

    async def aclose(self) -> None:
        return None


def skip_turn(provider: object) -> None:
    """Keep a replay provider's script in step with a turn served from the journal."""
    if isinstance(provider, ReplayProvider):
        provider.skip()
