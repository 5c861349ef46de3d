"""The reconcile pipeline's own watch streams (``swarmkit_operator.watching``) against the
real apiserver: what a listing delivers, a watch's events in order, a stream the server ends
resumed without listing again, an object deleted while no stream was open, and ConfigMaps
watched as metadata only. (An expired resourceVersion, 410 Gone, cannot be had here on
demand: the apiserver's watch cache serves every version since it started; the reflector
lists again on it, like on the ERROR event carrying it.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from swarmkit_api import GROUP, VERSION
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube
from swarmkit_operator import k8s
from swarmkit_operator.indexes import Listing, Resource, list_all
from swarmkit_operator.watching import Reflector, reflectors

CONFIGMAPS = Resource("", "v1", "configmaps")
SKILLS = Resource(GROUP, VERSION, "skills")


class Seen:
    """What a reflector delivered: (type, name, has data)."""

    def __init__(self) -> None:
        self.events: list[tuple[str | None, str, bool]] = []
        self.arrived = asyncio.Event()

    async def __call__(self, type_: str | None, body: dict[str, Any]) -> None:
        name = (body.get("metadata") or {}).get("name", "")
        self.events.append((type_, name, "data" in body))
        self.arrived.set()

    async def until(self, want: tuple[str | None, str], timeout: float = 10.0) -> None:
        async def wait() -> None:
            while (want[0], want[1]) not in [(t, n) for t, n, _ in self.events]:
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(wait(), timeout)


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[None]:
    k8s.configure(kubeconfig=str(cluster.kubeconfig))
    yield
    await k8s.close_connections()


def create_skill(kube: Kube, namespace: str, name: str) -> None:
    skill = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Skill",
        "metadata": {"name": name},
        "spec": {
            "description": "Use when testing.",
            "category": "capability",
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    }
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "skills", skill)


def config_map(name: str, value: str = "v") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"test": "watch"}}, "data": {"k": value}}


async def test_listing_then_watch_events_in_order_and_resumed_without_listing_again(
    kube: Kube, namespace: str, api: None
) -> None:
    kube.core.create_namespaced_config_map(namespace, config_map("before"))
    seen = Seen()
    # The server ends each stream after 1 s: the reflector must resume, not list again.
    reflector = Reflector(CONFIGMAPS, namespace, seen, server_timeout=1)
    task = asyncio.create_task(reflector.run())
    try:
        await seen.until((None, "before"))
        kube.core.create_namespaced_config_map(namespace, config_map("during"))
        await seen.until(("ADDED", "during"))
        await asyncio.sleep(2.5)  # at least one stream ended by the server meanwhile
        kube.core.patch_namespaced_config_map("during", namespace, {"data": {"k": "2"}})
        kube.core.delete_namespaced_config_map("during", namespace)
        await seen.until(("DELETED", "during"))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    mine = [(t, n) for t, n, _ in seen.events if n in ("before", "during")]
    assert mine == [
        (None, "before"),
        ("ADDED", "during"),
        ("MODIFIED", "during"),
        ("DELETED", "during"),
    ]
    assert reflector.listings == 1 and reflector.resumes >= 3
    assert all(has_data for *_, has_data in seen.events)  # full objects unless asked


async def test_config_maps_as_metadata_only(kube: Kube, namespace: str, api: None) -> None:
    kube.core.create_namespaced_config_map(namespace, config_map("listed", "x" * 100_000))
    seen = Seen()
    reflector = Reflector(CONFIGMAPS, namespace, seen, metadata_only=True)
    task = asyncio.create_task(reflector.run())
    try:
        await seen.until((None, "listed"))
        kube.core.create_namespaced_config_map(namespace, config_map("watched", "y" * 100_000))
        await seen.until(("ADDED", "watched"))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert seen.events and not any(has_data for *_, has_data in seen.events)


async def test_an_object_deleted_while_no_stream_was_open_is_delivered_as_deleted(
    kube: Kube, namespace: str, crds: Any, api: None
) -> None:
    create_skill(kube, namespace, "gone-meanwhile")
    seen = Seen()
    reflector = Reflector(SKILLS, namespace, seen)
    await reflector.list()
    assert (None, "gone-meanwhile") in [(t, n) for t, n, _ in seen.events]
    kube.custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, "skills", "gone-meanwhile"
    )
    for _ in range(50):  # deletion is immediate (no finalizers), give the apiserver a moment
        await reflector.list()
        if ("DELETED", "gone-meanwhile") in [(t, n) for t, n, _ in seen.events]:
            break
        await asyncio.sleep(0.1)
    assert [(t, n) for t, n, _ in seen.events].count(("DELETED", "gone-meanwhile")) == 1
    assert reflector.known == {}


def test_namespace_patterns_need_one_cluster_wide_stream() -> None:
    async def deliver(type_: str | None, body: dict[str, Any]) -> None:
        return None

    assert [r.namespace for r in reflectors(SKILLS, ["a", "b", "a"], deliver)] == ["a", "b"]
    [wide] = reflectors(SKILLS, ["team-*", "ops"], deliver)
    assert wide.namespace is None and wide.patterns == ("team-*", "ops")
    assert wide._wanted({"metadata": {"namespace": "team-x"}})
    assert not wide._wanted({"metadata": {"namespace": "other"}})
    [everything] = reflectors(SKILLS, [], deliver)
    assert everything.namespace is None and everything._wanted({"metadata": {"namespace": "x"}})


async def test_a_stream_starts_from_the_start_up_listing_without_listing_again(
    kube: Kube, namespace: str, crds: Any, api: None
) -> None:
    """At start-up the indexes' own LIST is handed to the stream: a restart lists each
    resource once; what changed between that LIST and the stream still arrives."""
    create_skill(kube, namespace, "listed-at-start-up")
    listings: list[Listing] = []
    await list_all(SKILLS, [namespace], listings=listings)
    [listing] = listings
    assert listing.namespace == namespace and listing.resource_version
    create_skill(kube, namespace, "created-after-the-listing")

    gets: list[str] = []
    real, real_page = k8s.request, k8s.client.request_page

    async def request(verb: str, path: str, *args: Any, **kwargs: Any) -> tuple[int, Any]:
        gets.append(f"{verb} {path}")
        return await real(verb, path, *args, **kwargs)

    async def request_page(path: str, *args: Any) -> tuple[int, bytes | str]:
        gets.append(f"GET {path} (a page)")  # what a LIST is made of
        return await real_page(path, *args)

    seen = Seen()
    reflector = Reflector(SKILLS, namespace, seen, seed=listing)
    k8s.request = request
    k8s.client.request_page = request_page  # type: ignore[assignment]
    task = asyncio.create_task(reflector.run())
    try:
        await seen.until((None, "listed-at-start-up"))
        await seen.until(("ADDED", "created-after-the-listing"))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        k8s.request = real
        k8s.client.request_page = real_page  # type: ignore[assignment]
    assert gets == []  # no second LIST
    assert reflector.seed is None  # the listing is not held on to


@pytest.mark.parametrize(
    ("plural", "accept"),
    [
        ("skills", "application/json"),  # a custom resource's list: its keys sorted
        ("configmaps", "application/json"),  # a built-in list: kind, apiVersion, metadata
        ("configmaps", k8s.METADATA_ONLY),  # PartialObjectMetadataList
    ],
)
async def test_a_paged_list_asks_for_the_next_page_from_the_bytes_of_this_one(
    kube: Kube, namespace: str, crds: Any, api: None, plural: str, accept: str
) -> None:
    """The continue token read from a page's bytes (before it is decoded) is the one the
    apiserver put there, in each list format it sends; the pages are the objects, once each."""
    for i in range(5):
        if plural == "skills":
            create_skill(kube, namespace, f"paged-{i}")
        else:
            kube.core.create_namespaced_config_map(namespace, config_map(f"paged-{i}"))
    path = (
        k8s.custom_path(plural, namespace)
        if plural == "skills"
        else k8s.core_path(plural, namespace)
    )
    query = [("limit", "2")]
    if plural == "configmaps":
        query.append(("labelSelector", "test=watch"))
    # Each raw page: its token read from the bytes equals the decoded one.
    tokens, token = [], ""
    while True:
        status, raw = await k8s.client.request_page(
            path, [*query, *([("continue", token)] if token else [])], accept
        )
        assert status == 200 and isinstance(raw, bytes)
        decoded = str((json.loads(raw)["metadata"]).get("continue") or "")
        assert k8s.client.continue_token(raw) == decoded, raw[-300:]
        tokens.append(decoded)
        token = decoded
        if not token:
            break
    assert len(tokens) == 3 and tokens[-1] == ""  # 5 objects, 2 a page
    # And through list_pages, every request it made was read (no early one dropped).
    gets: list[str] = []
    real = k8s.client.request_page

    async def counted(p: str, q: list[tuple[str, str]], a: str = "") -> tuple[int, bytes | str]:
        gets.append(dict(q).get("continue", ""))
        return await real(p, q, a)

    k8s.client.request_page = counted  # type: ignore[assignment]
    try:
        names = [
            item["metadata"]["name"]
            async for page in k8s.list_pages(path, query, accept)
            for item in page["items"]
        ]
    finally:
        k8s.client.request_page = real  # type: ignore[assignment]
    assert names == [f"paged-{i}" for i in range(5)]
    assert len(gets) == 3, gets
