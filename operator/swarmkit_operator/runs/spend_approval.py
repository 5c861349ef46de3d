"""``approve_spend``: an agent clears the budget holds of the Runs its Run started.

The seed documents give the permission ``approve_spend`` the meaning "clear a budget hold".
Here it means: an agent whose Agent grants ``approve_spend`` may let the Runs its own Run
started (the Runs its ``schedule`` and ``agent_message`` effects created, labelled
``swarmkit.dev/effect-of=<parent uid>`` by the operator) start past a SpendQuota with
``onExhausted: hold``. Nothing else: not a Run a person created, not another Run's child.

The runner never talks to the API. Its ``approve_spend`` builtin records an effect (kind
``approve_spend``, ``to`` = the child Run); the operator, the one writer, checks it when
it materializes the parent's effects (:func:`materialize`):

* the agent is one of the parent Run's own agents (its ``agentRef``, or a node of its
  Topology) and its Agent grants ``approve_spend`` (inline or through its permission bundle);
* the target is a Run this very Run created: a ``Materialized`` ``schedule`` or
  ``agent_message`` entry of the parent's ``status.effects`` names it, and the Run carries
  the parent's uid in ``swarmkit.dev/effect-of``.

Passing, the effect is ``Materialized`` (object ``Run/<child>``: the approval is recorded
in the parent's status, which only the operator writes) with a ``SpendApproved`` Event;
refused, it is ``Failed`` with the reason and a ``Warning`` ``EffectFailed`` Event.

The child's budget gate (:mod:`.budget`) looks for that record whenever its hold's Review
is undecided (:func:`approver`), so the order does not matter: the approval may be recorded
before the child is even held. It then takes the Review up as decided, ``decidedBy``
``agent:<namespace>/<agent>`` (the Review's ``status``: the operator never writes a
Review's ``spec.decision``, which the admission policy ties to the authenticated user),
and the Run is reserved past the limit (``held: true``) like a person's approval.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from swarmkit_api.agent import AgentSpec
from swarmkit_api.effects import EFFECT_RUN_LABEL, Effect, RunEffect
from swarmkit_api.workspace import WorkspaceSpec

from .. import k8s
from ..builders.bundle import agent_permissions
from ..indexes import one
from .model import RunView
from .state import RunState

log = logging.getLogger("swarmkit_operator.spend")

PERMISSION = "approve_spend"
#: The effects that create a Run: the Runs a Run "started".
_STARTING = frozenset({"schedule", "agent_message"})


# --- pure rules (unit-tested) ----------------------------------------------------------------


def decider(namespace: str, agent: str) -> str:
    """How a Review records an agent's approval: ``agent:<namespace>/<agent>``."""
    return f"agent:{namespace}/{agent}"


def run_agent(
    spec: Mapping[str, Any], topology: Mapping[str, Any] | None, agent: str
) -> str | None:
    """The Agent object behind ``agent`` (a name in the Run's bundle), when it is one of the
    Run's own agents: its ``agentRef``, or a node of its Topology (by node or Agent name)."""
    ref = (spec.get("agentRef") or {}).get("name")
    if ref:
        return str(ref) if ref == agent else None
    for node in ((topology or {}).get("spec") or {}).get("agents") or ():
        target = (node.get("agentRef") or {}).get("name")
        if target and agent in (node.get("name"), target):
            return str(target)
    return None


def started_runs(entries: Iterable[Mapping[str, Any]]) -> set[str]:
    """The Run names a Run's ``status.effects`` entries say it created."""
    out: set[str] = set()
    for entry in entries:
        obj = str(entry.get("object") or "")
        materialized = entry.get("kind") in _STARTING and entry.get("state") == "Materialized"
        if materialized and obj.startswith("Run/"):
            out.add(obj[len("Run/") :])
    return out


def refusal(
    *,
    run_name: str,
    run_uid: str,
    agent: str,
    agent_object: str | None,
    permissions: Sequence[str] | None,
    target: str,
    target_labels: Mapping[str, str] | None,
    started: set[str],
) -> str | None:
    """Why the approval of ``target`` by ``agent`` of Run ``run_name`` is refused (None: it
    is not). ``permissions`` None: the Agent object is gone; ``target_labels`` None: no
    Run of that name exists."""
    if agent_object is None:
        return f"agent {agent} is not an agent of Run {run_name}"
    if permissions is None:
        return f"Agent {agent_object} no longer exists"
    if PERMISSION not in permissions:
        return f"Agent {agent_object} does not hold the {PERMISSION} permission"
    if not target:
        return "no Run named"
    if target_labels is None:
        return f"Run {target} does not exist"
    if target not in started or target_labels.get(EFFECT_RUN_LABEL) != run_uid:
        return (
            f"Run {target} was not started by Run {run_name} (only the Runs its schedule and "
            "agent_message effects created)"
        )
    return None


