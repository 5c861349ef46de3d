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

from .runs_support import REPO, run_manifest

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


def judged(confidence: float, reasoning: str = "scored") -> Reply:
    """The judge skill's answer, as the scripted model gives it."""
    return text(json.dumps({"verdict": "x", "confidence": confidence, "reasoning": reasoning}))


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
