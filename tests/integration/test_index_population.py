"""The start-up LIST that fills the operator's indexes, against the real apiserver.

ConfigMaps are listed as metadata only (every ConfigMap index reads names, labels and
annotations), and what lands in the indexes is the same as from full objects: a restart
with thousands of rendered ConfigMaps decodes a fraction of the bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import swarmkit_operator.handlers  # noqa: F401  (registers every index)
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube
from swarmkit_operator import k8s
from swarmkit_operator.builders import (
    COMPONENT_LABEL,
    MANAGED_BY,
    PINNED_ANNOTATION,
    RUN_LABEL,
)
from swarmkit_operator.handlers.root import wiring
from swarmkit_operator.indexes import IndexId, populate

BIG = "x" * 200_000


@pytest.fixture
def api(cluster: LocalCluster) -> Iterator[list[tuple[str, str]]]:
    """The operator's API client on this cluster; the (path, Accept) of each GET made
    (a LIST's pages come through ``request_page``, the rest through ``request``)."""
    k8s.configure(kubeconfig=str(cluster.kubeconfig))
    seen: list[tuple[str, str]] = []
    real, real_page = k8s.request, k8s.client.request_page

    async def request(verb: str, path: str, *args: Any, **kwargs: Any) -> tuple[int, Any]:
        if verb == "GET":
            seen.append((path, str(kwargs.get("accept", "application/json"))))
        return await real(verb, path, *args, **kwargs)

    async def request_page(
        path: str, query: list[tuple[str, str]], accept: str = "application/json"
    ) -> tuple[int, bytes | str]:
        seen.append((path, accept))
        return await real_page(path, query, accept)

    k8s.request = request  # type: ignore[assignment]
    k8s.client.request_page = request_page  # type: ignore[assignment]
    try:
        yield seen
    finally:
        k8s.request = real  # type: ignore[assignment]
        k8s.client.request_page = real_page  # type: ignore[assignment]


async def test_config_maps_are_listed_as_metadata_and_indexed_alike(
    kube: Kube, namespace: str, crds: Any, api: list[tuple[str, str]]
) -> None:
    rendered = {
        "metadata": {
            "name": "skill-demo-0123abcd",
            "labels": {**MANAGED_BY, COMPONENT_LABEL: "skill", "swarmkit.dev/skill": "demo"},
        },
        "data": {"SKILL.md": BIG},
    }
    bundle = {
        "metadata": {
            "name": "run-r1-bundle",
            "labels": {RUN_LABEL: "r1"},
            "annotations": {PINNED_ANNOTATION: "skill-demo-0123abcd, agent-a-99"},
        },
        "data": {"bundle.json": BIG},
    }
    for cm in (rendered, bundle):
        kube.core.create_namespaced_config_map(namespace, cm)

    indexes = wiring().indexes()
    took = await populate(indexes, [namespace])

    assert "configmaps" in took and "skills" in took
    cm_lists = [accept for path, accept in api if path.endswith("/configmaps")]
    assert cm_lists and all(a == k8s.METADATA_ONLY for a in cm_lists)
    skill_lists = [accept for path, accept in api if path.endswith("/skills")]
    assert skill_lists == ["application/json"]  # skill indexes read the spec
    assert indexes.values(IndexId.RENDERED_CONFIG_MAP_NAMES, (namespace, "skill-demo-0123abcd"))
    [entry] = indexes.values(IndexId.RENDERED_CONFIG_MAPS, namespace)
    assert entry["kind"] == "Skill" and entry["owner"] == "demo"
    [pins] = indexes.values(IndexId.PINNED_CONFIG_MAPS, namespace)
    assert pins == {
        "bundle": "run-r1-bundle",
        "pins": ("skill-demo-0123abcd", "agent-a-99"),
        "finished": False,
    }