def approval_in(
    entries: Iterable[Mapping[str, Any]], child: str, child_uid: str
) -> Mapping[str, Any] | None:
    """The parent's materialized ``approve_spend`` entry for this very Run (its name and
    uid: a Run deleted and created again under the name is not approved), if any."""
    for entry in entries:
        if (
            entry.get("kind") == PERMISSION
            and entry.get("state") == "Materialized"
            and entry.get("object") == f"Run/{child}"
            and entry.get("uid") == child_uid
        ):
            return entry
    return None


# --- the operator side -----------------------------------------------------------------------


async def materialize(
    st: RunState, run: RunView, effect: Effect, base: RunEffect, earlier: Sequence[RunEffect]
) -> RunEffect:
    """Check an ``approve_spend`` effect of ``run`` and record it (see the module doc)."""
    spec = run.spec
    topo_name = (spec.get("topologyRef") or {}).get("name")
    topology = one(st.idx.topologies, (run.namespace, topo_name)) if topo_name else None
    agent_object = run_agent(spec, topology, effect.agent)
    permissions = await _permissions(st, run.namespace, agent_object) if agent_object else None
    target = await k8s.get_custom("runs", run.namespace, effect.to) if effect.to else None
    entries = [*(run.status.get("effects") or ()), *(e.wire() for e in earlier)]
    why = refusal(
        run_name=run.name,
        run_uid=run.uid,
        agent=effect.agent,
        agent_object=agent_object,
        permissions=permissions,
        target=effect.to,
        target_labels=((target or {}).get("metadata") or {}).get("labels") or {}
        if target is not None
        else None,
        started=started_runs(entries),
    )
    if why is not None:
        message = f"approve_spend of Run {effect.to or '?'} refused: {why}"
        log.warning("run %s/%s: effect %d: %s", run.namespace, run.name, effect.seq, message)
        await k8s.post_event(
            run.involved,
            "Warning",
            "EffectFailed",
            f"effect {effect.seq} ({effect.kind}): {message}",
        )
        return base.model_copy(update={"state": "Failed", "message": message})
    who = decider(run.namespace, agent_object or effect.agent)
    text = (
        f"effect {effect.seq} (approve_spend by {effect.agent}): {who} lets Run {effect.to} "
        "start past a SpendQuota that holds it"
    )
    if not any(e.get("seq") == effect.seq and e.get("state") == "Materialized" for e in entries):
        await k8s.post_event(run.involved, "Normal", "SpendApproved", text)
    log.info("run %s/%s: %s", run.namespace, run.name, text)
    uid = str(((target or {}).get("metadata") or {}).get("uid") or "") or None
    return base.model_copy(
        update={"state": "Materialized", "object": f"Run/{effect.to}", "uid": uid}
    )


async def _permissions(st: RunState, namespace: str, agent: str) -> list[str] | None:
    body = await k8s.get_custom("agents", namespace, agent)
    if body is None:
        return None
    try:
        spec = AgentSpec.model_validate(body.get("spec") or {})
        ws = one(st.idx.workspaces, (namespace, spec.workspace_name))
        workspace = WorkspaceSpec.model_validate((ws or {}).get("spec") or {})
    except ValidationError:
        return []  # an invalid Agent or Workspace grants nothing
    return agent_permissions(spec, workspace)


def approver(st: RunState, run: RunView) -> tuple[str, str] | None:
    """(decidedBy, parent Run) when the Run that started ``run`` recorded an
    ``approve_spend`` of it; None otherwise."""
    parent_uid = run.labels.get(EFFECT_RUN_LABEL)
    if not parent_uid:
        return None
    parent = st.run_view(parent_uid)
    if parent is None or parent.namespace != run.namespace:
        return None
    entry = approval_in(parent.status.get("effects") or (), run.name, run.uid)
    if entry is None:
        return None
    spec = parent.spec
    topo_name = (spec.get("topologyRef") or {}).get("name")
    topology = one(st.idx.topologies, (parent.namespace, topo_name)) if topo_name else None
    agent = run_agent(spec, topology, str(entry.get("agent") or "")) or str(entry.get("agent"))
    return decider(run.namespace, agent), parent.name


__all__ = [
    "PERMISSION",
    "approval_in",
    "approver",
    "decider",
    "materialize",
    "refusal",
    "run_agent",
    "started_runs",
]
