"""One object nested too deep to read or process stops no one else (issue 47 items 1, 2).

A Skill whose ``outputs`` schema nests 2,000 levels is admitted by the API server (it checks
nesting only past 10,000) but is past what Python's JSON decoder takes: before, the Skill
watch of every namespace failed on it and retried from the same version for minutes. Now
it arrives cut and marked, gets ``Accepted=False DepthExceeded``, and a Skill created in
another namespace meanwhile is Ready as usual. A Skill of 140 levels decodes, but is past
the spec's documented depth: ``Accepted=False Invalid`` naming ``spec.outputs``, once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import OperatorProcess, create, example, wait_ready


def _deep_schema(levels: int) -> str:
    """A JSON Schema text with ``levels`` nested objects under ``properties.deep``
    (built as text: Python's own encoder refuses such depth)."""
    inner = '{"type":"object","properties":{"a":' * levels + '{"type":"string"}' + "}}" * levels
    return (
        '{"type":"object","required":["verdict","confidence","reasoning"],"properties":{'
        '"verdict":{"type":"string"},"confidence":{"type":"number"},'
        f'"reasoning":{{"type":"string"}},"deep":{inner}}}}}'
    )


def _skill_json(name: str, namespace: str, levels: int) -> str:
    base = example("Skill")
    spec: dict[str, Any] = {
        "category": "decision",
        "description": "Judges a change (hostile: its outputs schema nests very deep).",
        "implementation": {"type": "llm_prompt", "prompt": "judge it"},
        "provenance": base["spec"]["provenance"],
        "outputs": "__OUTPUTS__",
    }
    doc = {
        "apiVersion": "swarmkit.dev/v1alpha1",
        "kind": "Skill",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return json.dumps(doc).replace('"__OUTPUTS__"', _deep_schema(levels))


def _condition(cluster: LocalCluster, ns: str, name: str, type_: str) -> dict[str, Any] | None:
    """The condition through kubectl: the test's own Python client cannot decode the
    poison object either."""
    out = cluster.kubectl(
        "-n", ns, "get", "skill", name, "-o", "jsonpath={.status.conditions}", check=False
    ).stdout
    for cond in json.loads(out or "[]"):
        if cond.get("type") == type_:
            return dict(cond)
    return None


def test_a_skill_too_deep_to_decode_is_refused_and_others_go_on(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    tmp_path: Path,
) -> None:
    poison = tmp_path / "poison.json"
    poison.write_text(_skill_json("poison", namespace, 2000))
    cluster.kubectl("create", "-f", str(poison))

    def refused() -> dict[str, Any] | None:
        cond = _condition(cluster, namespace, "poison", "Accepted")
        return cond if cond and cond.get("reason") == "DepthExceeded" else None

    cond = wait_for(refused, 30, message="the poison Skill to be refused")
    assert cond["status"] == "False"
    assert cond["message"].startswith("spec.outputs"), cond
    assert "is nested too deep to be read" in cond["message"], cond

    # Another team's Skill, created while the poison exists, is Ready as usual.
    other = f"{namespace}-b"
    kube.core.create_namespace({"metadata": {"name": other}})
    try:
        canary = example("Skill")
        canary["metadata"] = {"name": "canary"}
        started = time.monotonic()
        create(kube, other, canary)
        wait_ready(kube, other, "Skill", "canary", timeout=30)
        assert time.monotonic() - started < 30
    finally:
        kube.core.delete_namespace(other)
    assert "RecursionError" not in operator.log_path.read_text()


def test_a_skill_past_the_spec_depth_is_invalid_naming_the_field(
    cluster: LocalCluster, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(_skill_json("deep", namespace, 140))
    cluster.kubectl("create", "-f", str(deep))

    def invalid() -> dict[str, Any] | None:
        cond = _condition(cluster, namespace, "deep", "Accepted")
        return cond if cond and cond.get("reason") == "Invalid" else None

    cond = wait_for(invalid, 30, message="the deep Skill to be refused")
    assert cond["message"].startswith("spec.outputs:"), cond
    assert "nests deeper than 64 levels" in cond["message"], cond
    ready = _condition(cluster, namespace, "deep", "Ready")
    assert ready is not None and ready["status"] == "False"
    # Refused once, not retried: no reconcile error was logged for it.
    assert f"reconciling Skill {namespace}/deep" not in operator.log_path.read_text()
