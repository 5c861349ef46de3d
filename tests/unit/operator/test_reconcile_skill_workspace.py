"""The Skill and Workspace reconcilers over the fake API: renders, re-renders when a
referenced ConfigMap changes (never a Secret: none is read), and the conditions that name
what is wrong."""

from __future__ import annotations

import json
from typing import Any

from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_NAME_COLLISION,
    REASON_TOO_LARGE,
)
from swarmkit_api.skill import MAX_SKILL_BYTES
from tests.support.fake_k8s import FakeApi
from tests.support.reconciling import Reconciling

from .reconcile_cases import NS, WORKSPACE, condition, skill_spec, status


def config_map(api: FakeApi, name: str, data: dict[str, str]) -> None:
    api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS},
            "data": data,
        }
    )


async def test_a_skill_renders_a_content_addressed_config_map_and_rerenders_on_its_sources(
    api: FakeApi, operator: Reconciling
) -> None:
    config_map(api, "refs", {"matrix": "| Sev1 | all |\n"})
    files = [{"path": "reference/matrix.md", "configMapRef": {"name": "refs", "key": "matrix"}}]
    api.apply_spec("Skill", NS, "triage", skill_spec(instructions="# Triage\n", files=files))
    await operator.settle()
    shown = status(api, "Skill", "triage")
    assert condition(api, "Skill", "triage", READY)["status"] == "True"
    name = shown["renderedConfigMap"]
    assert name == f"skill-triage-{shown['contentHash'][:8]}"
    rendered = api.get("ConfigMap", NS, name)
    assert rendered is not None and rendered["immutable"] is True
    listed = {f["path"]: f for f in json.loads(rendered["data"]["files.json"])}
    assert rendered["data"][listed["reference/matrix.md"]["key"]] == "| Sev1 | all |\n"
    assert rendered["data"]["SKILL.md"].endswith("# Triage\n")
    skill = api.get("Skill", NS, "triage")
    assert skill is not None and skill["spec"]["files"] == files  # spec is never written

    refs = api.get("ConfigMap", NS, "refs")
    assert refs is not None
    refs["data"] = {"matrix": "changed\n"}
    api.replace(refs)
    await operator.settle()
    again = status(api, "Skill", "triage")["renderedConfigMap"]
    assert again != name
    assert api.get("ConfigMap", NS, again) is not None
    assert api.get("ConfigMap", NS, name) is None  # the old render: collected


async def test_a_skill_over_the_limit_is_too_large_and_renders_nothing(
    api: FakeApi, operator: Reconciling
) -> None:
    # 17 files of 1,000,000 bytes: each fits one ConfigMap, together past MAX_SKILL_BYTES.
    chunk = "x" * 1_000_000
    for i in range(17):
        config_map(api, f"big-{i}", {"k": chunk})
    files = [
        {"path": f"data/{i:02d}.txt", "configMapRef": {"name": f"big-{i}", "key": "k"}}
        for i in range(17)
    ]
    api.apply_spec("Skill", NS, "huge", skill_spec(files=files))
    await operator.settle()
    accepted = condition(api, "Skill", "huge", ACCEPTED)
    assert (accepted["status"], accepted["reason"]) == ("False", REASON_TOO_LARGE)
    assert f"{MAX_SKILL_BYTES}-byte limit; nothing rendered" in accepted["message"]
    assert not status(api, "Skill", "huge").get("renderedConfigMap")
    assert not [c for c in api.list("ConfigMap", NS) if c["metadata"]["name"].startswith("skill-")]


async def test_a_skill_over_one_mebibyte_renders_into_its_revision_and_parts(
    api: FakeApi, operator: Reconciling
) -> None:
    chunk = "x" * (768 * 1024)
    config_map(api, "big-a", {"k": chunk})
    config_map(api, "big-b", {"k": chunk.replace("x", "y")})
    files = [
        {"path": "data/a.txt", "configMapRef": {"name": "big-a", "key": "k"}},
        {"path": "data/b.txt", "configMapRef": {"name": "big-b", "key": "k"}},
    ]
    api.apply_spec("Skill", NS, "large", skill_spec(files=files))
    await operator.settle()
    assert condition(api, "Skill", "large", READY)["status"] == "True"
    head = status(api, "Skill", "large")["renderedConfigMap"]
    rendered = api.get("ConfigMap", NS, head)
    assert rendered is not None and rendered["immutable"] is True
    listed = {f["path"]: f for f in json.loads(rendered["data"]["files.json"])}
    for path, char in (("data/a.txt", "x"), ("data/b.txt", "y")):
        part = api.get("ConfigMap", NS, listed[path]["configMap"])
        assert part is not None and part["immutable"] is True
        assert part["metadata"]["annotations"]["swarmkit.dev/part-of"] == head
        assert part["data"][listed[path]["key"]] == char * (768 * 1024)

    # An edit: a new revision with its own parts; the old revision and its parts collected.
    old = {head, *(f["configMap"] for f in listed.values())}
    api.apply_spec("Skill", NS, "large", skill_spec(instructions="# v2\n", files=files))
    await operator.settle()
    new_head = status(api, "Skill", "large")["renderedConfigMap"]
    assert new_head != head
    new = json.loads(api.get("ConfigMap", NS, new_head)["data"]["files.json"])  # type: ignore[index]
    assert all(api.get("ConfigMap", NS, f["configMap"]) is not None for f in new)
    assert all(api.get("ConfigMap", NS, name) is None for name in old)


async def test_a_skill_named_like_a_synthesized_topology_skill_collides(
    api: FakeApi, operator: Reconciling
) -> None:
    api.apply_spec("Skill", NS, "topology-review", skill_spec())
    await operator.settle()
    accepted = condition(api, "Skill", "topology-review", ACCEPTED)
    assert (accepted["status"], accepted["reason"]) == ("False", REASON_NAME_COLLISION)


async def test_a_workspace_never_reads_the_secrets_it_references(
    api: FakeApi, operator: Reconciling
) -> None:
    """Issue 41: the operator holds no verb on Secrets. A Workspace naming a Secret that
    does not exist is Ready (it holds references only) and so is its Agent; a Run's pod
    reports the missing Secret (builders/run_pod.secret_not_found). No request ever goes to
    a Secret, whether it exists or not."""
    provider = {"name": "claude", "type": "anthropic", "apiKey": {"name": "keys", "key": "k"}}
    spec: dict[str, Any] = dict(WORKSPACE, modelProviders=[provider])
    api.apply_spec("Workspace", NS, "default", spec)
    api.apply_spec("Agent", NS, "uses-it", {})
    await operator.settle()
    assert condition(api, "Workspace", "default", READY)["status"] == "True"
    assert condition(api, "Agent", "uses-it", READY)["status"] == "True"
    rendered = api.get("ConfigMap", NS, status(api, "Workspace", "default")["renderedConfigMap"])
    assert rendered is not None
    assert json.loads(rendered["data"]["secrets.json"]) == [
        {"path": "spec.modelProviders[0].apiKey", "name": "keys", "key": "k"}
    ]

    secret_value = "sk-very-secret-value"
    api.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "keys", "namespace": NS},
            "stringData": {"k": secret_value},
        }
    )
    await operator.settle()
    assert condition(api, "Workspace", "default", READY)["status"] == "True"
    assert secret_value not in json.dumps(api.get("ConfigMap", NS, rendered["metadata"]["name"]))
    assert not [r for r in api.requests if "/secrets" in r[1]], api.requests
