"""Run isolation on the real apiserver: a Run's NetworkPolicy exists before its pod, selects
exactly that pod, opens the declared destinations only, and goes with the Run.

The process node runs every pod in the host's network namespace, so nothing enforces the
policy here (docs/isolation.md); the runner's own check is tested in
tests/unit/runner/test_egress_guard.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for

from .runs_support import (
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    get,
    pods,
    run_manifest,
    wait_ready,
)


def _workspace(kube: Kube, ns: str, **extra: Any) -> None:
    ws = get(kube, ns, "Workspace", "default")
    assert ws is not None
    generation = ws["metadata"]["generation"]
    spec = {**ws["spec"], **extra}
    apply(
        kube,
        ns,
        {"apiVersion": ws["apiVersion"], "kind": "Workspace", "metadata": {"name": "default"},
         "spec": spec},
    )  # fmt: skip
    wait_for(
        lambda: get(kube, ns, "Workspace", "default")["status"]["observedGeneration"] > generation,  # type: ignore[index]
        30,
    )


def _sleeper(kube: Kube, ns: str) -> None:
    sleep = {"name": "bash", "arguments": {"command": "sleep 120", "timeout_seconds": 300}}
    apply(kube, ns, agent_with("sleeper", [{"toolCalls": [sleep]}, {"text": "done"}], bash=True))
    wait_ready(kube, ns, "Agent", "sleeper")


def _policies(kube: Kube, ns: str) -> list[Any]:
    from kubernetes import client

    found = client.NetworkingV1Api(kube.api_client).list_namespaced_network_policy(ns)
    return list(kube.api_client.sanitize_for_serialization(found)["items"])


def _running_pod_of(kube: Kube, ns: str, run: str) -> Any:
    def check() -> Any:
        for p in pods(kube, ns):
            if p.metadata.labels.get("swarmkit.dev/run") == run and p.status.phase == "Running":
                return p
        return None

    return wait_for(check, 60, message=lambda: debug(kube, ns))


def test_run_policy_selects_its_pod_and_goes_with_the_run(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    apply_examples(kube, ns)
    tool = {"name": "ticket", "description": "Files a ticket.",
            "http": {"url": "http://127.0.0.2:8443/tickets"}}  # fmt: skip
    gone = {"name": "gone", "description": "Nowhere.", "http": {"url": "https://nowhere.invalid/x"}}
    _workspace(
        kube,
        ns,
        tools=[tool, gone],
        egress={"allow": [{"cidr": "10.20.0.0/16", "ports": [5432]}]},
    )
    _sleeper(kube, ns)
    create(kube, ns, run_manifest("one", agent="sleeper", timeout=300))
    create(kube, ns, run_manifest("two", agent="sleeper", timeout=300))
    pod_one = _running_pod_of(kube, ns, "one")
    pod_two = _running_pod_of(kube, ns, "two")
    run_one = get(kube, ns, "Run", "one")
    assert run_one is not None
    uid = run_one["metadata"]["uid"]
    by_name = {p["metadata"]["name"]: p for p in _policies(kube, ns)}
    policy = by_name[run_one["status"]["jobName"]]
    assert policy["metadata"]["ownerReferences"][0]["uid"] == uid
    # the policy existed before the pod was created
    assert policy["metadata"]["creationTimestamp"] <= pod_one.metadata.creation_timestamp.strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    # its selector, asked of the apiserver, selects exactly the Run's pod
    selector = ",".join(f"{k}={v}" for k, v in policy["spec"]["podSelector"]["matchLabels"].items())
    selected = kube.core.list_namespaced_pod(ns, label_selector=selector).items
    assert [p.metadata.name for p in selected] == [pod_one.metadata.name]
    assert pod_two.metadata.name not in {p.metadata.name for p in selected}
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and not spec.get("ingress")
    egress = spec["egress"]
    assert egress[0]["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert {"to": [{"ipBlock": {"cidr": "127.0.0.2/32"}}],
            "ports": [{"protocol": "TCP", "port": 8443}]} in egress  # fmt: skip
    assert {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}],
            "ports": [{"protocol": "TCP", "port": 5432}]} in egress  # fmt: skip
    # the runner checks its connections against the same plan, pinned in the bundle
    bundle_cm = kube.core.read_namespaced_config_map(run_one["status"]["bundleConfigMap"], ns)
    plan = json.loads(bundle_cm.data["bundle.json"])["egress"]
    assert {"kind": "http-tool", "name": "ticket", "host": "127.0.0.2", "port": 8443,
            "addresses": ["127.0.0.2/32"]} in plan["endpoints"]  # fmt: skip
    assert any(d["cidr"] == "169.254.0.0/16" for d in plan["denied"])
    # a declared host that does not resolve gets no rule, and the Run says so
    assert plan["unresolved"] == ["nowhere.invalid:443"]
    assert all(443 not in {p["port"] for p in r.get("ports", [])} for r in egress)
    events = wait_for(
        lambda: [
            e
            for e in kube.core.list_namespaced_event(
                ns, field_selector=f"involvedObject.uid={uid}"
            ).items
            if e.reason == "EgressUnresolved"
        ],
        20,
    )
    assert events[0].type == "Warning" and "nowhere.invalid:443" in events[0].message
    # deleting the Run deletes its policy (garbage collector), the other Run's stays
    kube.custom.delete_namespaced_custom_object("swarmkit.dev", "v1alpha1", ns, "runs", "one")
    wait_for(
        lambda: (
            policy["metadata"]["name"] not in {p["metadata"]["name"] for p in _policies(kube, ns)}
        ),
        60,
        message="the garbage collector to delete the Run's NetworkPolicy",
    )
    run_two = get(kube, ns, "Run", "two")
    assert run_two is not None
    assert run_two["status"]["jobName"] in {p["metadata"]["name"] for p in _policies(kube, ns)}


def test_policy_none_creates_no_policy(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    apply_examples(kube, ns)
    _workspace(kube, ns, egress={"policy": "none"})
    _sleeper(kube, ns)
    create(kube, ns, run_manifest("free", agent="sleeper", timeout=300))
    _running_pod_of(kube, ns, "free")
    assert _policies(kube, ns) == []
    run = get(kube, ns, "Run", "free")
    assert run is not None
    bundle_cm = kube.core.read_namespaced_config_map(run["status"]["bundleConfigMap"], ns)
    assert json.loads(bundle_cm.data["bundle.json"]).get("egress") is None


def test_missing_runtime_class_is_a_reason_then_the_run_starts_under_it(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    from kubernetes import client

    ns = namespace
    rc_name = f"sandboxed-{ns}"
    apply_examples(kube, ns)
    _workspace(kube, ns, runtime={"runtimeClassName": rc_name})
    wait_ready(kube, ns, "Topology", "review-pipeline")
    create(kube, ns, run_manifest("sandboxed"))
    run = wait_for(
        lambda: (
            (r := get(kube, ns, "Run", "sandboxed"))
            and any(
                c.get("reason") == "RuntimeClassNotFound" for c in r["status"].get("conditions", [])
            )
            and r
        ),
        30,
        message=lambda: debug(kube, ns, operator),
    )
    (cond,) = [c for c in run["status"]["conditions"] if c["type"] == "Succeeded"]
    assert cond["status"] == "Unknown" and f"RuntimeClass {rc_name} not found" in cond["message"]
    assert pods(kube, ns) == [] and "jobName" not in run["status"]
    node = client.NodeV1Api(kube.api_client)
    node.create_runtime_class({"metadata": {"name": rc_name}, "handler": "runc"})
    try:
        run = wait_for(
            lambda: (
                (r := get(kube, ns, "Run", "sandboxed")) and r["status"].get("completionTime") and r
            ),
            90,
            message=lambda: debug(kube, ns, operator),
        )
        (cond,) = [c for c in run["status"]["conditions"] if c["type"] == "Succeeded"]
        assert cond["reason"] == "Succeeded", debug(kube, ns, operator)
        job = kube.batch.read_namespaced_job(run["status"]["jobName"], ns)
        assert job.spec.template.spec.runtime_class_name == rc_name
    finally:
        node.delete_runtime_class(rc_name)


def test_suite_namespaces_enforce_pod_security_restricted(kube: Kube, namespace: str) -> None:
    """The apiserver itself refuses a pod that breaks ``restricted`` in the suite's
    namespaces, so every test that gets an operator-built pod running proves it complies."""
    from kubernetes.client.exceptions import ApiException

    labels = kube.core.read_namespace(namespace).metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    loose = {
        "metadata": {"name": "loose"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]},
    }
    with pytest.raises(ApiException) as refused:
        kube.core.create_namespaced_pod(namespace, loose)
    assert refused.value.status == 403
    body = str(refused.value.body)
    assert "violates PodSecurity" in body and "restricted:latest" in body


def test_the_runner_in_the_pod_refuses_what_the_pinned_plan_does_not_declare(
    kube: Kube, namespace: str, operator: OperatorProcess, cluster: LocalCluster
) -> None:
    """The plan the operator pinned reaches the runner: in the real pod, a tool call to an
    undeclared host and one to the metadata address (inside a wide allow) are refused with
    the destination named, and the Run goes on."""
    ns = namespace
    apply_examples(kube, ns)
    read = {"permission": "readonly", "effects": "read"}
    tools = [
        {"name": "dyn", "description": "Any host.", "http": {"url": "http://{host}/x"}, **read},
        {"name": "fetch", "description": "Any target.",
         "http": {"url": "http://{target}/f"}, **read},
    ]  # fmt: skip
    _workspace(kube, ns, tools=tools, egress={"allow": [{"cidr": "169.0.0.0/8", "ports": [80]}]})
    calls = [
        {"name": "dyn", "arguments": {"host": "localhost"}},
        {"name": "fetch", "arguments": {"target": "169.254.169.254"}},
    ]
    agent = agent_with("prober", [{"toolCalls": calls}, {"text": "probed"}], tools=["dyn", "fetch"])
    apply(kube, ns, agent)
    wait_ready(kube, ns, "Agent", "prober")
    create(kube, ns, run_manifest("probe", agent="prober"))
    run = wait_for(
        lambda: (r := get(kube, ns, "Run", "probe")) and r["status"].get("completionTime") and r,
        90,
        message=lambda: debug(kube, ns, operator),
    )
    (cond,) = [c for c in run["status"]["conditions"] if c["type"] == "Succeeded"]
    assert cond["reason"] == "Succeeded", debug(kube, ns, operator)
    lines = [
        json.loads(line)
        for line in cluster.pod_logs(ns, run["status"]["podName"]).splitlines()
        if line.startswith("{")
    ]
    errors = {d["tool"]: d["error"] for d in lines if d.get("event") == "tool.call"}
    assert errors["dyn"].startswith("EgressRefused: egress to localhost:80 refused")
    assert "not a declared destination" in errors["dyn"]
    assert errors["fetch"].startswith("EgressRefused: egress to 169.254.169.254:80 refused")
    assert "link-local" in errors["fetch"]
