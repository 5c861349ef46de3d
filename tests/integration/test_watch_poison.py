"""One object no Python decoder can read does not stop the watch of its resource (issue 47
item 1): the real apiserver admits a value nested 2,000 levels under a field that keeps
unknown fields, and the reflector delivers it marked (the fields cut) and every object
after it, without listing again or retrying from the same version.

The resource is a CRD of this test's own (``poisons.chaos.swarmkit.test``): the product's
CRDs bound nesting at admission, and what is tested here is the stream, whatever got in."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube
from swarmkit_operator import k8s
from swarmkit_operator.indexes import Resource
from swarmkit_operator.watching import Reflector

GROUP = "chaos.swarmkit.test"
POISONS = Resource(GROUP, "v1", "poisons")
LEVELS = 2000


@pytest.fixture(scope="module")
def poison_crd(cluster: LocalCluster) -> Iterator[None]:
    kube = Kube.from_kubeconfig(cluster.kubeconfig)
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"poisons.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "poisons", "singular": "poison", "kind": "Poison"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    kube.apiext.create_custom_resource_definition(crd)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = kube.apiext.read_custom_resource_definition(f"poisons.{GROUP}")
        if any(c.type == "Established" and c.status == "True" for c in got.status.conditions or ()):
            break
        time.sleep(0.2)
    yield
    kube.apiext.delete_custom_resource_definition(f"poisons.{GROUP}")


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[None]:
    k8s.configure(kubeconfig=str(cluster.kubeconfig))
    yield
    await k8s.close_connections()


def create(kube: Kube, namespace: str, name: str, levels: int) -> None:
    # As text: the client's own json.dumps cannot encode it either.
    nested = '{"a": ' * levels + '"bottom"' + "}" * levels
    text = (
        f'{{"apiVersion": "{GROUP}/v1", "kind": "Poison", "metadata": {{"name": "{name}"}}, '
        f'"spec": {{"schema": {nested}}}}}'
    )
    # Serialized as is (a str), with the client's credentials.
    method, full, headers, _, _ = kube.api_client.param_serialize(
        method="POST",
        resource_path=f"/apis/{GROUP}/v1/namespaces/{namespace}/poisons",
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    # The pool itself: the REST layer would json.dumps the text again.
    pool = kube.api_client.rest_client.pool_manager
    response = pool.request(method, full, body=text.encode(), headers=headers)
    assert response.status == 201, response.data


class Seen:
    def __init__(self) -> None:
        self.bodies: dict[str, dict[str, Any]] = {}
        self.arrived = asyncio.Event()

    async def __call__(self, type_: str | None, body: dict[str, Any]) -> None:
        self.bodies[body["metadata"]["name"]] = body
        self.arrived.set()

    async def until(self, name: str, timeout: float = 10.0) -> dict[str, Any]:
        async def wait() -> None:
            while name not in self.bodies:
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(wait(), timeout)
        return self.bodies[name]


async def test_a_poison_event_is_delivered_marked_and_the_stream_goes_on(
    kube: Kube, namespace: str, api: None, poison_crd: None
) -> None:
    seen = Seen()
    reflector = Reflector(POISONS, namespace, seen)
    task = asyncio.create_task(reflector.run())
    try:
        create(kube, namespace, "before", 2)
        await seen.until("before")
        create(kube, namespace, "poison", LEVELS)
        create(kube, namespace, "canary", 2)
        canary = await seen.until("canary", timeout=5.0)
        assert k8s.too_deep(canary) == []
        # The user's field first (managedFields, which mirrors it, is cut too).
        cut = k8s.too_deep(seen.bodies["poison"])
        assert cut[0].startswith("spec.schema.a.a.a"), cut
        # The watch went on: no second listing, no resume from the same version.
        assert reflector.listings == 1 and reflector.resumes == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_listing_with_a_poison_item_delivers_every_other_item(
    kube: Kube, namespace: str, api: None, poison_crd: None
) -> None:
    create(kube, namespace, "poison", LEVELS)
    create(kube, namespace, "canary", 2)
    seen = Seen()
    reflector = Reflector(POISONS, namespace, seen)
    task = asyncio.create_task(reflector.run())
    try:
        await seen.until("canary", timeout=5.0)
        await seen.until("poison", timeout=5.0)
        assert k8s.too_deep(seen.bodies["poison"]) and not k8s.too_deep(seen.bodies["canary"])
        assert json.dumps(seen.bodies["canary"]["spec"]) == '{"schema": {"a": {"a": "bottom"}}}'
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
