"""The Topology resource: a tree of agents (root → leaders → workers) and an optional schedule."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from .base import ApiModel, CelRule
from .common import (
    KEBAB,
    Conditions,
    LocalObjectReference,
    ResourceRequirements,
    SecretKeyRef,
)
from .harness import HarnessSpec
from .promotion import PromotionSpec, PromotionStatus

#: Deepest nesting of topologies calling topologies through agent skills.
MAX_TOPOLOGY_DEPTH = 3


class TopologyNode(ApiModel):
    """One position in the agent tree."""

    cel_rules = (
        CelRule(
            rule="(self.role == 'root') == !has(self.parent)",
            message="the root has no parent; every other node names its parent",
            field_path=".parent",
            check=lambda m: (m.role == "root") == (m.parent is None),
        ),
    )

    name: str = Field(
        pattern=KEBAB, max_length=63, description="Node name; children are delegate_to_<name>."
    )
    agent_ref: LocalObjectReference = Field(description="The Agent at this position.")
    role: Literal["root", "leader", "worker"] = Field(description="root | leader | worker.")
    parent: str | None = Field(
        default=None, max_length=63, description="Name of the parent node (not for the root)."
    )
    funnel: LocalObjectReference | None = Field(
        default=None,
        description="A Funnel every artifact of this node's agent must pass (validate, judge, "
        "review, approve) before the run goes on.",
    )
    harness: HarnessSpec | None = Field(
        default=None,
        description="Run this node as a coding harness (Claude Code, Codex, Gemini CLI) in the "
        "Run's pod; the Agent still gives its tools, skills, permissions, model provider and "
        "limits.",
    )


#: Five fields of cron characters (numbers, names, * ? , / - #); the values themselves are
#: checked by the operator (croniter), which the apiserver cannot run.
CRON_PATTERN = r"^ *[0-9A-Za-z*?,/#-]+( +[0-9A-Za-z*?,/#-]+){4} *$"
#: The shape of an IANA zone name; whether the zone exists is checked by the operator.
TIMEZONE_PATTERN = r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$"


class Schedule(ApiModel):
    """Create Runs on a cron schedule."""

    cron: str = Field(
        min_length=9,
        max_length=100,
        pattern=CRON_PATTERN,
        description="Five-field cron expression, e.g. '0 * * * *' (the operator also checks "
        "each field's values: Accepted=False naming spec.schedule.cron).",
    )
    timezone: str = Field(
        default="UTC",
        max_length=64,
        pattern=TIMEZONE_PATTERN,
        description="IANA time zone of the cron expression, e.g. Europe/Paris (the operator "
        "checks it is a known zone: Accepted=False naming spec.schedule.timezone).",
    )
    input: str = Field(default="", description="Input of each scheduled Run.")
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = Field(
        default="Forbid", description="What to do when the previous Run is still running."
    )
    suspend: bool = Field(default=False, description="Stop creating Runs.")


class HistoryLimit(ApiModel):
    """How many finished Runs of this topology are kept."""

    succeeded: int = Field(default=10, ge=0, le=1000, description="Succeeded Runs kept.")
    failed: int = Field(default=10, ge=0, le=1000, description="Failed Runs kept.")


def _distinct_refs(refs: list[SecretKeyRef]) -> bool:
    return len({(r.name, r.key) for r in refs}) == len(refs)


class ServeAuth(ApiModel):
    """Who may call a served topology: bearer tokens kept in Secrets (never copied)."""

    cel_rules = (
        CelRule(
            rule="self.bearerTokens.all(a, self.bearerTokens.exists_one(b, "
            "b.name == a.name && b.key == a.key))",
            message="each bearerTokens entry must name a different Secret key",
            field_path=".bearerTokens",
            check=lambda m: _distinct_refs(m.bearer_tokens),
        ),
    )

    bearer_tokens: list[SecretKeyRef] = Field(
        min_length=1,
        max_length=16,
        description="Secret keys each holding one accepted token (Authorization: Bearer "
        "<token>). Several allow rotation: add the new one, move callers, remove the old.",
    )


class ServeSpec(ApiModel):
    """Serve the topology over A2A as a Deployment + Service (``python -m swarmkit_runner
    serve``), pinned to the Topology's version like a Run; a new version rolls it."""

    cel_rules = (
        CelRule(
            rule="!has(self.taskTimeoutSeconds) || !has(self.drainSeconds) || "
            "self.drainSeconds <= self.taskTimeoutSeconds + 60",
            message="drainSeconds longer than taskTimeoutSeconds + 60 only delays a rollout: "
            "no task runs that long",
            field_path=".drainSeconds",
            check=lambda m: (
                m.task_timeout_seconds is None or m.drain_seconds <= m.task_timeout_seconds + 60
            ),
        ),
    )

    replicas: int = Field(default=1, ge=0, le=50, description="Pods serving the topology.")
    auth: ServeAuth = Field(
        description="Bearer tokens callers must present; a call without a valid one is "
        "refused (401) and nothing runs."
    )
    resources: ResourceRequirements | None = Field(
        default=None,
        description="Runner container resources; defaults to the Workspace's runtime resources.",
    )
    max_concurrent_tasks: int = Field(
        default=4,
        ge=1,
        le=256,
        description="Tasks one replica runs at once; past it a new task gets 429 with Retry-After.",
    )
    task_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=86400,
        description="Timeout of each task (like a Run's timeoutSeconds); default: the "
        "Workspace's runtime.defaultTimeoutSeconds.",
    )
    input_timeout_seconds: int = Field(
        default=3600,
        ge=1,
        le=604800,
        description="How long a task in input-required waits for its answer before it is "
        "cancelled.",
    )
    drain_seconds: int = Field(
        default=60,
        ge=1,
        le=3600,
        description="On rollout or scale-down, how long a pod lets its running tasks finish "
        "(no new tasks accepted) before it cancels the rest.",
    )
    port: int = Field(default=8080, ge=1024, le=65535, description="Container port served.")


