"""kopf wiring of the Runs controller (:mod:`swarmkit_operator.runs`).

Thin on purpose: the index functions keep small summaries of Runs, of the Jobs and pods
labelled with a Run's uid, and of Topologies, Agents, Skills and Workspaces
(:mod:`swarmkit_operator.runs.summaries`); the composition root (:mod:`.root`) builds the
:class:`~swarmkit_operator.runs.RunController` over those indexes; every watch event only
*kicks* the Run it concerns (or, for a change to a target kind, the Runs of the namespace
waiting for their target). What a reconcile does is in :mod:`swarmkit_operator.runs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..builders import job as jobs
from ..indexes import IndexId
from ..runs import Indexes, RunController, RunView, summaries
from ..runs.model import AGENTS, GROUP, RUNS, SKILLS, TOPOLOGIES, VERSION, WORKSPACES
from .common import PRESENT, App, index
from .events import on_event

# The indexes use the shared index machinery (swarmkit_operator.indexes: filled by a paged
# LIST at start-up, then kept current by the operator's own watch streams).


@index("runs", id=IndexId.RUNS_BY_UID, group=GROUP, version=VERSION)
def runs_by_uid(body: Mapping[str, Any], uid: str | None, **_: Any) -> dict[str, Any]:
    return {str(uid): summaries.run_summary(body)}


@index(
    "jobs",
    id=IndexId.RUNS_JOBS_BY_RUN,
    labels={jobs.RUN_UID_LABEL: PRESENT},
    group="batch",
    version="v1",
)
def runs_jobs_by_run(
    body: Mapping[str, Any], labels: Mapping[str, str], **_: Any
) -> dict[str, Any]:
    return {str(labels[jobs.RUN_UID_LABEL]): summaries.job_summary(body)}


@index("pods", id=IndexId.RUNS_PODS_BY_RUN, labels={jobs.RUN_UID_LABEL: PRESENT}, version="v1")
def runs_pods_by_run(
    body: Mapping[str, Any], labels: Mapping[str, str], **_: Any
) -> dict[str, Any]:
    return {str(labels[jobs.RUN_UID_LABEL]): summaries.pod_summary(body)}


@index(
    "reviews",
    id=IndexId.RUNS_REVIEWS_BY_RUN,
    labels={jobs.RUN_UID_LABEL: PRESENT},
    group=GROUP,
    version=VERSION,
)
def runs_reviews_by_run(
    body: Mapping[str, Any], labels: Mapping[str, str], **_: Any
) -> dict[str, Any]:
    return {str(labels[jobs.RUN_UID_LABEL]): summaries.review_summary(body)}


@index("spendquotas", id=IndexId.SPEND_QUOTAS, group=GROUP, version=VERSION, metadata_only=True)
def spend_quotas(namespace: str | None, name: str | None, **_: Any) -> dict[Any, Any]:
    """namespace → its SpendQuotas' names (the budget gate lists them fresh when any)."""
    return {namespace: name}


@index("topologies", id=IndexId.RUNS_TOPOLOGIES)
def runs_topologies(
    body: Mapping[str, Any], namespace: str | None, name: str | None, **_: Any
) -> dict[Any, Any]:
    return {(namespace, name): summaries.topology_summary(body)}


@index("agents", id=IndexId.RUNS_AGENTS)
def runs_agents(
    body: Mapping[str, Any], namespace: str | None, name: str | None, **_: Any
) -> dict[Any, Any]:
    return {(namespace, name): summaries.agent_summary(body)}


@index("skills", id=IndexId.RUNS_SKILLS)
def runs_skills(
    body: Mapping[str, Any], namespace: str | None, name: str | None, **_: Any
) -> dict[Any, Any]:
    return {(namespace, name): summaries.skill_summary(body)}


@index("workspaces", id=IndexId.RUNS_WORKSPACES)
def runs_workspaces(
    body: Mapping[str, Any], namespace: str | None, name: str | None, **_: Any
) -> dict[Any, Any]:
    return {(namespace, name): summaries.workspace_summary(body)}


@on_event(*RUNS)
async def runs_on_run_event(uid: str | None, app: App, **_: Any) -> None:
    if uid:
        app.runs.kick(uid)


# Only our Jobs and pods (a server-side label selector), not every pod of the cluster.
@on_event("batch", "v1", "jobs", labels={jobs.RUN_UID_LABEL: PRESENT})
async def runs_on_job_event(labels: Mapping[str, str], app: App, **_: Any) -> None:
    app.runs.kick(str(labels.get(jobs.RUN_UID_LABEL, "")))


@on_event("v1", "pods", labels={jobs.RUN_UID_LABEL: PRESENT})
async def runs_on_pod_event(
    labels: Mapping[str, str], status: Mapping[str, Any], app: App, **_: Any
) -> None:
    ctl = app.runs
    uid = str(labels.get(jobs.RUN_UID_LABEL, ""))
    if ctl.settings.trace and uid and status.get("phase") in ("Succeeded", "Failed"):
        ctl.state.mark(uid, "pod_done_seen")
    ctl.kick(uid)


@on_event(GROUP, VERSION, "reviews", labels={jobs.RUN_UID_LABEL: PRESENT})
async def runs_on_review_event(labels: Mapping[str, str], app: App, **_: Any) -> None:
    # A decision (or the operator's own status write) on a parked Run's Review.
    app.runs.kick(str(labels.get(jobs.RUN_UID_LABEL, "")))


# A SpendQuota created, edited (its limit raised) or deleted: Runs waiting on a budget
# look again at once (the leader's quota loop is the backstop).
@on_event(GROUP, VERSION, "spendquotas", metadata_only=True)
async def runs_on_spend_quota_event(namespace: str | None, app: App, **_: Any) -> None:
    app.runs.kick_waiting(namespace)


@on_event(*TOPOLOGIES)
@on_event(*AGENTS)
@on_event(*SKILLS)
@on_event(*WORKSPACES)
async def runs_on_target_event(namespace: str | None, app: App, **_: Any) -> None:
    app.runs.kick_waiting(namespace)


# Re-exported: the names this module offered before the controller moved to runs/.
__all__ = ["GROUP", "VERSION", "Indexes", "RunController", "RunView"]
