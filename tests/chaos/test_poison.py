"""Hostile shapes against the real apiserver and the running operator (issue 47 item 6).

Each poison object goes into its own namespace while a canary lives in another one the
same operator watches. For every shape the test asserts what a user would notice:

* the poison is refused at admission with the field named, or gets a condition naming the
  problem within seconds (``Accepted``/``Ready`` ``False``, ``SelectorUnmatched`` ``True``);
* the operator's log shows no traceback loop (at most one traceback per poison object);
* a canary created in the other namespace while the poison exists is Ready within its
  usual time, and the operator is alive throughout.

Some shapes are refused at admission (cron and time zone shapes, a JSON Schema's ``type``,
label selectors), others get their condition from the operator: either way the field is
named.

``make test`` runs the reduced sizes (one poison of each shape, the Python-breaking depth
at 2,000 levels); ``make chaos`` (``SWARMKIT_CHAOS=full``) nests 4,000 levels, creates
several poisons of each shape at once and a 253-character name of every kind.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from swarmkit_api.decoding import loads
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, temp_namespace, wait_for

from ..integration.runs_support import GROUP, PLURALS, VERSION
from .support import (
    API,
    LEDGER,
    ChaosOperator,
    condition,
    create,
    record,
    size,
    skill,
    workspace,
)

DEPTH = size(2000, 4000)  # x2 JSON levels each: within the apiserver's 10,000
COPIES = size(1, 5)
#: The canary's usual time to Ready on this machine (the bad-input storm's bound too).
CANARY_SECONDS = 15.0
#: How long a poison may take to get its condition (the quota refresh runs every 10 s).
CONDITION_SECONDS = 30.0
LONG_NAME = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 253 characters

#: Filled as the cases run: kind → how many poison cases ran, and the seconds they took.
CASES: dict[str, int] = {}


@pytest.fixture(scope="module")
def namespaces(kept_namespaces: contextlib.ExitStack, kube: Kube) -> tuple[str, str]:
    poison = kept_namespaces.enter_context(temp_namespace(kube, "poison"))
    canary = kept_namespaces.enter_context(temp_namespace(kube, "canary"))
    LEDGER.namespaces.extend([poison, canary])
    for ns in (poison, canary):
        create(kube, ns, workspace())
    return poison, canary


@pytest.fixture(scope="module")
def operator(
    cluster: LocalCluster, crds: Any, namespaces: tuple[str, str]
) -> Iterator[ChaosOperator]:
    op = ChaosOperator(cluster.kubeconfig, {"watchNamespaces": list(namespaces)})
    op.start()
    started = time.monotonic()
    yield op
    record("poison_seconds", round(time.monotonic() - started, 1))
    record("poison_cases_per_kind", dict(CASES))
    op.stop()


def post_raw(kube: Kube, namespace: str, plural: str, text: str) -> str:
    """Create from JSON text (the client's json.dumps cannot encode 2,000 levels); the
    field the apiserver named when it refused, or "" when it admitted the object."""
    # Serialized as is (a str), with the client's credentials.
    method, full, headers, _, _ = kube.api_client.param_serialize(
        method="POST",
        resource_path=f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{plural}",
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    # The pool itself: the REST layer would json.dumps the text again.
    pool = kube.api_client.rest_client.pool_manager
    response = pool.request(method, full, body=text.encode(), headers=headers)
    if response.status == 201:
        return ""
    return _named_field(response.status, response.data)


def _named_field(status: int, data: bytes | str) -> str:
    assert status in (400, 422), f"HTTP {status}: {data!r:.400}"
    body = json.loads(data or "{}")
    causes = (body.get("details") or {}).get("causes") or ()
    named = [c.get("field", "") for c in causes if c.get("field")]
    text = str(body.get("message", ""))
    assert named or "spec." in text, f"refused without naming a field: {text:.400}"
    return named[0] if named else text


def post(kube: Kube, namespace: str, doc: dict[str, Any]) -> str:
    """Create ``doc``; the field named by a refusal, "" when admitted."""
    body = {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
    try:
        kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[doc["kind"]], body
        )
    except ApiException as exc:
        return _named_field(exc.status, exc.body or "")
    return ""


def deep_skill(name: str, levels: int) -> str:
    nested = (
        '{"type": "object", "properties": {"a": ' * levels + '{"type": "string"}' + ("}}" * levels)
    )
    spec = json.dumps(skill(name)["spec"])[:-1] + f', "outputs": {nested}}}'
    return (
        json.dumps({"apiVersion": API, "kind": "Skill", "metadata": {"name": name}})[:-1]
        + f', "spec": {spec}}}'
    )


def conditioned(
    kube: Kube,
    namespace: str,
    plural: str,
    name: str,
    type_: str,
    ok: Callable[[dict[str, Any]], bool],
) -> Callable[[], bool]:
    def check() -> bool:
        # Read as the operator reads it: the client's own json.loads fails on the poison.
        answer = kube.custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, name, _preload_content=False
        )
        c = condition(loads(answer.data), type_)
        return c is not None and ok(c)

    return check


def canary_in_time(kube: Kube, op: ChaosOperator, namespace: str, name: str) -> float:
    """Create a canary Skill in ``namespace``; the seconds it took to be Ready."""
    started = time.monotonic()
    create(kube, namespace, {**skill(name), "metadata": {"name": name}})
    wait_for(
        conditioned(kube, namespace, "skills", name, "Ready", lambda c: c["status"] == "True"),
        CANARY_SECONDS,
        interval=0.1,
        message=op.tail,
    )
    return time.monotonic() - started


def tracebacks(op: ChaosOperator) -> int:
    return Path(op.log_path).read_text(errors="replace").count("Traceback (most recent call")


def hold(
    kube: Kube, op: ChaosOperator, canary_ns: str, kind: str, admitted: list[Callable[[], bool]]
) -> None:
    """The common assertions: each admitted poison gets its condition, the canary is Ready
    in its usual time meanwhile, no traceback loop, the operator alive."""
    CASES[kind] = CASES.get(kind, 0) + 1
    before = tracebacks(op)
    took = canary_in_time(kube, op, canary_ns, f"canary-{kind.lower()}-{len(CASES)}")
    for check in admitted:
        wait_for(check, CONDITION_SECONDS, interval=0.5, message=op.tail)
    time.sleep(3.0)  # a loop would show more tracebacks now
    assert tracebacks(op) - before <= len(admitted), op.tail()
    assert op.alive(), op.tail()
    record(f"poison_canary_seconds_{kind}", round(took, 2))


def test_a_skill_nested_past_pythons_limit_is_its_own_problem(
    kube: Kube, operator: ChaosOperator, namespaces: tuple[str, str]
) -> None:
    poison_ns, canary_ns = namespaces
    admitted = []
    for i in range(COPIES):
        name = f"deep-{i}"
        if post_raw(kube, poison_ns, "skills", deep_skill(name, DEPTH)) == "":
            admitted.append(
                conditioned(
                    kube,
                    poison_ns,
                    "skills",
                    name,
                    "Accepted",
                    lambda c: c["status"] == "False" and "spec.outputs" in c.get("message", ""),
                )
            )
    hold(kube, operator, canary_ns, "Skill", admitted)


def test_a_skill_nested_past_the_builders_limit_ends_in_a_condition(
    kube: Kube, operator: ChaosOperator, namespaces: tuple[str, str]
) -> None:
    poison_ns, canary_ns = namespaces
    admitted = []
    for i in range(COPIES):
        name = f"deep130-{i}"
        if post_raw(kube, poison_ns, "skills", deep_skill(name, 135)) == "":
            admitted.append(
                conditioned(
                    kube, poison_ns, "skills", name, "Accepted", lambda c: c["status"] == "False"
                )
            )
    hold(kube, operator, canary_ns, "Skill", admitted)


def test_a_quota_with_an_invalid_selector_leaves_every_other_quota_refreshed(
    kube: Kube, operator: ChaosOperator, namespaces: tuple[str, str]
) -> None:
    poison_ns, canary_ns = namespaces
    quota: dict[str, Any] = {
        "apiVersion": API,
        "kind": "SpendQuota",
        "metadata": {"name": "bad"},
        "spec": {
            "cost": "1",
            "currency": "USD",
            "window": "daily",
            "selector": {"matchLabels": {"bad key!": "x"}},
        },
    }
    admitted = []
    if post(kube, poison_ns, quota) == "":
        admitted.append(
            conditioned(
                kube,
                poison_ns,
                "spendquotas",
                "bad",
                "SelectorUnmatched",
                lambda c: c["reason"] == "Invalid" and "spec.selector" in c.get("message", ""),
            )
        )
    good = {
        **quota,
        "metadata": {"name": "good"},
        "spec": {**quota["spec"], "selector": {"matchLabels": {"team": "b"}}},
    }
    assert post(kube, canary_ns, good) == ""
    admitted.append(
        conditioned(
            kube,
            canary_ns,
            "spendquotas",
            "good",
            "SelectorUnmatched",
            lambda c: c["reason"] == "NoMatch",
        )
    )
    hold(kube, operator, canary_ns, "SpendQuota", admitted)


@pytest.mark.parametrize("kind", ["Workspace", "Skill", "Agent"])
def test_a_253_character_name_gets_its_condition(
    kube: Kube, operator: ChaosOperator, namespaces: tuple[str, str], kind: str
) -> None:
    poison_ns, canary_ns = namespaces
    docs = {
        "Workspace": workspace(),
        "Skill": skill("long"),
        "Agent": {
            "apiVersion": API,
            "kind": "Agent",
            "metadata": {"name": "long"},
            "spec": {
                "workspaceRef": {"name": "default"},
                "model": {"provider": "replay"},
                "systemPrompt": "You are long.",
                "replay": [{"text": "done"}],
            },
        },
    }
    doc = {**docs[kind], "metadata": {"name": LONG_NAME}}
    field = post(kube, poison_ns, doc)
    admitted = []
    if field == "":
        admitted.append(
            conditioned(
                kube, poison_ns, PLURALS[kind], LONG_NAME, "Ready", lambda c: c["status"] == "True"
            )
        )
    else:  # a kind whose names are shorter by its schema says so, naming the field
        assert field == "metadata.name"
    hold(kube, operator, canary_ns, kind, admitted)


@pytest.mark.parametrize(
    "schedule", [{"cron": "every tuesday"}, {"cron": "0 9 * * *", "timezone": "Mars/Olympus"}]
)
def test_a_topology_with_a_bad_schedule_is_refused_or_not_accepted(
    kube: Kube, operator: ChaosOperator, namespaces: tuple[str, str], schedule: dict[str, str]
) -> None:
    poison_ns, canary_ns = namespaces
    name = f"sched-{len(CASES)}-{abs(hash(json.dumps(schedule))) % 1000}"
    doc = {
        "apiVersion": API,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {
            "workspaceRef": {"name": "default"},
            "agents": [{"name": "lead", "agentRef": {"name": "missing"}, "role": "root"}],
            "schedule": {**schedule, "input": "go"},
        },
    }
    field = post(kube, poison_ns, doc)
    admitted = []
    if field == "":
        admitted.append(
            conditioned(
                kube,
                poison_ns,
                "topologies",
                name,
                "Accepted",
                lambda c: c["status"] == "False" and "spec.schedule" in c.get("message", ""),
            )
        )
    else:
        assert "schedule" in field
    hold(kube, operator, canary_ns, "Topology", admitted)


def test_a_skill_whose_outputs_is_no_json_schema_is_refused_or_not_accepted(
    kube: Kube, operator: ChaosOperator, namespaces: tuple[str, str]
) -> None:
    poison_ns, canary_ns = namespaces
    doc = skill("banana")
    doc["spec"]["outputs"] = {"type": "banana"}
    field = post(kube, poison_ns, doc)
    admitted = []
    if field == "":
        admitted.append(
            conditioned(
                kube,
                poison_ns,
                "skills",
                "banana",
                "Accepted",
                lambda c: c["status"] == "False" and "spec.outputs" in c.get("message", ""),
            )
        )
    else:
        assert "outputs" in field
    hold(kube, operator, canary_ns, "Skill", admitted)
