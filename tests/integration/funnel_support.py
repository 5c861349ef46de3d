"""What the Funnel integration modules share: the run-author admission policy as a fixture,
a judge decision skill's output schema, the artifacts the scripted model drafts, and a judge
verdict as the model answers it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import wait_for
from tests.support.model_server import Reply, text

from .review_support import kubectl_as
from .runs_support import REPO, doc, run_manifest

RUN_AUTHOR = REPO / "deploy" / "admission" / "run-author.yaml"
#: A release lead's group: the Funnels' approval layer takes one of them.
LEADS = "release-leads"
#: The outputs of a decision skill used as a judge.
JUDGE_OUTPUTS = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "reasoning": {"type": "string"},
    },
    "required": ["verdict", "confidence", "reasoning"],
}
#: A draft that passes the schema, and a better one (the judge's retry or a revision).
GOOD = json.dumps({"title": "v2", "body": "Faster runs."})
BETTER = json.dumps({"title": "v2", "body": "Runs start 3x faster; see docs/runs.md."})


#: The decision skill the Funnels judge with, and the Topology whose root node is gated.
JUDGE_SKILL = "notes-judge"
GATE = "notes-gate"


def judge_skill() -> dict[str, Any]:
    """The decision skill ``notes-judge``: the scripted model's answer is its verdict."""
    return doc(
        "Skill",
        JUDGE_SKILL,
        {
            "description": "Use to judge release notes.",
            "category": "decision",
            "implementation": {"type": "llm_prompt", "prompt": "Score the release notes."},
            "outputs": JUDGE_OUTPUTS,
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    )


def writer() -> dict[str, Any]:
    """The Agent ``writer`` (model ``m``/``t``, granted the judge skill)."""
    return doc(
        "Agent",
        "writer",
        {
            "workspaceRef": {"name": "default"},
            "model": {"provider": "m", "name": "t"},
            "systemPrompt": "You write release notes as JSON {title, body}.",
            "skills": [JUDGE_SKILL],
        },
    )


def gated_topology() -> dict[str, Any]:
    """The Topology ``notes``: its root node ``draft`` runs ``writer`` behind the Funnel."""
    node = {
        "name": "draft",
        "agentRef": {"name": "writer"},
        "role": "root",
        "funnel": {"name": GATE},
    }
    return doc("Topology", "notes", {"workspaceRef": {"name": "default"}, "agents": [node]})


def leads_approve(rule: dict[str, Any]) -> dict[str, Any]:
    """A Funnel's ``approve`` layer: one ``rule`` over the role ``release-lead`` (the group
    :data:`LEADS`)."""
    return {
        "rules": [{"roles": ["release-lead"], **rule}],
        "roles": {"release-lead": {"groups": [LEADS]}},
    }


def judged(confidence: float, reasoning: str = "scored") -> Reply:
    """The judge skill's answer, as the scripted model gives it."""
    return text(json.dumps({"verdict": "x", "confidence": confidence, "reasoning": reasoning}))


def create_run_as(cluster: LocalCluster, ns: str, user: str, name: str) -> None:
    """A Run of ``notes`` created by ``user`` (the run-author policy records them)."""
    doc = run_manifest(name, "notes", input="Write the release notes for v2.")
    res = kubectl_as(cluster, user, "-n", ns, "create", "-f", "-", input=json.dumps(doc))
    assert res.returncode == 0, res.stderr


def sign(
    cluster: LocalCluster,
    ns: str,
    review: str,
    user: str,
    verdict: str = "approve",
    groups: tuple[str, ...] = (LEADS,),
    text: str | None = None,
) -> Any:
    """``user`` signs ``review`` as a ``release-lead`` (impersonated with ``groups``); the
    kubectl result, for the caller to assert on."""
    entry: dict[str, Any] = {"verdict": verdict, "role": "release-lead", "decidedBy": user}
    if text:
        entry["text"] = text
    as_groups = [f"--as-group={g}" for g in groups]
    # As `kubectl swarmkit review approve` does: append to the signatures read, guarded by
    # the resourceVersion; on a conflict (another signature, or the operator's status write)
    # read again.
    for _ in range(5):
        body = review_of_cluster(cluster, ns, review)
        approvals = list(body["spec"].get("approvals") or [])
        patch = json.dumps(
            {
                "spec": {"approvals": [*approvals, entry]},
                "metadata": {"resourceVersion": body["metadata"]["resourceVersion"]},
            }
        )
        done = kubectl_as(
            cluster, user, *as_groups, "-n", ns, "patch", "review", review, "--type=merge",
            "-p", patch,
        )  # fmt: skip
        if "the object has been modified" not in done.stderr:
            return done
    return done


def review_of_cluster(cluster: LocalCluster, ns: str, name: str) -> dict[str, Any]:
    """The Review as the cluster admin reads it."""
    out = cluster.kubectl("-n", ns, "get", "review", name, "-o", "json").stdout
    return dict(json.loads(out))


@pytest.fixture(scope="module")
def run_author(cluster: LocalCluster, crds: Any) -> Iterator[None]:
    """The admission policies that record who creates a Run (applied as shipped; removed
    afterwards: the session's cluster is shared with other modules)."""
    cluster.kubectl("apply", "--server-side", "-f", str(RUN_AUTHOR))

    def records_the_creator() -> bool:
        # Admission policies take effect asynchronously: a server-side dry run shows when.
        doc = json.dumps({**run_manifest("probe", "t"), "metadata": {"name": "probe"}})
        res = cluster.kubectl(
            "-n", "default", "create", "--dry-run=server", "-o", "json", "-f", "-",
            input=doc, check=False,
        )  # fmt: skip
        annotations = json.loads(res.stdout or "{}").get("metadata", {}).get("annotations") or {}
        return "swarmkit.dev/created-by" in annotations

    wait_for(records_the_creator, 60, interval=0.5, message="the run-author policy to take effect")
    yield
    cluster.kubectl("delete", "--ignore-not-found", "-f", str(RUN_AUTHOR), check=False)
