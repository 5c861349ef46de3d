"""An Agent's MCP gateway on the real control plane: Deployment, rollout, the public SDK client.

The operator runs as a process; the gateway is the real runner in a process-node pod of a
real Deployment (deployment and replicaset controllers); upstream are a real stdio MCP
server, a real HTTP tool server and the scripted model API; the harness is the public
``mcp`` client (Python) over streamable HTTP, and the TypeScript MCP SDK
(@modelcontextprotocol/sdk, a Node process).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.bundles import CODE_QUALITY_OUTPUTS
from tests.support.clients import MCP_TS_VERSION, node, npm_version
from tests.support.gateway import mcp_client, status_of
from tests.support.http_server import RecordingHttpServer
from tests.support.mcp_servers import HOST_RUNTIME_IMAGE, free_port, stdio_command
from tests.support.model_server import ScriptedModelServer, text

from .review_support import user_roles
from .runs_support import OperatorProcess, apply, debug, doc, get, wait_ready

TOKENS = {"alice": "alice-gw-token-2f9c71", "ci": "ci-gw-token-8d04e3"}
ECHO = {"type": "mcp_tool", "server": "t", "tool": "echo"}
GOOD = {"verdict": "pass", "confidence": 0.9, "reasoning": "clean change"}


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def kb() -> Iterator[RecordingHttpServer]:
    with RecordingHttpServer(lambda r: (200, {"hits": ["runbook-7"]})) as server:
        yield server


def skill(name: str, description: str, implementation: dict[str, Any], **spec: Any) -> Any:
    return doc(
        "Skill",
        name,
        {
            "description": description,
            "category": spec.pop("category", "capability"),
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
            "implementation": implementation,
            **spec,
        },
    )


def manifests(model_url: str, kb_url: str, port: int) -> list[dict[str, Any]]:
    tokens = [
        {"name": name, "secretKeyRef": {"name": "gateway-tokens", "key": name}} for name in TOKENS
    ]
    return [
        doc(
            "Workspace",
            "default",
            {
                "modelProviders": [
                    {"name": "m", "type": "openai", "baseUrl": model_url, "defaultModel": "t"}
                ],
                "mcpServers": [{"id": "t", "transport": "stdio", "command": stdio_command()}],
                "runtime": {"image": HOST_RUNTIME_IMAGE},  # the stdio server is on the host
                "tools": [
                    {
                        "name": "kb_search",
                        "description": "Search the runbooks.",
                        "http": {"method": "POST", "url": kb_url},
                    }
                ],
            },
        ),
        skill(
            "echo-skill", "Use to echo text.", {"type": "mcp_tool", "server": "t", "tool": "echo"}
        ),
        skill(
            "code-quality-review",
            "Use to review a change.",
            {"type": "llm_prompt", "prompt": "You review code changes."},
            category="decision",
            outputs=CODE_QUALITY_OUTPUTS,
        ),
        skill("not-granted", "Use never.", {"type": "mcp_tool", "server": "t", "tool": "pid"}),
        doc(
            "Agent",
            "coder",
            {
                "workspaceRef": {"name": "default"},
                "model": {"provider": "m", "name": "t"},
                "skills": ["echo-skill", "code-quality-review"],
                "tools": ["t.add", "kb_search"],
                "gateway": {"enabled": True, "port": port, "auth": {"tokens": tokens}},
            },
        ),
    ]


def serving(kube: Kube, ns: str, version: str | None = None) -> dict[str, Any] | None:
    agent = get(kube, ns, "Agent", "coder") or {}
    status = agent.get("status") or {}
    for cond in status.get("conditions") or ():
        is_serving = cond.get("type") == "Serving" and cond.get("reason") == "Serving"
        if is_serving and (version is None or status.get("gatewayVersion") == version):
            return status
    return None


def wait_gateway_up(kube: Kube, namespace: str, operator: OperatorProcess, port: int) -> None:
    """Agent ``coder`` Ready, its gateway Serving, and answering on ``port``."""
    wait_ready(kube, namespace, "Agent", "coder", timeout=90)
    wait_for(
        lambda: serving(kube, namespace),
        timeout=120,
        message=lambda: debug(kube, namespace, operator) + operator.tail(),
    )
    # The process node ignores readiness probes (a running container is ready), so wait
    # for what the probe would: the gateway's health endpoint.
    wait_for(
        lambda: status_of(f"http://127.0.0.1:{port}/healthz") == 200,
        timeout=60,
        message=lambda: json.dumps(gateway_audit(kube, namespace))[-3000:],
    )


def gateway_pods(kube: Kube, ns: str) -> list[Any]:
    return list(
        kube.core.list_namespaced_pod(ns, label_selector="swarmkit.dev/gateway=coder").items
    )


def gateway_audit(kube: Kube, ns: str) -> list[dict[str, Any]]:
    """Audit lines of every gateway pod still there."""
    lines: list[dict[str, Any]] = []
    for pod in gateway_pods(kube, ns):
        log = kube.core.read_namespaced_pod_log(pod.metadata.name, ns, container="runner")
        lines += [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return lines


def text_of(result: Any) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")


def token_secret(kube: Kube, namespace: str) -> None:
    kube.core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "gateway-tokens"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in TOKENS.items()},
        },
    )


def condition(kube: Kube, ns: str) -> tuple[str, str] | None:
    status = (get(kube, ns, "Agent", "coder") or {}).get("status") or {}
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Serving":
            return str(cond.get("status")), str(cond.get("reason"))
    return None


@pytest.fixture
def served(
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    kb: RecordingHttpServer,
) -> Iterator[tuple[str, int]]:
    token_secret(kube, namespace)
    port = free_port()
    for manifest in manifests(model.openai_base_url, kb.url + "/search", port):
        apply(kube, namespace, manifest)
    wait_gateway_up(kube, namespace, operator, port)
    yield namespace, port


async def test_gateway_serves_exactly_the_catalog_governed_and_audited(
    kube: Kube, served: tuple[str, int], model: ScriptedModelServer, kb: RecordingHttpServer
) -> None:
    ns, port = served
    status = serving(kube, ns)
    assert status is not None
    assert status["gatewayUrl"] == f"http://gw-coder.{ns}.svc:{port}/mcp"
    assert status["gatewayVersion"] == status["version"]
    deployment = kube.apps.read_namespaced_deployment("gw-coder", ns)
    assert deployment.spec.template.spec.containers[0].args[:2] == ["gateway", "--bundle"]
    assert kube.core.read_namespaced_service("gw-coder", ns).spec.ports[0].port == port
    url = f"http://127.0.0.1:{port}/mcp"

    assert status_of(url, "wrong-token", method="POST") == 401
    model.push(text('{"verdict": "ok", "confidence": 1.4}'), text(json.dumps(GOOD)))
    async with mcp_client(url, TOKENS["alice"]) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        echoed = await client.call_tool("echo-skill", {"text": "through the gateway"})
        added = await client.call_tool("t.add", {"a": 20, "b": 22})
        searched = await client.call_tool("kb_search", {"query": "rollback"})
        refused = await client.call_tool("not-granted", {})
        review = await client.call_tool("code-quality-review", {"input": "diff --git a b"})

    assert sorted(listed) == sorted(
        ["echo-skill", "code-quality-review", "load_skill", "read_skill_file", "t.add", "kb_search"]
    )
    assert listed["code-quality-review"].output_schema == CODE_QUALITY_OUTPUTS
    assert text_of(echoed) == "through the gateway" and not echoed.is_error
    assert text_of(added) == "42"
    assert "runbook-7" in text_of(searched)
    assert refused.is_error and "ToolNotGranted" in text_of(refused)
    assert not review.is_error and review.structured_content == GOOD

    def audited() -> list[dict[str, Any]] | None:
        lines = gateway_audit(kube, ns)
        return lines if any(e["event"] == "output.validated" for e in lines) else None

    lines = wait_for(audited, timeout=30)
    calls = [e for e in lines if e["event"] == "tool.call" and e.get("identity") == "alice"]
    assert {c["tool"] for c in calls} >= {"echo-skill", "t.add", "kb_search", "code-quality-review"}
    assert len({c["correlation_id"] for c in calls}) == 1
    assert any(
        e["event"] == "tool.refused" and e["tool"] == "not-granted" and e["identity"] == "alice"
        for e in lines
    )
    [failed] = [e for e in lines if e["event"] == "output.validation_failed"]
    assert failed["outcome"] == "retry" and failed["skill"] == "code-quality-review"
    assert any(e["event"] == "auth.refused" and e["reason"] == "wrong token" for e in lines)
    assert not any(token in json.dumps(lines) for token in TOKENS.values())


def test_the_typescript_sdk_lists_calls_and_is_refused(
    kube: Kube, served: tuple[str, int], model: ScriptedModelServer
) -> None:
    """The TypeScript MCP SDK lists exactly the catalog, calls skills and tools, checks the
    decision skill's structuredContent against its outputSchema itself, and gets 401 with a
    wrong token."""
    ns, port = served
    url = f"http://127.0.0.1:{port}/mcp"
    assert npm_version("@modelcontextprotocol/sdk") == MCP_TS_VERSION
    model.push(text(json.dumps(GOOD)))
    calls = [
        ["echo-skill", {"text": "from typescript"}],
        ["t.add", {"a": 40, "b": 2}],
        ["code-quality-review", {"input": "diff --git a b"}],
        ["not-granted", {}],
    ]
    report = node("mcp_ts.mjs", url, TOKENS["ci"], json.dumps(calls))
    assert "error" not in report, report
    assert report["server"]["name"] == "swarmkit-coder"
    assert sorted(t["name"] for t in report["tools"]) == sorted(
        ["echo-skill", "code-quality-review", "load_skill", "read_skill_file", "t.add", "kb_search"]
    )
    assert [t["name"] for t in report["tools"] if t["outputSchema"]] == ["code-quality-review"]
    got = {c["name"]: c for c in report["calls"]}
    assert got["echo-skill"] == {
        "name": "echo-skill",
        "text": "from typescript",
        "structuredContent": None,
        "isError": False,
    }
    assert got["t.add"]["text"] == "42" and not got["t.add"]["isError"]
    # An error here would be the SDK's own outputSchema check failing (it throws).
    review = got["code-quality-review"]
    assert "error" not in review and not review["isError"], review
    assert review["structuredContent"] == GOOD
    assert got["not-granted"]["isError"] and "ToolNotGranted" in got["not-granted"]["text"]

    refused = node("mcp_ts.mjs", url, "wrong-token", "[]")
    assert (refused["errorStep"], refused["status"]) == ("connect", 401), refused

    def audited() -> list[dict[str, Any]] | None:
        lines = gateway_audit(kube, ns)
        starts = [e for e in lines if e["event"] == "session.start" and e["identity"] == "ci"]
        return lines if starts else None

    lines = wait_for(audited, timeout=30)
    [start] = [e for e in lines if e["event"] == "session.start" and e["identity"] == "ci"]
    assert start["client"] == "swarmkit-ts-sdk-test"
    assert any(e["event"] == "auth.refused" and e["reason"] == "wrong token" for e in lines)


async def test_editing_a_granted_skill_rolls_the_gateway(
    kube: Kube, served: tuple[str, int], operator: OperatorProcess
) -> None:
    ns, port = served
    before = serving(kube, ns)
    assert before is not None
    url = f"http://127.0.0.1:{port}/mcp"
    old_pod_names = {
        p.metadata.name
        for p in kube.core.list_namespaced_pod(
            ns, label_selector="swarmkit.dev/gateway=coder"
        ).items
    }
    async with mcp_client(url, TOKENS["ci"]) as client:
        assert text_of(await client.call_tool("t.add", {"a": 1, "b": 1})) == "2"

        edited = copy.deepcopy(get(kube, ns, "Skill", "echo-skill"))
        assert edited is not None
        edited["spec"]["description"] = "Use to echo text back, verbatim."
        for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
            edited["metadata"].pop(key, None)
        edited.pop("status", None)
        apply(kube, ns, edited)

        def rolled() -> dict[str, Any] | None:
            agent = get(kube, ns, "Agent", "coder") or {}
            version = (agent.get("status") or {}).get("version")
            if not version or version == before["version"]:
                return None
            return serving(kube, ns, version)

        after = wait_for(
            rolled, timeout=180, message=lambda: debug(kube, ns, operator) + operator.tail()
        )
        assert after["gatewayVersion"] != before["gatewayVersion"]

        def old_pods_gone() -> bool:
            return not ({p.metadata.name for p in gateway_pods(kube, ns)} & old_pod_names)

        wait_for(old_pods_gone, timeout=120)
        # As in the fixture: the readiness probe the process node does not run.
        wait_for(lambda: status_of(f"http://127.0.0.1:{port}/healthz") == 200, timeout=60)
        # The open session was on the replaced pod: it ends with a clear error (or, had it
        # landed on a pod that knows it, it would still work).
        try:
            result = await client.call_tool("t.add", {"a": 2, "b": 2})
        except MCPError as exc:
            assert "start a new session" in str(exc), exc
        else:
            assert text_of(result) == "4"

    async with mcp_client(url, TOKENS["ci"]) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["echo-skill"].description == "Use to echo text back, verbatim."
        assert text_of(await client.call_tool("echo-skill", {"text": "v2"})) == "v2"

    agent = get(kube, ns, "Agent", "coder")
    assert agent is not None
    agent["spec"]["gateway"]["enabled"] = False
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        agent["metadata"].pop(key, None)
    agent.pop("status", None)
    apply(kube, ns, agent)

    def disabled() -> bool:
        status = (get(kube, ns, "Agent", "coder") or {}).get("status") or {}
        reasons = {c["type"]: c["reason"] for c in status.get("conditions") or ()}
        deployments = kube.apps.list_namespaced_deployment(ns).items
        return (
            reasons.get("Serving") == "Disabled"
            and "gatewayUrl" not in status
            and not [d for d in deployments if d.metadata.name == "gw-coder"]
        )

    wait_for(disabled, timeout=60, message=lambda: debug(kube, ns, operator))


def test_a_missing_token_secret_is_reported_and_serving_starts_once_it_exists(
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    kb: RecordingHttpServer,
) -> None:
    port = free_port()
    for manifest in manifests(model.openai_base_url, kb.url, port):
        apply(kube, namespace, manifest)
    wait_for(
        lambda: condition(kube, namespace) == ("False", "SecretNotFound"),
        timeout=90,
        message=lambda: debug(kube, namespace, operator),
    )
    agent = get(kube, namespace, "Agent", "coder") or {}
    [serving_cond] = [c for c in agent["status"]["conditions"] if c["type"] == "Serving"]
    # Read back from the pods' CreateContainerConfigError: the operator reads no Secret.
    assert "Secret 'gateway-tokens'" in serving_cond["message"], serving_cond
    assert "'alice'" in serving_cond["message"], serving_cond
    [deployment] = kube.apps.list_namespaced_deployment(namespace).items
    assert not deployment.status.ready_replicas
    token_secret(kube, namespace)
    wait_for(
        lambda: serving(kube, namespace),
        timeout=120,
        message=lambda: debug(kube, namespace, operator) + operator.tail(),
    )


def test_a_missing_runtime_class_is_reported_then_the_gateway_runs_under_it_confined(
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    kb: RecordingHttpServer,
) -> None:
    """The Agent's runtimeClassName (overriding the Workspace's none) is checked before the
    Deployment is applied; once the RuntimeClass exists the gateway serves under it, behind
    a NetworkPolicy that takes its port only and names the apiserver (it opens Reviews)."""
    from kubernetes import client

    ns = namespace
    rc_name = f"gw-sandbox-{ns}"
    token_secret(kube, ns)
    port = free_port()
    for manifest in manifests(model.openai_base_url, kb.url, port):
        if manifest["kind"] == "Agent":
            manifest["spec"]["runtimeClassName"] = rc_name
        apply(kube, ns, manifest)
    wait_for(
        lambda: condition(kube, ns) == ("False", "RuntimeClassNotFound"),
        timeout=90,
        message=lambda: debug(kube, ns, operator),
    )
    assert not kube.apps.list_namespaced_deployment(ns).items
    node_api = client.NodeV1Api(kube.api_client)
    node_api.create_runtime_class({"metadata": {"name": rc_name}, "handler": "runc"})
    try:
        wait_for(
            lambda: serving(kube, ns),
            timeout=120,
            message=lambda: debug(kube, ns, operator) + operator.tail(),
        )
        deployment = kube.apps.read_namespaced_deployment("gw-coder", ns)
        assert deployment.spec.template.spec.runtime_class_name == rc_name
        policy = client.NetworkingV1Api(kube.api_client).read_namespaced_network_policy(
            "gw-coder", ns
        )
        assert policy.metadata.owner_references[0].kind == "Agent"
        assert policy.spec.pod_selector.match_labels == deployment.spec.selector.match_labels
        assert [p.port for p in policy.spec.ingress[0].ports] == [port]
        api_port = int(kube.api_client.configuration.host.rsplit(":", 1)[1])
        opened = {p.port for rule in policy.spec.egress for p in rule.ports or ()}
        assert api_port in opened  # the apiserver, named for the gateway's Reviews
    finally:
        node_api.delete_runtime_class(rc_name)


def test_a_service_the_operator_did_not_make_is_never_adopted(
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    kb: RecordingHttpServer,
) -> None:
    """A Service named gw-<agent> made by someone else (Kubernetes' ``edit`` creates
    Services) before the gateway is enabled: the operator neither applies over it nor
    writes anything else for the gateway; ``Serving`` says why, with an Event."""
    ns = namespace
    planted = {
        "metadata": {"name": "gw-coder"},
        "spec": {"selector": {"app": "planted"}, "ports": [{"name": "x", "port": 9}]},
    }
    kube.core.create_namespaced_service(ns, planted)
    token_secret(kube, ns)
    for manifest in manifests(model.openai_base_url, kb.url, free_port()):
        apply(kube, ns, manifest)
    wait_for(
        lambda: condition(kube, ns) == ("False", "TamperedObject"),
        timeout=90,
        message=lambda: debug(kube, ns, operator),
    )
    agent = get(kube, ns, "Agent", "coder") or {}
    [cond] = [c for c in agent["status"]["conditions"] if c["type"] == "Serving"]
    assert "Service gw-coder" in cond["message"] and "Agent coder" in cond["message"]
    service = kube.core.read_namespaced_service("gw-coder", ns)
    assert not service.metadata.owner_references
    assert service.spec.selector == {"app": "planted"}
    assert not kube.apps.list_namespaced_deployment(ns).items

    def warned() -> str | None:
        for e in kube.core.list_namespaced_event(ns).items:
            if (e.involved_object.name, e.reason) == ("coder", "TamperedObject"):
                return str(e.message)
        return None

    assert "gw-coder" in wait_for(warned, 30, message="a TamperedObject Event")


def test_a_widened_gateway_role_is_restored_at_the_next_reconcile(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    kb: RecordingHttpServer,
) -> None:
    """adam holds Kubernetes' built-in ``admin`` in the namespace: he may edit Roles (with
    what he holds himself). He widens the gateway's Role ``gw-coder`` to read Secrets
    while the gateway serves, up to date: the next reconcile of the gateway (any event;
    here one on its Deployment) applies the operator's rules again, and a Warning Event on
    the Agent names the Role, the field and who changed it."""
    from kubernetes import client

    ns = namespace
    # The chart's rules aggregated into `admin` (as installed): adam may grant only what he
    # holds, and the gateway's Role names swarmkit.dev resources. Aggregation is
    # asynchronous: wait until he holds them.
    roles = "\n---\n".join(json.dumps(d) for d in user_roles())
    cluster.kubectl("apply", "--server-side", "-f", "-", input=roles)
    cluster.kubectl(
        "-n", ns, "create", "rolebinding", "adam-admin", "--clusterrole=admin", "--user=adam"
    )
    can_i = ("--as=adam", "-n", ns, "auth", "can-i", "watch", "reviews.swarmkit.dev")
    wait_for(
        lambda: cluster.kubectl(*can_i, check=False).stdout.strip() == "yes",
        60,
        interval=0.5,
        message="the chart's rules to be aggregated into admin",
    )
    token_secret(kube, ns)
    port = free_port()
    for manifest in manifests(model.openai_base_url, kb.url, port):
        apply(kube, ns, manifest)
    wait_gateway_up(kube, ns, operator, port)
    rbac = client.RbacAuthorizationV1Api(kube.api_client)
    original = rbac.read_namespaced_role("gw-coder", ns)
    wider = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}
    patch = json.dumps([{"op": "add", "path": "/rules/-", "value": wider}])
    cluster.kubectl("--as=adam", "-n", ns, "patch", "role", "gw-coder", "--type=json", "-p", patch)
    assert len(rbac.read_namespaced_role("gw-coder", ns).rules) == len(original.rules) + 1
    cluster.kubectl("-n", ns, "annotate", "deployment", "gw-coder", "poke=1", "--overwrite")
    wait_for(
        lambda: rbac.read_namespaced_role("gw-coder", ns).rules == original.rules,
        30,
        message=lambda: debug(kube, ns, operator) + operator.tail(),
    )

    def warned() -> str | None:
        for e in kube.core.list_namespaced_event(ns).items:
            if (e.involved_object.name, e.reason) == ("coder", "TamperedObject"):
                return str(e.message)
        return None

    said = wait_for(warned, 30, message="a TamperedObject Event")
    assert "Role gw-coder" in said and "rules" in said and "kubectl" in said, said
    assert condition(kube, ns) == ("True", "Serving")
