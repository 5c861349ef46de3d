"""Hostile shapes against the real apiserver and the running operator (issue 47 item 6).

Each poison object goes into its own namespace while a canary lives in another one the
same operator watches. For every shape the test asserts what a user would notice:

* the poison is refused at admission with the field named, or gets a condition naming the
  problem within seconds (``Accepted``/``Ready`` ``False``, ``SelectorUnmatched`` ``True``);
* the operator's log shows no traceback loop (at most one traceback per poison object);
* a canary created in the other namespace while the poison exists is Ready within its
  usual time, and the operator is alive throughout.

Some shapes are refused at admission (cron and time zone shapes, a JSON Schema's ``type``,
label selectors, lists past their ``maxItems``), others get their condition from the
operator (a JSON Schema broken deep inside: ``InvalidSchema``; a Funnel whose judge skill is
missing: ``SkillNotFound`` until it is created): either way the field is named. Generated
specs of every kind are fuzzed in ``test_fuzz.py``; deleting what a parked Run pins is
``tests/integration/test_run_trust.py`` (kept, or ``PinnedRevisionMissing`` at once).

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

from swarmkit_api.decoding import loads
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, temp_namespace, wait_for
from tests.support.fuzzing import named_field, post

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
    return named_field(response.status, response.data)


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


@pytest.mark.parametrize("where", ["outputs", "funnel", "command"])
def test_a_json_schema_broken_deep_inside_is_invalid_schema_naming_the_field(
    kube: Kube, operator: ChaosOperator, namespaces: tuple[str, str], where: str
) -> None:
    """``{type: banana}`` three levels inside a Skill's outputs, a Funnel's validate.schema or
    a command's inputs: admitted (the apiserver cannot see inside), then ``Accepted=False
    InvalidSchema`` naming the nested field."""
    poison_ns, canary_ns = namespaces
    broken = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "banana"}}}}
    name = f"schema-{where}"
    if where == "outputs":
        doc, plural = skill(name), "skills"
        doc["spec"]["outputs"] = broken
        field = "spec.outputs.properties.a.items.type"
    elif where == "funnel":
        doc, plural = funnel(name, "no-such-judge"), "funnels"
        doc["spec"]["validate"] = {"schema": broken}
        field = "spec.validate.schema.properties.a.items.type"
    else:
        doc, plural = {**workspace(), "metadata": {"name": name}}, "workspaces"
        command = {"name": "count", "description": "Count.", "argv": ["wc"], "inputs": broken}
        doc["spec"]["commandPacks"] = [{"id": "t", "description": "T.", "commands": [command]}]
        field = "spec.commandPacks[0].commands[0].inputs.properties.a.items.type"
    assert post(kube, poison_ns, doc) == ""
    admitted = [
        conditioned(
            kube,
            poison_ns,
            plural,
            name,
            "Accepted",
            lambda c: c["reason"] == "InvalidSchema" and c["message"].startswith(field),
        )
    ]
    hold(kube, operator, canary_ns, "JsonSchema", admitted)


def test_a_funnel_whose_judge_skill_is_missing_waits_for_it(
    kube: Kube, operator: ChaosOperator, namespaces: tuple[str, str]
) -> None:
    poison_ns, canary_ns = namespaces
    assert post(kube, poison_ns, funnel("judged", "ghost-judge")) == ""
    missing = conditioned(
        kube,
        poison_ns,
        "funnels",
        "judged",
        "Ready",
        lambda c: c["reason"] == "SkillNotFound" and "'ghost-judge'" in c["message"],
    )
    hold(kube, operator, canary_ns, "Funnel", [missing])
    create(kube, poison_ns, {**skill("ghost-judge"), "metadata": {"name": "ghost-judge"}})
    wait_for(
        conditioned(kube, poison_ns, "funnels", "judged", "Ready", lambda c: c["status"] == "True"),
        CANARY_SECONDS,
        interval=0.2,
        message=operator.tail,
    )


HUGE = size(2_000, 20_000)


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("Skill", ("files",)),
        ("Agent", ("skills",)),
        ("Workspace", ("flowData",)),
    ],
)
def test_a_huge_list_is_refused_at_admission_naming_it(
    kube: Kube,
    operator: ChaosOperator,
    namespaces: tuple[str, str],
    kind: str,
    path: tuple[str, ...],
) -> None:
    """Thousands of items: a list with a ``maxItems`` is refused by the apiserver naming
    it; one without (``Workspace.spec.flowData`` today, bounded only by the 3 MiB request)
    is admitted and gets its condition within seconds, never a hang."""
    poison_ns, canary_ns = namespaces
    items: dict[str, Any] = {
        "files": [{"path": f"f{i}.md", "content": "x"} for i in range(HUGE)],
        "skills": [f"s{i}" for i in range(HUGE)],
        "flowData": [{"path": f"d{i}.txt", "content": "x"} for i in range(HUGE)],
    }
    docs = {"Skill": skill("huge"), "Workspace": {**workspace(), "metadata": {"name": "huge"}}}
    doc = docs.get(kind) or {
        "apiVersion": API,
        "kind": "Agent",
        "metadata": {"name": "huge"},
        "spec": {
            "workspaceRef": {"name": "default"},
            "model": {"provider": "replay"},
            "systemPrompt": "You are huge.",
        },
    }
    doc["spec"][path[0]] = items[path[0]]
    field = post(kube, poison_ns, doc)
    admitted = []
    if field == "":
        admitted.append(
            conditioned(kube, poison_ns, PLURALS[kind], "huge", "Ready", lambda c: bool(c))
        )
    else:
        assert field.startswith(f"spec.{path[0]}"), field
    hold(kube, operator, canary_ns, kind, admitted)


def funnel(name: str, judge: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Funnel",
        "metadata": {"name": name},
        "spec": {
            "judge": {"skill": judge},
            "approve": {
                "rules": [{"roles": ["leads"], "kOf": 1}],
                "roles": {"leads": {"groups": ["release-leads"]}},
            },
        },
    }
