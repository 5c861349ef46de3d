"""The fake API server answers the operator's own client helpers the way the apiserver
does: resourceVersions, generations, 404 and 409, the status subresource, apply ownership,
finalizers, watches and the write gate. (If it did not, the reconciler tests over it
would prove nothing.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from swarmkit_api import GROUP, VERSION
from swarmkit_operator import k8s
from tests.support.fake_k8s import FakeApi

NS = "ns"


def skill(name: str = "s", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Skill",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec or {"description": "d"},
        "status": {"version": "ignored on create"},
    }


def cm(name: str = "c", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}}


async def test_create_conflicts_and_missing_objects(api: FakeApi) -> None:
    uid = await k8s.create_config_map(cm() | {"data": {"a": "1"}})
    assert uid and uid == (api.get("ConfigMap", NS, "c") or {})["metadata"]["uid"]
    assert await k8s.create_config_map(cm() | {"data": {"a": "2"}}) is None  # 409
    assert (await k8s.read_config_map(NS, "c") or {})["data"] == {"a": "1"}
    assert await k8s.read_config_map(NS, "nope") is None  # 404
    assert await k8s.get_custom("skills", NS, "nope") is None
    stored = api.get("ConfigMap", NS, "c")
    assert stored is not None
    assert await k8s.delete_config_map(NS, "c", uid="another-uid") is False  # precondition 409
    assert await k8s.delete_config_map(NS, "c", uid=stored["metadata"]["uid"]) is True
    assert await k8s.delete_config_map(NS, "c") is False  # 404
    await k8s.put_config_map(cm("p") | {"data": {"x": "y"}})  # PUT 404, then created
    assert api.get("ConfigMap", NS, "p") is not None
    await k8s.put_config_map(cm("q") | {"data": {"x": "1"}}, exists=False)  # created
    await k8s.put_config_map(cm("q") | {"data": {"x": "2"}}, exists=False)  # 409, replaced
    assert (api.get("ConfigMap", NS, "q") or {})["data"] == {"x": "2"}


async def test_an_immutable_config_map_keeps_its_data(api: FakeApi) -> None:
    api.create(cm() | {"data": {"a": "1"}, "immutable": True})
    with pytest.raises(k8s.ApiError) as refused:
        await k8s.put_config_map(cm() | {"data": {"a": "2"}, "immutable": True})
    assert refused.value.status == 422
    assert await k8s.label_config_map(NS, "c", {"kept": "yes"}) is True  # metadata is mutable


async def test_versions_generations_and_the_status_subresource(api: FakeApi) -> None:
    created = api.create(skill())
    meta = created["metadata"]
    assert "status" not in created  # status is the subresource's
    assert meta["generation"] == 1 and meta["uid"]
    version = meta["resourceVersion"]
    written = await k8s.patch_status_object("skills", NS, "s", {"version": "v1"})
    assert written is not None
    assert written["metadata"]["generation"] == 1  # a status write is not a new generation
    assert int(written["metadata"]["resourceVersion"]) > int(version)
    assert await k8s.patch_custom_labels("skills", NS, "s", {"a": "b"}) is True
    assert (api.get("Skill", NS, "s") or {})["metadata"]["generation"] == 1
    api.apply_spec("Skill", NS, "s", {"description": "edited"})
    after = api.get("Skill", NS, "s") or {}
    assert after["metadata"]["generation"] == 2
    assert after["status"] == {"version": "v1"}  # an update of the object keeps status
    assert await k8s.patch_status("skills", NS, "gone", {"version": "x"}) is None  # 404


async def test_a_guarded_status_write_loses_to_a_newer_version(api: FakeApi) -> None:
    version = api.create(skill())["metadata"]["resourceVersion"]
    api.apply_spec("Skill", NS, "s", {"description": "moved on"})
    assert not await k8s.patch_status_guarded("skills", NS, "s", version, {"version": "stale"})
    fresh = (api.get("Skill", NS, "s") or {})["metadata"]["resourceVersion"]
    assert await k8s.patch_status_guarded("skills", NS, "s", fresh, {"version": "fresh"})
    assert (api.get("Skill", NS, "s") or {})["status"] == {"version": "fresh"}


async def test_apply_owns_fields_and_conditions_per_manager(api: FakeApi) -> None:
    api.create(skill())

    def ready(type_: str, status: str) -> dict[str, str]:
        return {"type": type_, "status": status, "reason": "R", "message": "m"}

    one = {"version": "v", "extra": "x", "conditions": [ready("Ready", "True")]}
    await k8s.apply_status("Skill", "skills", NS, "s", one, "first")
    other = {"grantedBy": {"count": 1}, "conditions": [ready("Granted", "True")]}
    await k8s.apply_status("Skill", "skills", NS, "s", other, "second")
    again = {"version": "v2", "conditions": [ready("Ready", "False")]}
    written = await k8s.apply_status("Skill", "skills", NS, "s", again, "first")
    assert written is not None
    status = written["status"]
    assert "extra" not in status  # applied before by "first", left out now: removed
    assert status["grantedBy"] == {"count": 1}  # "second"'s field is untouched
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "False",
        "Granted": "True",
    }
    assert await k8s.apply_status("Skill", "skills", NS, "gone", again, "first") is None


async def test_finalizers_hold_a_deletion_and_owners_take_their_dependents(api: FakeApi) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS, "finalizers": ["swarmkit.dev/x"]},
        "spec": {"containers": []},
    }
    owner = api.create(pod)
    child = cm("child")
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner["metadata"]["uid"]}
    ]
    api.create(child)
    api.delete("Pod", NS, "p")
    held = api.get("Pod", NS, "p")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    assert await k8s.remove_pod_finalizer(NS, "p", "swarmkit.dev/x") is True
    assert api.get("Pod", NS, "p") is None
    assert api.get("ConfigMap", NS, "child") is None


async def test_lists_select_by_labels_and_fields(api: FakeApi) -> None:
    for name, labels in (("a", {"app": "x", "tier": "1"}), ("b", {"app": "y"}), ("c", {})):
        api.create(cm(name) | {"metadata": {"name": name, "namespace": NS, "labels": labels}})
    names = lambda items: sorted(i["metadata"]["name"] for i in items)  # noqa: E731
    assert names(await k8s.list_config_maps(NS, "app")) == ["a", "b"]
    assert names(await k8s.list_config_maps(NS, "app in (x, z),tier")) == ["a"]
    assert names(await k8s.list_config_maps(None, "app!=x")) == ["b", "c"]
    assert names(await k8s.list_config_maps(NS, "!app")) == ["c"]
    status, listed = await k8s.request(
        "GET", k8s.core_path("configmaps", NS), query=[("fieldSelector", "metadata.name=b")]
    )
    assert status == 200 and names(listed["items"]) == ["b"]
    _, meta_only = await k8s.request(
        "GET", k8s.core_path("configmaps", NS), accept=k8s.METADATA_ONLY
    )
    assert meta_only["kind"] == "PartialObjectMetadataList"
    assert all(set(i) == {"apiVersion", "kind", "metadata"} for i in meta_only["items"])


async def test_a_watch_sees_every_change_after_its_version_and_410_after_compaction(
    api: FakeApi,
) -> None:
    start = str(api.revision)
    api.create(cm("w"))
    path = k8s.core_path("configmaps", NS)
    seen: list[tuple[str, str]] = []

    async def watch() -> None:
        async for event in k8s.stream(path, [("resourceVersion", start)]):
            seen.append((event["type"], event["object"]["metadata"]["name"]))

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.01)
    api.delete("ConfigMap", NS, "w")
    await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert seen == [("ADDED", "w"), ("DELETED", "w")]
    api.compact()
    events = [e async for e in k8s.stream(path, [("resourceVersion", start)])]
    assert [(e["type"], e["object"]["code"]) for e in events] == [("ERROR", 410)]


async def test_writes_pass_the_write_gate_and_faults_can_be_injected(api: FakeApi) -> None:
    k8s.set_write_gate(lambda: "a standby")
    try:
        with pytest.raises(k8s.NotLeader):
            await k8s.create_config_map(cm())
    finally:
        k8s.set_write_gate(None)
    api.refuse("POST", "/configmaps$", status=500, times=1)
    with pytest.raises(k8s.ApiError) as refused:
        await k8s.create_config_map(cm())
    assert refused.value.status == 500
    assert await k8s.create_config_map(cm()) is not None
    assert [v for v, _ in api.writes()] == ["POST", "POST"]


async def test_apply_creates_a_workload_and_another_controller_writes_its_status(
    api: FakeApi,
) -> None:
    path = k8s.apps_path("deployments", NS, "served")

    def deployment(**labels: str) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "served", "namespace": NS, "labels": labels},
            "spec": {"replicas": 1},
        }

    created = await k8s.apply(path, deployment(a="1", b="2"))
    assert created["metadata"]["generation"] == 1
    api.set_status("Deployment", NS, "served", {"readyReplicas": 1})
    again = await k8s.apply(path, deployment(a="1"))  # b left out: removed
    assert again["metadata"]["labels"] == {"a": "1"}
    assert again["metadata"]["generation"] == 1  # labels are not the spec
    assert again["status"] == {"readyReplicas": 1}  # apply of the object keeps status
    same = await k8s.apply(path, deployment(a="1"))
    assert same["metadata"]["resourceVersion"] == again["metadata"]["resourceVersion"]  # no-op
