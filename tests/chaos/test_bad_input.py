"""Property-based bad input against the real apiserver and the running operator.

Hypothesis generates Workspace / Skill / Agent / Topology / Run manifests from the valid
examples with one to three mutations each: wrong types, unicode, huge strings (up to
1.2 MiB, past the 1 MiB render limit), deep nesting, deleted fields, unknown fields,
references to nothing, self-cycles. Each is created through the API:

* rejected at admission → the error names a field path (``spec.…``/``metadata.…``);
* admitted → the operator must give it a condition with a reason at its generation
  (``Ready``/``Accepted`` for the four kinds, ``Succeeded`` for a Run).

Throughout, the operator never crashes (alive, no traceback in its log); after the storm a
canary Skill is Ready within seconds (no stall), and the operator's API request rate falls
back to idle (no hot loop). ``make test`` tries a few hundred cases, ``make chaos`` 2,000.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, temp_namespace, wait_for

from ..integration.runs_support import GROUP, PLURALS, VERSION, examples
from .support import LEDGER, ChaosOperator, agent, condition, record, size, skill

CASES = size(300, 2000)
HUGE_MAX = 1_200_000
FIELD_PATH = re.compile(r"\b(spec|metadata)(\.|\[|\b)")
CONDITION = {
    "Workspace": "Ready",
    "Skill": "Ready",
    "Agent": "Ready",
    "Topology": "Ready",
    "Run": "Succeeded",
}

BASES = [d for d in examples() if d["kind"] in CONDITION]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = {f"k{i}": value} if i % 2 else [value]
    return value


small_values = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=200),  # unicode, control characters, surrogates excluded by JSON
    st.sampled_from(["", " ", "../../etc/passwd", "💥" * 50, "a" * 300, "-rf", "null"]),
    st.lists(st.text(max_size=20), max_size=5),
    st.dictionaries(st.text(min_size=1, max_size=10), st.integers(), max_size=4),
    st.integers(min_value=5, max_value=60).map(_nested),
)
# ASCII with a unicode tail: the client sends JSON with \\u escapes (6 bytes a character), and
# past 3 MiB the apiserver answers 413 before any validation.
huge_values = st.integers(min_value=100_000, max_value=HUGE_MAX).map(lambda n: "x" * n + "ü✓💥")


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    doc["metadata"] = {"name": "x"}  # renamed per case
    spec_paths = [p for p in _paths(doc["spec"]) if p]
    for i in range(draw(st.integers(min_value=1, max_value=3))):
        how = draw(st.sampled_from(["set", "set", "delete", "unknown", "ref", "huge", "cycle"]))
        if how == "huge" and i > 0:
            how = "set"  # one huge value per case: two would pass etcd's request limit
        path = draw(st.sampled_from(spec_paths)) if spec_paths else ()
        parent: Any = doc["spec"]
        try:
            for key in path[:-1]:
                parent = parent[key]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation changed the shape
        last = path[-1] if path else None
        if how == "delete" and last is not None:
            with contextlib.suppress(KeyError, IndexError, TypeError):
                del parent[last]
        elif how in ("set", "huge") and last is not None:
            value = draw(huge_values if how == "huge" else small_values)
            with contextlib.suppress(KeyError, IndexError, TypeError):
                parent[last] = value
        elif how == "unknown":
            doc["spec"][draw(st.text(min_size=1, max_size=30))] = draw(small_values)
        elif how == "ref":
            doc["spec"][draw(st.sampled_from(["workspaceRef", "topologyRef", "agentRef"]))] = {
                "name": draw(st.sampled_from(["missing", "x" * 253, "Ünïcode", ""]))
            }
        elif how == "cycle" and doc["kind"] == "Topology":
            # its root agent grants a skill that runs this very topology (made per case)
            doc["spec"]["agents"] = [
                {"name": "root", "agentRef": {"name": "SELF-a"}, "role": "root"}
            ]
            doc["cycle"] = True
    return doc


@pytest.fixture(scope="module")
def storm_ns(kept_namespaces: contextlib.ExitStack, kube: Kube) -> str:
    ns = kept_namespaces.enter_context(temp_namespace(kube, "bad-input"))
    LEDGER.namespaces.append(ns)
    return ns


def _rejection(exc: ApiException) -> str:
    """The field path the apiserver named, or '' if it named none."""
    try:
        body = json.loads(exc.body or "{}")
    except ValueError:
        return ""
    fields = [c.get("field", "") for c in (body.get("details") or {}).get("causes") or ()]
    named = [f for f in fields if f]
    if named:
        return named[0]
    m = FIELD_PATH.search(str(body.get("message", "")))
    return m.group(0) if m else ""


@pytest.mark.timeout(size(900, 3600))
def test_generated_manifests_are_rejected_with_a_path_or_conditioned_with_a_reason(
    cluster: LocalCluster, kube: Kube, crds: Any, storm_ns: str
) -> None:
    ns = storm_ns
    op = ChaosOperator(cluster.kubeconfig, {"watchNamespaces": [ns]})
    op.start()
    counter = itertools.count()
    cases = [0]
    admitted: list[tuple[str, str]] = []
    rejected: dict[str, int] = {}
    unexplained: list[str] = []

    @settings(
        max_examples=CASES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(doc=manifests())
    def storm(doc: dict[str, Any]) -> None:
        name = f"f{next(counter):05d}"
        cases[0] += 1
        body = copy.deepcopy(doc)
        body["metadata"] = {"name": name, "namespace": ns}
        nodes = body["spec"].get("agents")
        cyclic = body.pop("cycle", False)
        if cyclic and not (isinstance(nodes, list) and nodes and isinstance(nodes[0], dict)):
            cyclic = False  # a later mutation replaced the agents: just a bad topology
        if cyclic:
            body["spec"]["agents"][0]["agentRef"]["name"] = f"{name}-a"
            caller = {
                **skill(f"{name}-s"),
                "spec": {
                    **skill(f"{name}-s")["spec"],
                    "implementation": {"type": "agent", "topology": name},
                },
            }
            kube.custom.create_namespaced_custom_object(GROUP, VERSION, ns, "skills", caller)
            kube.custom.create_namespaced_custom_object(
                GROUP, VERSION, ns, "agents", agent(f"{name}-a", [f"{name}-s"])
            )
            admitted.extend([("Skill", f"{name}-s"), ("Agent", f"{name}-a")])
        try:
            kube.custom.create_namespaced_custom_object(
                GROUP, VERSION, ns, PLURALS[body["kind"]], body
            )
        except ApiException as exc:
            path = _rejection(exc)
            if exc.status in (400, 422) and path:
                rejected[body["kind"]] = rejected.get(body["kind"], 0) + 1
            else:
                unexplained.append(f"{name} {body['kind']}: HTTP {exc.status} {exc.body!r:.400}")
            return
        admitted.append((body["kind"], name))

    started = time.monotonic()
    try:
        storm()
        storm_seconds = time.monotonic() - started
        assert not unexplained, "\n".join(unexplained[:20])
        assert op.alive(), op.tail()

        def unconditioned() -> list[str]:
            missing = []
            for kind in CONDITION:
                items = kube.custom.list_namespaced_custom_object(
                    GROUP, VERSION, ns, PLURALS[kind]
                )["items"]
                by_name = {o["metadata"]["name"]: o for o in items}
                for k, name in admitted:
                    if k != kind:
                        continue
                    o = by_name.get(name)
                    c = condition(o or {}, CONDITION[kind])
                    if (
                        o is None
                        or c is None
                        or not c.get("reason")
                        or c.get("observedGeneration") != o["metadata"]["generation"]
                    ):
                        missing.append(f"{kind} {name}: {c}")
            return missing

        left: list[list[str]] = [[]]

        def all_conditioned() -> bool:
            left[0] = unconditioned()
            return not left[0]

        wait_for(
            all_conditioned,
            size(180, 900),
            interval=1.0,
            message=lambda: (
                f"{len(left[0])} admitted without a condition: {left[0][:10]}\n" + op.tail()
            ),
        )
        conditioned_after = time.monotonic() - started - storm_seconds

        # no stall: a canary created after the storm is Ready within seconds
        canary_start = time.monotonic()
        kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, "skills", {**skill("canary"), "metadata": {"name": "canary"}}
        )

        def canary_ready() -> bool:
            o = kube.custom.get_namespaced_custom_object(GROUP, VERSION, ns, "skills", "canary")
            c = condition(o, "Ready")
            return c is not None and c["status"] == "True"

        wait_for(canary_ready, 15, interval=0.1, message=op.tail)
        canary_seconds = time.monotonic() - canary_start

        # no hot loop: the API request rate falls back to idle
        # no hot loop: the API request rate falls back to idle. Three 5 s windows; a one-off
        # burst (the re-LIST 30 s after start-up) may fill one, a loop would fill them all.
        time.sleep(2)
        windows = [op.request_rate(5) for _ in range(3)]
        quiet = [rate for rate, _ in windows if rate <= 0.2]
        idle_rate = min(rate for rate, _ in windows)
        assert len(quiet) >= 2, f"API requests/s after the storm: {windows}"
        assert op.alive(), op.tail()
        assert op.crashes() == [], "\n".join(op.crashes()[:5]) + "\n" + op.tail()
    finally:
        op.stop()
    record(
        "bad_input",
        {
            "cases": cases[0],
            "rejectedAtAdmission": rejected,
            "admittedAndConditioned": len(admitted),
            "stormSeconds": round(storm_seconds, 1),
            "allConditionedSecondsAfterStorm": round(conditioned_after, 1),
            "canaryReadySeconds": round(canary_seconds, 2),
            "idleApiRequestsPerSecond": round(idle_rate, 2),
        },
    )
