"""The promotion verdict endpoint (``GET /verdicts/<namespace>/<topologies|agents>/<name>``)
the chart's Argo Rollouts ClusterAnalysisTemplate polls: from the same indexes as the pages.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from swarmkit_operator.webview import Sources, WebView

from .fixtures import indexes, served


def cond(type_: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def topology(
    name: str, *conditions: dict[str, Any], generation: int = 2, **status: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Topology",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "generation": generation,
        },
        "spec": {"workspaceRef": {"name": "default"}, "agents": []},
        "status": {
            "observedGeneration": 2,
            "version": "bbbbbbbbbbbb",
            "conditions": list(conditions),
            **status,
        },
    }


PROMOTION = {
    "active": {"version": "aaaaaaaaaaaa", "renderedConfigMap": "topology-x-1"},
    "candidate": {
        "version": "bbbbbbbbbbbb",
        "renderedConfigMap": "topology-x-2",
        "verdict": "Fail",
        "regressions": ["smoke/refund"],
    },
}
READY = cond("Ready", "True", "Resolved")


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    idx = indexes()
    for body in (
        topology(
            "evaluating", READY, cond("Promoted", "Unknown", "Evaluating"), promotion=PROMOTION
        ),
        topology(
            "failed",
            READY,
            cond("Promoted", "False", "EvaluationFailed", "regressions: smoke/refund"),
            promotion=PROMOTION,
        ),
        topology("held", READY, cond("Promoted", "False", "Inconclusive"), promotion=PROMOTION),
        topology(
            "promoted",
            READY,
            cond("Promoted", "True", "Promoted"),
            promotion={"active": PROMOTION["active"]},
        ),
        topology(
            "stale",
            READY,
            cond("Promoted", "True", "Promoted"),
            generation=3,
            promotion={"active": PROMOTION["active"]},
        ),
        topology("plain", READY),
        topology("broken", cond("Ready", "False", "AgentNotFound")),
    ):
        idx.update("topologies", body)
    async with served(WebView(Sources(idx))) as c:
        yield c


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("evaluating", "Running"),
        ("failed", "Fail"),
        ("held", "Inconclusive"),
        ("promoted", "Pass"),
        ("stale", "Running"),  # a newer generation is not reconciled yet: never Pass
        ("plain", "Pass"),  # no spec.promotion: Ready
        ("broken", "Fail"),
    ],
)
async def test_the_verdict_follows_promoted(
    client: httpx.AsyncClient, name: str, verdict: str
) -> None:
    resp = await client.get(f"/verdicts/ns/topologies/{name}")
    assert resp.status_code == 200
    assert resp.headers["Content-Type"].startswith("application/json")
    assert resp.json()["verdict"] == verdict


async def test_a_failed_candidate_names_its_regressions(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/verdicts/ns/topologies/failed")).json()
    assert doc["kind"] == "Topology" and doc["name"] == "failed"
    assert (doc["active"], doc["candidate"]) == ("aaaaaaaaaaaa", "bbbbbbbbbbbb")
    assert doc["regressions"] == ["smoke/refund"]
    assert doc["reason"] == "EvaluationFailed"


async def test_unknown_objects_and_kinds_are_404(client: httpx.AsyncClient) -> None:
    assert (await client.get("/verdicts/ns/topologies/nope")).status_code == 404
    assert (await client.get("/verdicts/ns/skills/failed")).status_code == 404
    assert (await client.post("/verdicts/ns/topologies/failed")).status_code == 405
