"""``agent`` skills: another topology of the workspace as a child run, or a remote A2A agent.

The tool the model sees takes ``{input, context?}`` (a remote skill also takes
``{task_id, answer}``, see :mod:`.a2a`) and returns the other agent's answer as text (a
decision skill's: its validated JSON).

**Local** (``implementation.topology``, and every ``topology-<name>`` skill a
``pack:workspace`` grant synthesizes: tier cautious, effects unknown): the topology's root
agent runs in-process as a *child run*: a fresh run id, ``parent_run_id`` the caller's
run, the same correlation id, its own audit stream (every line carries both ids, framed by
``run.start``/``run.end`` with ``kind: child``); the parent's MCP servers, model providers,
HTTP client and the run-wide budget (steps, tokens) are shared, never closed by the child.
The caller's stream gets one ``child_run`` line with the child's id and outcome. Depth is
capped at 3 nested topologies (``MAX_TOPOLOGY_DEPTH``; a Topology run is depth 1): a
deeper call is refused (``DepthExceeded``). ``timeoutS`` (and ``constraints.timeoutSeconds``)
bound the child run. A child run that fails (its own onFailure: fail, an agent's
outputSchema, a model API failure) is a failure of this call (the skill's onFailure
decides); a run-wide limit, an escalation or a cancellation inside it ends or parks the
whole run. A decision skill's ``outputs`` are enforced on the child root's answer, with the
problems sent back to that agent.

**Remote** (``implementation.cardUrl``): see :mod:`.a2a`.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from swarmkit_api.bundle import BundleAgent, BundleSkill
from swarmkit_api.topology import MAX_TOPOLOGY_DEPTH

from . import decision
from .context import AgentLoop, RunContext
from .errors import LimitExceeded, RunEnded, RunFailed, ToolError, ToolRefused
from .handoff import AGENT_INPUT_SCHEMA, task_text
from .position import AgentPosition
from .skills import SkillTool


async def run_child(
    ctx: RunContext,
    agent: BundleAgent,
    skill: BundleSkill,
    topology: str,
    task: str,
) -> str:
    """Run ``topology`` as a child run of ``ctx``'s run; returns its root's answer."""
    child = _start_child(ctx, agent, skill, topology)
    started = time.monotonic()
    outcome, message = "Succeeded", ""
    try:
        return await _child_answer(child, skill, task)
    except decision.OutputInvalid as exc:
        outcome, message = "Failed", str(exc)
        raise
    except LimitExceeded as exc:
        outcome, message = exc.outcome, exc.message
        raise
    except RunFailed as exc:  # the child failed; the caller's onFailure decides
        outcome, message = "Failed", exc.message
        raise ToolError(
            f"child run of topology {topology} failed: {exc.message}", "ChildRunFailed"
        ) from None
    except RunEnded as exc:
        outcome, message = exc.outcome, exc.message
        raise
    except BaseException as exc:
        outcome, message = "Cancelled", f"{type(exc).__name__}"
        raise
    finally:
        duration = round((time.monotonic() - started) * 1000, 1)
        child.ctx.audit.emit(
            "run.end", kind="child", outcome=outcome, message=message or None, duration_ms=duration
        )
        ctx.audit.emit(
            "child_run",
            agent=agent.name,
            skill=skill.name,
            topology=topology,
            child_run_id=child.run_id,
            depth=child.depth,
            duration_ms=duration,
            outcome=outcome,
        )


@dataclass(frozen=True)
class _Child:
    """A started child run: its context, id, depth, the topology root it runs and its loop."""

    ctx: RunContext
    run_id: str
    depth: int
    position: AgentPosition
    loop: AgentLoop


def _start_child(ctx: RunContext, agent: BundleAgent, skill: BundleSkill, topology: str) -> _Child:
    """The child run's context (refused past the depth limit), with its ``run.start``."""
    depth = ctx.topology_depth + 1
    if depth > MAX_TOPOLOGY_DEPTH:
        raise ToolRefused(
            f"running topology {topology} would nest {depth} topologies, over the limit of "
            f"{MAX_TOPOLOGY_DEPTH}",
            "DepthExceeded",
        )
    bundled = ctx.bundle.topologies.get(topology)
    if bundled is None:  # checked when the bundle is loaded
        raise ToolError(f"topology {topology} is not in the bundle", "TopologyNotFound")
    child_id = str(uuid.uuid4())
    child = ctx.child(child_id, topology)
    root_node = bundled.spec.root
    position = AgentPosition(ctx.bundle.agents[root_node.agent_ref.name], root_node, topology)
    child.audit.emit(
        "run.start",
        kind="child",
        target_kind="Topology",
        target=topology,
        version=bundled.version,
        agent=position.agent.name,
        skill=skill.name,
        caller=agent.name,
        depth=depth,
    )
    return _Child(child, child_id, depth, position, child.agent_loop())


async def _child_answer(child: _Child, skill: BundleSkill, task: str) -> str:
    """The child root's answer; a decision skill's outputs are enforced on it."""
    schema = decision.outputs_schema(skill)
    answer = await child.loop.run_agent(
        child.position,
        task,
        0,
        output_schema=schema,
        output_retries=decision.output_retries(skill),
        for_skill=skill.name if schema is not None else None,
    )
    if schema is not None:
        value, _ = decision.check(schema, answer)
        answer = decision.audit_valid(child.ctx, child.position.agent.name, skill.name, value, 1)
    return answer


def agent_executor(ctx: RunContext, agent: BundleAgent, skill: BundleSkill) -> SkillTool | None:
    impl = skill.spec.implementation
    assert impl is not None
    if impl.card_url is not None:
        from .a2a import remote_executor

        return remote_executor(ctx, agent, skill)
    topology = impl.topology or skill.synthesized_topology
    assert topology is not None

    async def call(args: dict[str, Any]) -> str:
        return await run_child(ctx, agent, skill, topology, task_text(args))

    schema = skill.spec.inputs.as_dict() if skill.spec.inputs is not None else AGENT_INPUT_SCHEMA
    return SkillTool(
        skill.spec.description,
        schema,
        call,
        validates_output=True,
        timeout_seconds=float(impl.timeout_s) if impl.timeout_s else None,
    )
