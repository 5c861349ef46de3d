"""Read-only runs of an agent: a funnel's reviewer, and a Run with ``spec.readOnly`` but no
recording to replay (:mod:`.replay` answers the calls of one that has), may call only
tools that read.

The operator already refuses a Topology whose funnel reviewer holds anything that is not
read-only (reason ``ReviewerNotReadOnly``); this is the runner's own check, so a grant that
slipped through (an edit after the Run pinned its bundle, a skill whose effects the
operator could not see) still cannot write while a reviewer runs. :func:`reviewer` marks
the reviewer's invocation (a context variable, so nested calls inside it, an agent skill's
child run included, are covered too) and :func:`check` raises ``ToolRefused`` with code
``ReviewerReadOnly`` for any other call; the catalog audits it as ``tool.refused`` and the
model reads it as a tool error.

A call reads when its gate's effects are ``read`` (:mod:`.permissions`: declared or the
runner's defaults; a ``readonly`` tier refuses the others itself), or it is one of the
ungated tools that only read (the skill disclosure tools, ``read_flow_data``,
``web_search``). Everything else (writes, ``unknown`` effects, native ``bash`` and
``file_io``, ``run_skill_script``, platform builtins, delegation) is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from .errors import ToolRefused
from .permissions import Gate

#: Ungated tools that can only read.
READ_TOOLS = frozenset({"load_skill", "read_skill_file", "read_flow_data", "web_search"})

#: What the current invocation reviews ("funnel <name>"), or None outside a reviewer.
_REVIEWING: ContextVar[str | None] = ContextVar("swarmkit_reviewing", default=None)


@contextlib.contextmanager
def reviewer(what: str) -> Iterator[None]:
    """Everything awaited inside runs read-only (``what`` is named in refusals)."""
    token = _REVIEWING.set(what)
    try:
        yield
    finally:
        _REVIEWING.reset(token)


def reads(name: str, gate: Gate | None) -> bool:
    """Whether a call of tool ``name`` (behind ``gate``, None: ungated) only reads."""
    if gate is not None:
        return gate.effects == "read"
    return name in READ_TOOLS


def check(agent: str, name: str, kind: str, gate: Gate | None) -> None:
    """Raise ToolRefused when a reviewer is running and tool ``name`` does not only read."""
    what = _REVIEWING.get()
    if what is None or reads(name, gate):
        return
    effects = f"effects {gate.effects}" if gate is not None else kind
    raise ToolRefused(
        f"agent {agent} runs read-only ({what}): {name} ({effects}) is not a read-only call",
        "ReviewerReadOnly",
    )


__all__ = ["READ_TOOLS", "check", "reads", "reviewer"]
