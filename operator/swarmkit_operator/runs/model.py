"""Names, tunables and plain data shared by the Runs modules; no I/O here.

* the Kubernetes names the controller reads or writes (group, plurals, labels);
* the timings, some tunable through the environment (read once, at import);
* :class:`RunView`, a Run as the controller sees it, and :class:`Indexes`, the in-memory
  indexes it reads instead of asking the API;
* small pure helpers over Jobs and pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from swarmkit_api.run import RunSpec

from ..builders import job as jobs
from ..builders import run_status as rs
from ..indexes import Indexes as SharedIndexes
from ..indexes import IndexId, IndexLike, ResolverIndexes

GROUP = "swarmkit.dev"
VERSION = "v1alpha1"
RUNS = (GROUP, VERSION, "runs")
TOPOLOGIES = (GROUP, VERSION, "topologies")
AGENTS = (GROUP, VERSION, "agents")
SKILLS = (GROUP, VERSION, "skills")
WORKSPACES = (GROUP, VERSION, "workspaces")
#: The labels the Job controller puts on its pods (new name first, then the legacy one).
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
#: Seconds a Job may exist without a pod before its Events are consulted.
NO_POD_EVENTS_AFTER = 3.0
#: How long a Job this process just created is trusted before the Jobs index shows it.
HINT_SECONDS = 2.0
#: Concurrent reconciles (bounded by the API client's connections anyway).
MAX_CONCURRENCY = 16


@dataclass
class RunView:
    """A Run as the controller sees it (index + its own latest write)."""

    name: str
    namespace: str
    uid: str
    generation: int
    spec: dict[str, Any]
    status: dict[str, Any]
    labels: dict[str, str]
    deleting: bool
    resource_version: int

    @property
    def involved(self) -> dict[str, str]:
        """The Run as the ``involvedObject`` of an Event."""
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Run",
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
        }


@dataclass
class Indexes:
    """The indexes the controller reads (their entries: :mod:`.summaries`)."""

    runs: IndexLike
    jobs: IndexLike
    pods: IndexLike
    topologies: IndexLike
    agents: IndexLike
    skills: IndexLike
    workspaces: IndexLike
    #: The reconcile loop's index of bundle ConfigMaps (namespace → {bundle, pins,
    #: finished}); used to repair a missing run-finished label after a crash.
    bundles: IndexLike | None = None
    #: Reviews by the uid of the Run they belong to (run uid → Review summaries).
    reviews: IndexLike | None = None
    #: Reviews of swarm-authored skills by (namespace, skill).
    skill_reviews: IndexLike | None = None
    #: Funnel specs by (namespace, name) (Topology nodes' funnels, pinned by a Run).
    funnels: IndexLike | None = None
    #: SpendQuota names by namespace (metadata only): a namespace with none needs no
    #: budget gate, so a Run's start makes no LIST for it.
    spend_quotas: IndexLike | None = None
    #: EvalRuns by uid: their up-front SpendQuota reservations outlive no EvalRun.
    eval_runs: IndexLike | None = None

    @classmethod
    def of(cls, shared: SharedIndexes) -> Indexes:
        """The operator's shared indexes as the Runs controller (and its resolver) reads
        them: live views, so what an event indexes is read at once."""
        view = shared.view
        return cls(
            runs=view(IndexId.RUNS_BY_UID),
            jobs=view(IndexId.RUNS_JOBS_BY_RUN),
            pods=view(IndexId.RUNS_PODS_BY_RUN),
            topologies=view(IndexId.RUNS_TOPOLOGIES),
            agents=view(IndexId.RUNS_AGENTS),
            skills=view(IndexId.RUNS_SKILLS),
            workspaces=view(IndexId.RUNS_WORKSPACES),
            funnels=view(IndexId.FUNNEL_VIEWS),
            bundles=view(IndexId.PINNED_CONFIG_MAPS),
            reviews=view(IndexId.RUNS_REVIEWS_BY_RUN),
            skill_reviews=view(IndexId.SKILL_REVIEWS),
            spend_quotas=view(IndexId.SPEND_QUOTAS),
            eval_runs=view(IndexId.EVALRUN_UIDS),
        )

    def resolver(self) -> ResolverIndexes:
        """The indexes the runner-workload resolver reads (every one it needs)."""
        return ResolverIndexes(
            topologies=self.topologies,
            agents=self.agents,
            skills=self.skills,
            workspaces=self.workspaces,
            # `is None`, not `or`: a live index view that is empty now is still the index.
            funnels=self.funnels if self.funnels is not None else {},
            skill_reviews=self.skill_reviews if self.skill_reviews is not None else {},
        )


def rv(obj: Mapping[str, Any] | None) -> int:
    """An object's resourceVersion as a number (0 when absent), to tell newer from older."""
    try:
        return int((obj or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def pod_job(pod: Mapping[str, Any]) -> str | None:
    """The name of the Job that made ``pod``."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for key in JOB_NAME_LABELS:
        if labels.get(key):
            return str(labels[key])
    return None


def age(obj: Mapping[str, Any]) -> float | None:
    """Seconds since the object's creation."""
    created = rs.parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    if created is None:
        return None
    return (datetime.now(UTC) - created).total_seconds()


def timeout_of(job: Mapping[str, Any] | None) -> int | None:
    """The run's own timeout: the Job's deadline less the grace the builder added to it."""
    deadline = ((job or {}).get("spec") or {}).get("activeDeadlineSeconds")
    if not isinstance(deadline, int):
        return None
    return max(deadline - jobs.DEADLINE_GRACE_SECONDS, 1)


def error_line(exc: Exception) -> str:
    """One line for a condition message (a ValidationError names its first field)."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        return f"{loc}: {err.get('msg')}" if loc else str(err.get("msg"))
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def run_ref(run: RunView, spec: RunSpec) -> jobs.RunRef:
    """What the builders need to know of the Run."""
    return jobs.RunRef(
        name=run.name,
        namespace=run.namespace,
        uid=run.uid,
        labels=spec.labels,
        correlation_id=spec.correlation_id,
    )
