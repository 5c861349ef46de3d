"""An Agent's MCP gateway: the pinned bundle ConfigMap, Deployment, Service and Serving."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from swarmkit_api.agent import AgentSpec, GatewaySpec
from swarmkit_api.bundle import BUNDLE_FILE, RunBundle
from swarmkit_api.run import RunSpec
from swarmkit_api.workspace import RuntimeDefaults, WorkspaceSpec
from swarmkit_operator.builders import PINNED_ANNOTATION, RUN_LABEL
from swarmkit_operator.builders import gateway as gw
from swarmkit_operator.builders.bundle import (
    RenderedBundle,
    RunInput,
    render_bundle,
)
from swarmkit_operator.builders.pinned import (
    PinnedAgent,
    PinnedWorkspace,
)
from swarmkit_operator.builders.workload import CHECKSUM_ANNOTATION, deployment_summary
from swarmkit_operator.config import OperatorConfig

from .fixtures import NAMESPACE, examples, pinned_skill

AGENT = gw.AgentRef("reviewer", NAMESPACE, "uid-reviewer", 3)
TOKENS = {"tokens": [{"name": "ci", "secretKeyRef": {"name": "gw", "key": "ci"}}]}


def gateway_spec(**kw: Any) -> GatewaySpec:
    return GatewaySpec.model_validate({"enabled": True, "auth": TOKENS, **kw})


def rendered(version: str = "v1", skill_patch: dict[str, Any] | None = None) -> RenderedBundle:
    config = OperatorConfig()
    docs = examples()
    ws = WorkspaceSpec.model_validate(docs[("Workspace", "default")]["spec"])
    spec = AgentSpec.model_validate(docs[("Agent", "reviewer")]["spec"])
    skills = [
        pinned_skill(name, {**doc["spec"], **(skill_patch or {})}, config)
        for (kind, name), doc in docs.items()
        if kind == "Skill" and name in spec.skills
    ]
    agent = PinnedAgent(
        name="reviewer",
        version=version,
        spec=spec,
        skills=tuple(s.name for s in skills),
        config_map=f"agent-reviewer-{version}",
    )
    return render_bundle(
        run=RunInput(
            gw.gateway_name("reviewer"),
            NAMESPACE,
            AGENT.uid,
            RunSpec.model_validate({"agentRef": {"name": "reviewer"}}),
        ),
        target_kind="Agent",
        target="reviewer",
        topologies=[],
        agents=[agent],
        skills=skills,
        workspace=PinnedWorkspace("default", ws, "ws-default-abcdef12"),
        config=config,
        flow_data={},
    )


def manifests(
    spec: GatewaySpec, render: RenderedBundle
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    bundle = gw.gateway_bundle(render, spec)
    cm = gw.bundle_config_map(AGENT, render, bundle)
    deployment, service = gw.workload(
        AGENT, spec, render, bundle, cm["metadata"]["name"], OperatorConfig()
    )
    return cm, deployment, service


def test_bundle_config_map_is_content_addressed_pinned_and_carries_the_tokens_by_reference() -> (
    None
):
    spec = gateway_spec()
    cm, _, _ = manifests(spec, rendered())
    again, _, _ = manifests(spec, rendered())
    assert cm["metadata"]["name"] == again["metadata"]["name"]
    assert cm["metadata"]["name"].startswith("gw-reviewer-") and cm["immutable"] is True
    assert cm["metadata"]["labels"][RUN_LABEL] == "gw-reviewer"
    assert cm["metadata"]["ownerReferences"][0]["kind"] == "Agent"
    assert "agent-reviewer-v1" in cm["metadata"]["annotations"][PINNED_ANNOTATION]
    bundle = RunBundle.model_validate_json(cm["data"][BUNDLE_FILE])
    assert (bundle.target_kind, bundle.target) == ("Agent", "reviewer")
    assert bundle.gateway is not None and bundle.gateway.port == 8080
    assert [t.name for t in bundle.gateway.tokens] == ["ci"]
    assert "secretKeyRef" in json.dumps(bundle.gateway.wire())
    other, _, _ = manifests(spec, rendered(version="v2"))
    assert other["metadata"]["name"] != cm["metadata"]["name"]


def test_deployment_runs_the_gateway_pinned_and_rolls_on_a_new_version() -> None:
    spec = gateway_spec(replicas=2, port=9090)
    cm, deployment, service = manifests(spec, rendered())
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["args"] == ["gateway", "--bundle", "/etc/swarmkit/bundle", "--port", "9090"]
    assert container["ports"] == [{"name": "mcp", "containerPort": 9090, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    token_env = [e for e in container["env"] if e.get("valueFrom", {}).get("secretKeyRef")]
    assert {"name": "gw", "key": "ci"} in [e["valueFrom"]["secretKeyRef"] for e in token_env]
    assert not any(e.get("value") == "ci" for e in container["env"])
    assert pod["restartPolicy"] == "Always"
    # The gateway opens Reviews: its own service account's token, and only its pod has it.
    assert pod["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == "gw-reviewer"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["bundle"]["configMap"]["name"] == cm["metadata"]["name"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == "gw-reviewer"
    assert service["spec"]["ports"][0]["port"] == 9090
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    checksum = deployment["spec"]["template"]["metadata"]["annotations"][CHECKSUM_ANNOTATION]

    _, same, _ = manifests(spec, rendered())
    assert same["spec"]["template"]["metadata"]["annotations"][CHECKSUM_ANNOTATION] == checksum
    edited = rendered(skill_patch={"description": "Use when reviewing a change, carefully."})
    _, rolled, _ = manifests(spec, edited)
    assert rolled["spec"]["template"]["metadata"]["annotations"][CHECKSUM_ANNOTATION] != checksum
    _, scaled, _ = manifests(gateway_spec(replicas=3, port=9090), rendered())
    assert scaled["spec"]["template"]["metadata"]["annotations"][CHECKSUM_ANNOTATION] == checksum


def test_the_gateway_may_only_get_and_watch_reviews_in_its_namespace() -> None:
    render = rendered()
    account = gw.service_account("reviewer", render)
    assert account == "gw-reviewer"
    docs = {d["kind"]: d for d in gw.review_rbac(AGENT, account)}
    assert set(docs) == {"ServiceAccount", "Role", "RoleBinding"}
    for doc in docs.values():
        meta = doc["metadata"]
        assert (meta["name"], meta["namespace"]) == ("gw-reviewer", NAMESPACE)
        assert meta["ownerReferences"][0]["kind"] == "Agent"
    # Nothing but Reviews, and no update/patch: a decision is never the gateway's to write;
    # no create either: anyone who may edit the namespace can mint this account's token, so
    # the operator opens a gateway's Reviews (issue 46 item 5).
    assert docs["Role"]["rules"] == [
        {
            "apiGroups": ["swarmkit.dev"],
            "resources": ["reviews"],
            "verbs": ["get", "watch"],
        }
    ]
    assert docs["RoleBinding"]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "gw-reviewer",
    }
    assert docs["RoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "gw-reviewer", "namespace": NAMESPACE}
    ]
    # A Workspace that names its own service account: the gateway runs as that one and
    # the Role is bound to it (no ServiceAccount of ours).
    ws = render.bundle.workspace
    runtime = (ws.runtime or RuntimeDefaults()).model_copy(
        update={"service_account_name": "team-runner"}
    )
    named = render.bundle.model_copy(
        update={"workspace": ws.model_copy(update={"runtime": runtime})}
    )
    own = dataclasses.replace(render, bundle=named)
    assert gw.service_account("reviewer", own) == "team-runner"
    docs = {d["kind"]: d for d in gw.review_rbac(AGENT, "team-runner")}
    assert set(docs) == {"Role", "RoleBinding"}
    assert docs["RoleBinding"]["subjects"][0]["name"] == "team-runner"


def test_review_wait_reaches_the_bundle() -> None:
    bundle = gw.gateway_bundle(rendered(), gateway_spec(reviewTimeoutSeconds=90))
    assert bundle.gateway is not None and bundle.gateway.review_timeout_seconds == 90
    default = gw.gateway_bundle(rendered(), gateway_spec())
    assert default.gateway is not None and default.gateway.review_timeout_seconds == 240


def test_gateway_url_is_the_services_mcp_endpoint() -> None:
    assert gw.gateway_url(AGENT, gateway_spec(port=9090)) == (
        f"http://gw-reviewer.{NAMESPACE}.svc:9090/mcp"
    )


def observed(version: str, ready: int, updated: int, replicas: int = 1) -> dict[str, Any]:
    """The gateway's Deployment as the pipeline observes it (its summary)."""
    return deployment_summary(
        {
            "metadata": {"generation": 2, "annotations": {"swarmkit.dev/agent-version": version}},
            "spec": {
                "replicas": replicas,
                "template": {"metadata": {"labels": {"swarmkit.dev/agent-version": version}}},
            },
            "status": {
                "observedGeneration": 2,
                "replicas": replicas,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "updatedReplicas": updated,
            },
        }
    )


