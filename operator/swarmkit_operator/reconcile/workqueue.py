"""The reconcile controller's keys and their lanes, on the operator's one work-queue type
(:class:`~swarmkit_operator.runtime.workqueue.WorkQueue`)."""

from __future__ import annotations

from .. import metrics
from ..runtime.workqueue import WorkQueue

Key = tuple[str, str, str]  # (kind, namespace, name)
# Inputs before their dependents (a workspace before the agents using it, ...), so a burst
# settles bottom-up; garbage collection last, once the renders it must keep are known.
# A Skill's grantedBy (SkillGrants) ranks with the Skills.
PRIORITY = {
    "Workspace": 0,
    "Skill": 1,
    "SkillGrants": 1,
    "Agent": 2,
    "Funnel": 2,  # before the Topologies that name it
    "Topology": 3,
    "GC": 4,
}


def reconcile_queue() -> WorkQueue[Key]:
    """The reconcile work queue: a lane per kind (:data:`PRIORITY`), its depth a metric."""
    return WorkQueue(
        lane=lambda key: PRIORITY[key[0]],
        lanes=max(PRIORITY.values()) + 1,
        depth=metrics.QUEUE_DEPTH.set,
    )


__all__ = ["PRIORITY", "Key", "WorkQueue", "reconcile_queue"]
