"""The shared runner pod and the Deployment + Service that wrap it (served workloads)."""

from __future__ import annotations

import pytest

from swarmkit_api.common import ResourceRequirements, SecretKeyRef
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders.pod import (
    CONTAINER_NAME,
    SkillFileItem,
    SkillMount,
    pod_template,
    runner_pod_spec,
)
from swarmkit_operator.builders.workload import (
    CHECKSUM_ANNOTATION,
    build_deployment,
    build_service,
    deployment_readiness,
    service_url,
)
from swarmkit_operator.config import OperatorConfig

OWNER = {"apiVersion": "swarmkit.dev/v1alpha1", "kind": "Topology", "name": "t", "uid": "u1"}
SELECTOR = {"swarmkit.dev/serve": "t"}


def _workspace(**runtime: object) -> WorkspaceSpec:
    return WorkspaceSpec.model_validate(
        {
            "modelProviders": [
                {"name": "c", "type": "anthropic", "apiKey": {"name": "llm", "key": "k"}}
            ],
            **({"runtime": runtime} if runtime else {}),
        }
    )


def _spec(bundle_cm: str = "serve-t-aaaa", **kw: object) -> dict[str, object]:
    return runner_pod_spec(
        workspace=_workspace(),
        config=OperatorConfig(),
        args=["serve", "--bundle", "/etc/swarmkit/bundle", "--port", "8080"],
        bundle_config_map=bundle_cm,
        skill_mounts=[SkillMount("s", "skill-s-1", (SkillFileItem("k0", "scripts/x.sh", True),))],
        restart_policy="Always",
        ports=[{"name": "http", "containerPort": 8080}],
        probes={"readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}}},
        **kw,  # type: ignore[arg-type]
    )


def _deployment(spec: dict[str, object], pins: tuple[str, ...] = ()) -> dict[str, object]:
    return build_deployment(
        name="serve-t",
        namespace="team-b",
        labels=SELECTOR,
        selector=SELECTOR,
        owner=OWNER,
        replicas=2,
        template=pod_template(spec, labels=SELECTOR),
        pins=pins,
    )


def test_served_pod_is_as_locked_down_as_a_runs() -> None:
    spec = _spec(extra_secret_env=[SecretKeyRef(name="tokens", key="a")])
    container = spec["containers"][0]  # type: ignore[index]
    assert container["name"] == CONTAINER_NAME
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["automountServiceAccountToken"] is False
    assert spec["restartPolicy"] == "Always"
    assert container["ports"] == [{"name": "http", "containerPort": 8080}]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"] if "valueFrom" in e}
    assert refs == {"llm", "tokens"}  # workspace and serve auth secrets, by reference only
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/etc/swarmkit/skills/s" in mounts


def test_resource_override_wins_over_the_workspace() -> None:
    ws = _workspace(resources={"limits": {"memory": "2Gi"}})
    override = ResourceRequirements(requests={"cpu": "1"})
    spec = runner_pod_spec(
        workspace=ws,
        config=OperatorConfig(),
        args=["serve"],
        bundle_config_map="cm",
        resource_override=override,
    )
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


def test_a_new_pinned_version_changes_the_checksum_and_nothing_else_does() -> None:
    first = _deployment(_spec("serve-t-aaaa"))
    again = _deployment(_spec("serve-t-aaaa"))
    newer = _deployment(_spec("serve-t-bbbb"))
    repinned = _deployment(_spec("serve-t-aaaa"), pins=("skill-s@2",))

    def checksum(d: dict[str, object]) -> str:
        return d["spec"]["template"]["metadata"]["annotations"][CHECKSUM_ANNOTATION]  # type: ignore[index,no-any-return]

    assert checksum(first) == checksum(again)
    assert checksum(first) != checksum(newer)
    assert checksum(first) != checksum(repinned)
    spec = first["spec"]  # type: ignore[index]
    assert spec["selector"] == {"matchLabels": SELECTOR}
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert first["metadata"]["ownerReferences"] == [OWNER]  # type: ignore[index]


def test_template_must_carry_the_selector_labels() -> None:
    with pytest.raises(ValueError, match=r"swarmkit.dev/serve"):
        build_deployment(
            name="x",
            namespace="n",
            labels={},
            selector=SELECTOR,
            owner=OWNER,
            replicas=1,
            template=pod_template(_spec(), labels={"other": "x"}),
        )


def test_service_and_url() -> None:
    svc = build_service(
        name="serve-t",
        namespace="team-b",
        labels=SELECTOR,
        selector=SELECTOR,
        owner=OWNER,
        port=80,
        target_port="http",
    )
    assert svc["spec"]["selector"] == SELECTOR
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    assert svc["spec"]["sessionAffinity"] == "ClientIP"
    assert service_url("serve-t", "team-b", 80, "/x") == "http://serve-t.team-b.svc:80/x"


def test_deployment_readiness() -> None:
    assert deployment_readiness(None) == (0, 0, False)
    rolling = {
        "metadata": {"generation": 3},
        "spec": {"replicas": 2},
        "status": {
            "observedGeneration": 3,
            "readyReplicas": 2,
            "updatedReplicas": 1,
            "availableReplicas": 2,
            "replicas": 3,
        },
    }
    assert deployment_readiness(rolling) == (2, 2, False)
    done = {**rolling, "status": {**rolling["status"], "updatedReplicas": 2, "replicas": 2}}
    assert deployment_readiness(done) == (2, 2, True)