def _tree_is_well_formed(spec: TopologySpec) -> bool:
    names = {n.name: n for n in spec.agents}
    if len(names) != len(spec.agents):
        return False
    for node in spec.agents:
        if node.parent is None:
            continue
        parent = names.get(node.parent)
        if parent is None or parent.role == "worker":
            return False
        if node.role == "leader" and parent.role != "root":
            return False
    return True


class TopologySpec(ApiModel):
    """A tree of agents run together."""

    cel_rules = (
        CelRule(
            rule="!has(self.serve) || (has(self.description) && size(self.description) > 0)",
            message="a served topology needs a description: it is the skill description on "
            "its Agent Card",
            field_path=".description",
            check=lambda m: m.serve is None or bool(m.description),
        ),
        CelRule(
            rule="self.agents.exists_one(a, a.role == 'root')",
            message="exactly one agent must have role root",
            field_path=".agents",
            check=lambda m: sum(1 for a in m.agents if a.role == "root") == 1,
        ),
        CelRule(
            rule="self.agents.all(a, self.agents.exists_one(b, b.name == a.name)) && "
            "self.agents.all(a, !has(a.parent) || self.agents.exists(b, b.name == a.parent "
            "&& b.role != 'worker' && (a.role != 'leader' || b.role == 'root')))",
            message="node names must be unique; a parent must exist and not be a worker; "
            "leaders report to the root",
            field_path=".agents",
            check=_tree_is_well_formed,
        ),
        CelRule(
            rule="self.agents.all(a, !has(a.harness) || !self.agents.exists(b, has(b.parent) "
            "&& b.parent == a.name))",
            message="a harness node has no children: a harness cannot delegate to topology "
            "nodes (give it agent skills instead)",
            field_path=".agents",
            check=lambda m: (
                not any(
                    a.harness is not None and any(b.parent == a.name for b in m.agents)
                    for a in m.agents
                )
            ),
        ),
    )

    workspace_ref: LocalObjectReference = Field(description="The Workspace the topology runs in.")
    description: str = Field(
        default="", description="What the topology does (used for topology-<name> skills)."
    )
    agents: list[TopologyNode] = Field(
        min_length=1, max_length=50, description="The agent tree, root first by convention."
    )
    schedule: Schedule | None = Field(default=None, description="Optional cron schedule.")
    history_limit: HistoryLimit | None = Field(default=None, description="Finished Runs kept.")
    serve: ServeSpec | None = Field(
        default=None,
        description="Serve the topology over A2A (Agent Card, message/send, message/stream, "
        "tasks/get, tasks/cancel) to other workspaces.",
    )
    promotion: PromotionSpec | None = Field(
        default=None,
        description="Promote a new version only once it passes an evaluation against the "
        "active one: until then Runs and serving keep the active version (not part of the "
        "topology's version).",
    )

    @property
    def root(self) -> TopologyNode:
        return next(a for a in self.agents if a.role == "root")

    def children(self, node: str) -> list[TopologyNode]:
        return [a for a in self.agents if a.parent == node]


class ServingStatus(ApiModel):
    """What the operator runs for ``spec.serve``."""

    deployment: str = Field(description="The Deployment serving the topology.")
    service: str = Field(description="Its Service.")
    bundle_config_map: str = Field(description="The pinned, immutable bundle it serves.")
    version: str = Field(description="The topology version the Deployment runs.")
    replicas: int = Field(default=0, description="Desired replicas.")
    ready_replicas: int = Field(default=0, description="Ready replicas.")
    updated: bool = Field(
        default=False, description="Every replica runs this version (the rollout finished)."
    )


class TopologyStatus(ApiModel):
    """Observed state of a Topology."""

    observed_generation: int = Field(default=0, description="Last generation reconciled.")
    version: str | None = Field(default=None, description="Hash over all agent versions.")
    agent_versions: dict[str, str] = Field(
        default_factory=dict, description="Agent name → version."
    )
    funnel_versions: dict[str, str] = Field(
        default_factory=dict, description="Funnel name → version (its content is pinned)."
    )
    child_topologies: list[str] = Field(
        default_factory=list, description="Topologies reachable through agent skills."
    )
    last_schedule_time: datetime | None = Field(
        default=None, description="When the schedule last created a Run."
    )
    url: str | None = Field(
        default=None, description="In-cluster URL of the served Agent Card (spec.serve)."
    )
    serving: ServingStatus | None = Field(
        default=None, description="The served Deployment (spec.serve)."
    )
    created_uids: dict[str, str] = Field(
        default_factory=dict,
        description="<Kind>/<name> → uid of each served object the operator created "
        "(Deployment, Service, NetworkPolicy): an object under one of those names that is "
        "not the one recorded is never used (TamperedObject).",
    )
    promotion: PromotionStatus | None = Field(
        default=None, description="Active and candidate versions (spec.promotion)."
    )
    conditions: Conditions = Field(default_factory=list, description="Conditions.")


__all__ = [
    "MAX_TOPOLOGY_DEPTH",
    "HistoryLimit",
    "Schedule",
    "ServeAuth",
    "ServeSpec",
    "ServingStatus",
    "TopologyNode",
    "TopologySpec",
    "TopologyStatus",
]
