"""A served Topology's bundle ConfigMap, Deployment, Service and Serving condition."""

from __future__ import annotations

import dataclasses

from swarmkit_api.topology import ServeSpec
from swarmkit_operator.builders import PINNED_ANNOTATION, RUN_LABEL
from swarmkit_operator.builders.serve import (
    SERVE_LABEL,
    TOKEN_ENV_PREFIX,
    TopologyRef,
    build_serve_config_map,
    build_serve_workload,
    card_url,
    serve_name,
    serving_verdict,
)
from swarmkit_operator.builders.workload import CHECKSUM_ANNOTATION
from swarmkit_operator.config import OperatorConfig

from .fixtures import example_bundle

TOPO = TopologyRef("review-pipeline", "team-b", "uid-topo")


def serve_spec(**kw: object) -> ServeSpec:
    return ServeSpec.model_validate(
        {"auth": {"bearerTokens": [{"name": "tokens", "key": "team-a"}]}, **kw}
    )


def workload(rendered: object = None, **kw: object) -> tuple[dict, dict, dict]:  # type: ignore[type-arg]
    _, r = example_bundle()
    rendered = rendered or r
    cm = build_serve_config_map(TOPO, rendered)  # type: ignore[arg-type]
    dep, svc = build_serve_workload(
        topology=TOPO,
        serve=serve_spec(**kw),
        rendered=rendered,  # type: ignore[arg-type]
        bundle_config_map=cm["metadata"]["name"],
        config=OperatorConfig(),
    )
    return cm, dep, svc


def test_bundle_config_map_is_content_addressed_pinned_and_owned() -> None:
    cm, _, _ = workload()
    meta = cm["metadata"]
    assert meta["name"].startswith("serve-review-pipeline-") and cm["immutable"] is True
    assert meta["labels"][SERVE_LABEL] == "review-pipeline"
    assert meta["labels"][RUN_LABEL] == "serve-review-pipeline"  # the GC keeps its pins
    assert "agent-" in meta["annotations"][PINNED_ANNOTATION]
    assert meta["ownerReferences"][0]["uid"] == "uid-topo"
    again, _, _ = workload()
    assert again["metadata"]["name"] == meta["name"]


def test_deployment_runs_serve_on_the_pinned_bundle_with_tokens_by_reference() -> None:
    cm, dep, svc = workload(replicas=3, port=9090, maxConcurrentTasks=7, drainSeconds=45)
    spec = dep["spec"]
    assert dep["metadata"]["name"] == serve_name("review-pipeline") == "serve-review-pipeline"
    assert spec["replicas"] == 3
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert container["args"][:3] == ["serve", "--bundle", "/etc/swarmkit/bundle"]
    assert container["args"][3:] == [
        "--port",
        "9090",
        "--max-concurrent-tasks",
        "7",
        "--drain-seconds",
        "45",
        "--input-timeout",
        "3600",
    ]
    assert pod["terminationGracePeriodSeconds"] == 60  # drain + margin
    assert pod["restartPolicy"] == "Always" and pod["automountServiceAccountToken"] is False
    bundle_volume = next(v for v in pod["volumes"] if v["name"] == "bundle")
    assert bundle_volume["configMap"]["name"] == cm["metadata"]["name"]
    tokens = [e for e in container["env"] if e["name"].startswith(TOKEN_ENV_PREFIX)]
    assert tokens == [
        {
            "name": f"{TOKEN_ENV_PREFIX}0",
            "valueFrom": {"secretKeyRef": {"name": "tokens", "key": "team-a"}},
        }
    ]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["ports"] == [{"name": "http", "containerPort": 9090, "protocol": "TCP"}]
    assert svc["spec"]["ports"][0] == {
        "name": "http",
        "port": 80,
        "targetPort": "http",
        "protocol": "TCP",
    }
    assert svc["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert card_url(TOPO) == "http://serve-review-pipeline.team-b.svc/.well-known/agent-card.json"


def test_new_version_rolls_replicas_do_not() -> None:
    _, first, _ = workload()
    _, scaled, _ = workload(replicas=5)
    _, rendered = example_bundle()
    pinned = rendered.pinned.model_copy(
        update={"agents": {**rendered.pinned.agents, "reviewer": "v-new"}}
    )
    _, newer, _ = workload(dataclasses.replace(rendered, pinned=pinned))

    def checksum(dep: dict) -> str:  # type: ignore[type-arg]
        return str(dep["spec"]["template"]["metadata"]["annotations"][CHECKSUM_ANNOTATION])

    assert checksum(first) == checksum(scaled)
    assert checksum(first) != checksum(newer)


def test_serving_condition() -> None:
    none, counts = serving_verdict(None, "v2")
    assert (none.status, none.reason) == ("False", "Pending")

    def dep(ready: int, updated: int, total: int, version: str) -> dict:  # type: ignore[type-arg]
        return {
            "metadata": {
                "generation": 2,
                "annotations": {"swarmkit.dev/topology-version": version},
            },
            "spec": {"replicas": 2},
            "status": {
                "observedGeneration": 2,
                "readyReplicas": ready,
                "updatedReplicas": updated,
                "availableReplicas": ready,
                "replicas": total,
            },
        }

    ok, counts = serving_verdict(dep(2, 2, 2, "v2"), "v2")
    assert (ok.status, ok.reason, ok.message) == ("True", "Serving", "2/2 replicas ready")
    assert counts == {"replicas": 2, "readyReplicas": 2, "updated": True}
    rolling, _ = serving_verdict(dep(2, 1, 3, "v2"), "v2")
    assert (rolling.status, rolling.reason) == ("True", "RollingOut")
    assert "rolling out version v2" in rolling.message
    stale, _ = serving_verdict(dep(2, 2, 2, "v1"), "v2", waiting="the Topology is not Ready")
    assert (stale.status, stale.reason) == ("True", "Stale")
    assert "version v1 keeps serving: the Topology is not Ready" in stale.message
    down, _ = serving_verdict(dep(0, 2, 2, "v2"), "v2")
    assert (down.status, down.reason) == ("False", "NoReadyReplicas")


def test_runtime_class_reaches_the_served_pods() -> None:
    _, r = example_bundle(workspace_patch={"runtime": {"runtimeClassName": "kata"}})
    _, dep, _ = workload(r)
    assert dep["spec"]["template"]["spec"]["runtimeClassName"] == "kata"
