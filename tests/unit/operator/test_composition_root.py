"""The composition root only composes (issue 37, N5 of the structure review).

What the root used to do itself now lives where its meaning is, and is tested there:
keeping the indexes over a resource no kind watches current (``Indexes.apply`` through
``common.index_event``), turning a reflector's event into the event functions' keyword
arguments (``events.deliverer``), and the liveness probe's detail
(``Controller.health``). The root wires them: these tests go through the wiring it
builds, so a move that loses a step fails here.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from swarmkit_api import GROUP, VERSION
from swarmkit_operator.config import OperatorConfig, Settings
from swarmkit_operator.gateways import GatewayController
from swarmkit_operator.handlers import common, root
from swarmkit_operator.handlers.events import deliverer, resource_of, stream_of
from swarmkit_operator.indexes import RESOURCES, IndexId, Listing, Resource
from swarmkit_operator.reconcile.controller import ControllerSettings, Services
from swarmkit_operator.runs import Indexes as RunIndexes
from swarmkit_operator.watching import Reflector


def run(uid: str, name: str, rv: str) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "name": name, "namespace": "ns", "resourceVersion": rv},
        "spec": {"topologyRef": {"name": "t"}},
        "status": {},
    }


async def test_a_resource_no_kind_watches_is_indexed_by_the_first_function_of_its_stream() -> None:
    """Runs are no kind: their stream starts with the one index keeper, and an event
    delivered the way a reflector delivers it is in the index before the Runs controller's
    function reads it, and gone after its DELETED."""
    wired = root.wiring()
    ctl = wired.controller(OperatorConfig())
    functions = wired.events.registered(GROUP, VERSION, "runs")
    assert functions[0] is common.index_event
    seen: list[bool] = []

    def kick(uid: str) -> None:  # the Runs controller reads the index its kick is about
        seen.append(bool(ctl.lookup_all(IndexId.RUNS_BY_UID, uid)))

    dispatch = wired.events.dispatcher(GROUP, VERSION, "runs")
    assert dispatch is not None
    runs = SimpleNamespace(kick=kick)
    library = SimpleNamespace(run_seen=lambda *a: None)
    app = SimpleNamespace(controller=ctl, runs=runs, library=library)
    deliver = deliverer(dispatch, "runs", app=app, logger=None)

    await deliver("ADDED", run("u1", "r1", "5"))
    assert seen == [True] and ctl.lookup(IndexId.RUNS_BY_UID, "u1")["name"] == "r1"
    await deliver("DELETED", run("u1", "r1", "6"))
    assert seen == [True, False] and ctl.indexes.keys(IndexId.RUNS_BY_UID) == []


async def test_the_deliverer_hands_every_function_kopfs_arguments_and_the_context() -> None:
    got: dict[str, Any] = {}

    async def dispatch(**kwargs: Any) -> None:
        got.update(kwargs)

    app = object()
    await deliverer(dispatch, "runs", app=app, logger="log")("MODIFIED", run("u1", "r1", "7"))
    assert got["type"] == "MODIFIED" and got["app"] is app and got["logger"] == "log"
    assert (got["namespace"], got["name"], got["uid"]) == ("ns", "r1", "u1")
    assert got["spec"] == {"topologyRef": {"name": "t"}} and got["status"] == {}
    assert got["labels"] == {} and got["annotations"] == {} and got["resource_plural"] == "runs"


def test_a_stream_key_and_its_resource_are_each_others_inverse() -> None:
    for resource in (*RESOURCES.values(), Resource("batch", "v1", "jobs")):
        assert resource_of(stream_of(resource, "")[0]) == resource


async def test_the_probe_reports_the_queue_and_fails_once_every_worker_has_stopped() -> None:
    ctl = root.wiring().controller(OperatorConfig(), ControllerSettings(workers=2))
    memo = SimpleNamespace(app=None)
    assert root.probe_queue(memo) == {"depth": 0, "workers": 0}  # before the start-up built it
    ctl.enqueue("Skill", "ns", "s", delay=60.0)
    await ctl.start()
    try:
        health = ctl.health()
        assert health["workers"] == 3 and health["busy"] == 0  # two workers, the Event poster
        for task in ctl.tasks:
            task.cancel()
        await asyncio.gather(*ctl.tasks, return_exceptions=True)
        with pytest.raises(RuntimeError, match="every reconcile worker has stopped"):
            ctl.health()
    finally:
        await ctl.stop()


async def test_the_controller_is_built_whole_from_the_parsed_settings_and_its_services() -> None:
    """Its settings come from the one parsed ``Settings`` (the environment is read once,
    by ``config.py``), what its reconcilers call is one frozen part given to its
    constructor: none of it can be set on it afterwards (``ctl.resolver = ...`` was how a
    collaborator used to arrive)."""
    ours = Settings(namespaces=("team-a",), workers=3, gc_grace_seconds=2.5, resync_seconds=0)
    wired = root.wiring()
    services = Services(resolver=object(), skill_usage=lambda ns, name: {"runs": 1})
    async with contextlib.AsyncExitStack() as closing:
        ctl = root._controller(wired, ours, wired.indexes(), services, closing)
        assert ctl.settings == ControllerSettings(("team-a",), 3, gc_grace=2.5, resync_seconds=0)
        assert ctl.services is services and ctl.services.leadership.leading
        with pytest.raises(dataclasses.FrozenInstanceError):
            ctl.services.resolver = None  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            ctl.settings.workers = 1  # type: ignore[misc]


def test_the_runs_controller_reads_the_shared_indexes_live() -> None:
    """What the root used to map by hand (``_run_indexes``) is the Runs side's own
    ``Indexes.of``: every index it reads, as live views of the one shared set."""
    shared = root.wiring().indexes()
    mine = RunIndexes.of(shared)
    assert all(getattr(mine, f.name) is not None for f in dataclasses.fields(mine))
    shared.update("runs", run("u1", "r1", "3"))
    assert mine.runs["u1"][0]["name"] == "r1"


def test_the_gateways_controller_is_seeded_with_the_indexed_agents_that_have_a_gateway() -> None:
    shared = root.wiring().indexes()
    for name, spec in (("gw", {"gateway": {"port": 8080}}), ("plain", {})):
        meta = {"uid": f"{name}-uid", "name": name, "namespace": "ns", "generation": 1}
        shared.update("agents", {"metadata": meta, "spec": spec, "status": {}})
    resolver: Any = None  # the seed resolves nothing
    gateways = GatewayController(OperatorConfig(), resolver, shared.view(IndexId.AGENT_VIEWS))
    gateways.seed()
    assert gateways.served == {"ns": {"gw"}}
    assert gateways.queue.pending(("ns", "gw")) and not gateways.queue.pending(("ns", "plain"))


def test_a_reflector_starts_from_the_start_up_listing_of_its_own_scope_and_selector() -> None:
    async def deliver(type_: str | None, body: dict[str, Any]) -> None:
        return None

    def listing(namespace: str | None, selector: str, plural: str = "pods") -> Listing:
        return Listing(plural, namespace, False, "7", [], selector)

    labelled = Reflector(
        Resource("", "v1", "pods"), "ns", deliver, label_selector="swarmkit.dev/run-uid"
    )
    ours = listing("ns", "swarmkit.dev/run-uid")
    labelled.seed_from(
        [listing("ns", ""), listing("other", "swarmkit.dev/run-uid"), ours, listing("ns", "x")]
    )
    assert labelled.seed is ours
    labelled.seed_from([listing("ns", "swarmkit.dev/run-uid", plural="jobs")])
    assert labelled.seed is None  # none of its own: it lists