def test_serving_condition_follows_the_rollout() -> None:
    assert gw.serving(None, "v1").reason == "Creating"
    assert (gw.serving(observed("v1", 0, 1), "v1").status, "Starting") == (
        "False",
        gw.serving(observed("v1", 0, 1), "v1").reason,
    )
    serving = gw.serving(observed("v1", 1, 1), "v1")
    assert (serving.status, serving.reason, serving.version, serving.rolled) == (
        "True",
        "Serving",
        "v1",
        True,
    )
    rolling = gw.serving(observed("v2", 1, 0), "v2")
    assert (rolling.status, rolling.reason, rolling.version) == ("True", "RollingOut", None)
    stale = gw.serving(observed("v1", 1, 1), "v2")
    assert stale.reason == "RollingOut"
    zero = gw.serving(observed("v1", 0, 0, replicas=0), "v1")
    assert (zero.status, zero.reason) == ("False", "ScaledToZero")


def test_runtime_class_reaches_the_gateway_pods() -> None:
    render = rendered()
    ws = render.bundle.workspace.model_copy(
        update={"runtime": RuntimeDefaults.model_validate({"runtimeClassName": "gvisor"})}
    )
    render = dataclasses.replace(render, bundle=render.bundle.model_copy(update={"workspace": ws}))
    _, deployment, _ = manifests(gateway_spec(), render)
    assert deployment["spec"]["template"]["spec"]["runtimeClassName"] == "gvisor"
