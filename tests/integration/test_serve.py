"""A Topology served over A2A (spec.serve) on the real control plane: the operator's
Deployment + Service, the runner's ``serve`` in a process-node pod, a Run of another
namespace calling it, the public a2a-sdk client, third-party SDK clients (the A2A Go SDK,
the A2A JavaScript SDK in its 1.x and 0.3 lines), and a rollout on a skill edit."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, temp_namespace, wait_for
from tests.support.clients import (
    A2A_JS_V03_VERSION,
    A2A_JS_VERSION,
    a2a_go,
    node,
    npm_version,
)
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import parse_audit
from tests.support.served import free_port

from .runs_support import (
    GROUP,
    VERSION,
    OperatorProcess,
    apply,
    create,
    debug,
    doc,
    finished,
    get,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)

TOKEN = "team-a-may-call-0042"
ANSWER = "the answer from team-b is 42"


class Model:
    """The scripted model both namespaces' agents talk to, routed by what it is asked."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.slow_started = threading.Event()
        self.server = ScriptedModelServer(default=self.reply)

    def reply(self, request: RecordedRequest) -> Reply:
        task = request.first_user_text
        results = request.tool_results()
        if "ask-oracle" in request.tool_names:  # team-a's caller
            if not results:
                return tool_call("ask-oracle", input="What is the answer?")
            return text(results[0][0])
        if task.startswith("escalate"):  # team-b: a skill escalating to a person
            if not results:
                return tool_call("deploy-check", input="may I deploy?")
            return text("decided: " + json.loads(results[0][0])["answer"])
        if task.startswith("hold"):  # team-b: runs until the test releases it
            self.slow_started.set()
            self.release.wait(120)
            return text("held task finished")
        if task.startswith("slow"):
            return Reply(text="too late", delay=60)
        return text(ANSWER)


def secret(kube: Kube, ns: str, name: str, values: dict[str, str]) -> None:
    data = {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}
    kube.core.create_namespaced_secret(ns, {"metadata": {"name": name}, "data": data})


def workspace(model_url: str, **extra: Any) -> dict[str, Any]:
    provider = {"name": "m", "type": "openai", "baseUrl": model_url, "defaultModel": "m"}
    return doc("Workspace", "default", {"modelProviders": [provider], **extra})


def fact_skill(instructions: str) -> dict[str, Any]:
    return doc(
        "Skill",
        "house-facts",
        {
            "description": "Use when you need the house facts.",
            "category": "capability",
            "instructions": instructions,
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    )


def served_topology(port: int) -> dict[str, Any]:
    return doc(
        "Topology",
        "oracle",
        {
            "workspaceRef": {"name": "default"},
            "description": "Answers questions about the house facts.",
            "agents": [{"name": "root", "agentRef": {"name": "oracle-agent"}, "role": "root"}],
            "serve": {
                "replicas": 1,
                "auth": {"bearerTokens": [{"name": "serve-tokens", "key": "team-a"}]},
                "port": port,
                "drainSeconds": 30,
                "maxConcurrentTasks": 4,
            },
        },
    )


def serving(topology: dict[str, Any] | None) -> dict[str, Any] | None:
    for cond in ((topology or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Serving":
            return dict(cond)
    return None


def served_pods(kube: Kube, ns: str) -> list[Any]:
    pods = kube.core.list_namespaced_pod(ns, label_selector="swarmkit.dev/serve=oracle").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def pod_audit(cluster: LocalCluster, ns: str, pod: str) -> list[dict[str, Any]]:
    return parse_audit(cluster.pod_logs(ns, pod, "runner"))


def card_ready(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=2).status_code == 200
    return False


def user_message(text_: str, task_id: str = "") -> SendMessageRequest:
    msg = Message(message_id=f"m-{text_[:8]}-{id(text_)}", role=Role.ROLE_USER)
    msg.parts.append(Part(text=text_))
    if task_id:
        msg.task_id = task_id
    return SendMessageRequest(message=msg)


async def sdk(base: str, token: str = TOKEN, streaming: bool = False) -> Any:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    return await create_client(base, ClientConfig(streaming=streaming, httpx_client=http))


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


@pytest.fixture(scope="module")
def model() -> Iterator[Model]:
    m = Model()
    with m.server:
        yield m
    m.release.set()


@pytest.fixture(scope="module")
def team_b(kube: Kube, operator: OperatorProcess, model: Model) -> Iterator[dict[str, Any]]:
    """Namespace team-b-*: the oracle topology served on a free port."""
    port = free_port()
    with temp_namespace(kube, "team-b") as ns:
        secret(kube, ns, "serve-tokens", {"team-a": TOKEN})
        apply(kube, ns, workspace(model.server.openai_base_url))
        apply(kube, ns, fact_skill("The answer is 42."))
        gate = doc(
            "Skill",
            "deploy-check",
            {
                "description": "Use before deploying.",
                "category": "capability",
                "implementation": {"type": "agent", "cardUrl": "http://127.0.0.1:9/card.json"},
                "constraints": {"onFailure": "escalate_to_human"},
                "provenance": {"authoredBy": "human", "version": "1.0.0"},
            },
        )
        apply(kube, ns, gate)
        apply(
            kube,
            ns,
            doc(
                "Agent",
                "oracle-agent",
                {
                    "workspaceRef": {"name": "default"},
                    "model": {"provider": "m", "name": "m"},
                    "systemPrompt": "You answer questions.",
                    "skills": ["house-facts", "deploy-check"],
                },
            ),
        )
        apply(kube, ns, served_topology(port))
        wait_ready(kube, ns, "Topology", "oracle", timeout=120)

        def live() -> dict[str, Any] | None:
            topo = get(kube, ns, "Topology", "oracle")
            cond = serving(topo)
            if cond is None or cond["status"] != "True":
                return None
            pods = served_pods(kube, ns)
            if len(pods) != 1 or not card_ready(f"http://{pods[0].status.pod_ip}:{port}/readyz"):
                return None
            return topo

        topo = wait_for(live, 180, message=lambda: debug(kube, ns, operator))
        yield {"ns": ns, "port": port, "topology": topo}


def test_served_topology_answers_a_run_of_another_namespace(
    kube: Kube,
    cluster: LocalCluster,
    operator: OperatorProcess,
    model: Model,
    team_b: dict[str, Any],
) -> None:
    ns_b, port, topo = team_b["ns"], team_b["port"], team_b["topology"]
    status = topo["status"]
    assert status["url"] == f"http://serve-oracle.{ns_b}.svc/.well-known/agent-card.json"
    assert status["serving"]["readyReplicas"] == 1 and status["serving"]["updated"] is True
    assert status["serving"]["version"] == status["version"]
    assert "1/1 replicas ready" in serving(topo)["message"]  # type: ignore[index]
    dep = kube.apps.read_namespaced_deployment("serve-oracle", ns_b)
    container = dep.spec.template.spec.containers[0]
    assert container.args[0] == "serve" and container.security_context.read_only_root_filesystem
    assert dep.spec.template.spec.automount_service_account_token is False
    tokens = [e for e in container.env if e.name.startswith("SWARMKIT_SECRET_SERVE_TOKEN_")]
    assert tokens[0].value is None and tokens[0].value_from.secret_key_ref.name == "serve-tokens"
    svc = kube.core.read_namespaced_service("serve-oracle", ns_b)
    assert svc.spec.selector == dep.spec.selector.match_labels

    [pod] = served_pods(kube, ns_b)
    card_url = f"http://{pod.status.pod_ip}:{port}/.well-known/agent-card.json"
    with temp_namespace(kube, "team-a") as ns_a:
        secret(kube, ns_a, "peer", {"token": TOKEN})
        apply(
            kube,
            ns_a,
            workspace(
                model.server.openai_base_url,
                credentials=[
                    {
                        "name": "oracle",
                        "secretKeyRef": {"name": "peer", "key": "token"},
                        "allowedHosts": [pod.status.pod_ip],
                    }
                ],
            ),
        )
        apply(
            kube,
            ns_a,
            doc(
                "Skill",
                "ask-oracle",
                {
                    "description": "Use to ask team-b's oracle.",
                    "category": "coordination",
                    "implementation": {
                        "type": "agent",
                        "cardUrl": card_url,
                        "credentialsRef": "oracle",
                    },
                    "provenance": {"authoredBy": "human", "version": "1.0.0"},
                },
            ),
        )
        apply(
            kube,
            ns_a,
            doc(
                "Agent",
                "asker",
                {
                    "workspaceRef": {"name": "default"},
                    "model": {"provider": "m", "name": "m"},
                    "systemPrompt": "You ask the oracle.",
                    "skills": ["ask-oracle"],
                },
            ),
        )
        wait_ready(kube, ns_a, "Agent", "asker")
        create(kube, ns_a, run_manifest("ask", topology=None, agent="asker", input="Ask it."))
        run = wait_run(kube, ns_a, "ask", finished, operator=operator)
        assert succeeded(run)["reason"] == "Succeeded", debug(kube, ns_a, operator)  # type: ignore[index]
        assert run["status"]["output"] == ANSWER
        caller_pod = run["status"]["podName"]
        caller = pod_audit(cluster, ns_a, caller_pod)
        [sent] = [e for e in caller if e["event"] == "a2a.send"]
        served = pod_audit(cluster, ns_b, pod.metadata.name)
        [start] = [
            e for e in served if e["event"] == "run.start" and e["run_id"] == sent["task_id"]
        ]
        # Both workspaces' audit streams carry the caller Run's correlation id.
        assert start["correlation_id"] == sent["correlation_id"] == run["metadata"]["uid"]


def test_sdk_client_against_the_served_card(
    kube: Kube, model: Model, team_b: dict[str, Any]
) -> None:
    [pod] = served_pods(kube, team_b["ns"])
    base = f"http://{pod.status.pod_ip}:{team_b['port']}"

    async def scenario() -> None:
        client = await sdk(base)
        [event] = await collect(client.send_message(user_message("What is the answer?")))
        assert event.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert event.task.artifacts[0].parts[0].text == ANSWER
        got = await client.get_task(GetTaskRequest(id=event.task.id))
        assert got.artifacts[0].parts[0].text == ANSWER

        streaming = await sdk(base, streaming=True)
        events = await collect(streaming.send_message(user_message("Stream it.")))
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

        asked = await collect(client.send_message(user_message("escalate the deploy")))
        task = asked[0].task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "deploy-check" in task.status.message.parts[0].text
        [answered] = await collect(client.send_message(user_message("approved", task.id)))
        assert answered.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert answered.task.artifacts[0].parts[0].text == "decided: approved"

        slow = user_message("slow task")
        slow.configuration.return_immediately = True
        [started] = await collect(client.send_message(slow))
        cancelled = await client.cancel_task(CancelTaskRequest(id=started.task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED

        intruder = await sdk(base, token="not-the-token")
        with pytest.raises(A2AClientError, match="HTTP Error 401"):
            await collect(intruder.send_message(user_message("let me in")))

    asyncio.run(scenario())


def test_third_party_sdks_against_the_served_card(
    kube: Kube, model: Model, team_b: dict[str, Any]
) -> None:
    """The A2A Go SDK (0.3) and the A2A JavaScript SDK (1.x: A2A 1.0; 0.3.x: A2A 0.3) each
    read the card, complete a task, stream one, poll one, and get an authentication error
    (HTTP 401, for a send and for a stream) with a wrong token."""
    [pod] = served_pods(kube, team_b["ns"])
    base = f"http://{pod.status.pod_ip}:{team_b['port']}"
    endpoint = f"{base}/a2a"
    assert (npm_version("@a2a-js/sdk"), npm_version("a2a-js-sdk-v03")) == (
        A2A_JS_VERSION,
        A2A_JS_V03_VERSION,
    )

    go = a2a_go(base, TOKEN)
    assert "error" not in go, go
    # The card as the Go SDK parsed it: an http bearer scheme that the card requires (its
    # auth interceptor attached the token only because of that requirement).
    assert go["card"]["url"] == endpoint and go["card"]["security"] == [{"bearer": []}]
    assert go["card"]["securitySchemes"]["bearer"]["type"] == "http"
    js1 = node("a2a_js_v1.mjs", base, TOKEN, "What is the answer?")
    assert "error" not in js1, js1
    assert js1["card"]["protocolVersion"] == "1.0"  # the interface the SDK chose
    assert js1["card"]["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]
    js03 = node("a2a_js_v03.mjs", base, TOKEN, "What is the answer?")
    assert "error" not in js03, js03
    assert (js03["card"]["url"], js03["card"]["protocolVersion"]) == (endpoint, "0.3.0")
    assert js03["card"]["security"] == [{"bearer": []}]

    done = {"go": "completed", "js1": "TASK_STATE_COMPLETED", "js03": "completed"}
    for name, report in (("go", go), ("js1", js1), ("js03", js03)):
        assert report["send"]["state"] == done[name] and report["send"]["text"] == ANSWER, name
        assert report["stream"]["final"] == done[name], (name, report["stream"])
        assert report["stream"]["text"] == ANSWER, (name, report["stream"])
        assert report["poll"]["state"] == done[name] and report["poll"]["text"] == ANSWER, name
        assert report["polls"] >= 1, name  # the non-blocking send came back unsettled
    assert go["stream"]["events"][0] == js03["stream"]["events"][0] == "task"
    assert js1["stream"]["events"][0] == "task"

    wrong = "not-the-token"
    go_refused = a2a_go(base, wrong, scenario="auth")
    assert go_refused["errorStep"] == "send" and "send" not in go_refused
    assert go_refused["error"] == "unexpected HTTP status: 401 Unauthorized"
    assert go_refused["streamError"] == "unexpected HTTP status: 401 Unauthorized"
    for script, send, stream in (
        ("a2a_js_v1.mjs", "SendMessage", "SendStreamingMessage"),
        ("a2a_js_v03.mjs", "message/send", "message/stream"),
    ):
        refused = node(script, base, wrong, "let me in", "auth")
        assert refused["errorStep"] == "send", refused
        assert refused["error"].startswith(f"HTTP error for {send}! Status: 401 Unauthorized."), (
            refused
        )
        assert refused["streamError"].startswith(
            f"HTTP error establishing stream for {stream}: 401 Unauthorized"
        ), refused


def test_skill_edit_rolls_the_deployment_and_a_running_task_completes(
    kube: Kube,
    cluster: LocalCluster,
    operator: OperatorProcess,
    model: Model,
    team_b: dict[str, Any],
) -> None:
    ns, port = team_b["ns"], team_b["port"]
    before = get(kube, ns, "Topology", "oracle")
    assert before is not None
    old_version = before["status"]["serving"]["version"]
    [old_pod] = served_pods(kube, ns)
    base = f"http://{old_pod.status.pod_ip}:{port}"
    outcome: dict[str, Any] = {}

    async def hold() -> None:
        client = await sdk(base)
        [event] = await collect(client.send_message(user_message("hold this task")))
        outcome["state"] = event.task.status.state
        outcome["text"] = event.task.artifacts[0].parts[0].text if event.task.artifacts else ""

    thread = threading.Thread(target=lambda: asyncio.run(hold()), daemon=True)
    thread.start()
    assert model.slow_started.wait(60), "the held task never reached the model"

    apply(kube, ns, fact_skill("The answer is 42. (Revised.)"))

    def old_pod_terminating() -> bool:
        pod = kube.core.read_namespaced_pod(old_pod.metadata.name, ns)
        return pod.metadata.deletion_timestamp is not None

    wait_for(old_pod_terminating, 120, message=lambda: debug(kube, ns, operator))
    # Release the held task only once the old server has its SIGTERM and drains with the
    # task still running (the deletion timestamp comes before the node's SIGTERM).
    wait_for(
        lambda: (
            "draining (1 task(s) running" in cluster.pod_logs(ns, old_pod.metadata.name, "runner")
        ),
        60,
        message=lambda: cluster.pod_logs(ns, old_pod.metadata.name, "runner")[-2000:],
    )
    model.release.set()  # the old pod is draining: its running task may now finish
    thread.join(60)
    assert outcome.get("state") == TaskState.TASK_STATE_COMPLETED, outcome
    assert outcome["text"] == "held task finished"
    wait_for(
        lambda: (
            "drained: 1 finished, 0 cancelled"
            in cluster.pod_logs(ns, old_pod.metadata.name, "runner")
        ),
        30,
        message=lambda: cluster.pod_logs(ns, old_pod.metadata.name, "runner")[-2000:],
    )

    def rolled() -> dict[str, Any] | None:
        topo = get(kube, ns, "Topology", "oracle")
        st = (topo or {}).get("status") or {}
        serve = st.get("serving") or {}
        if serve.get("version") == st.get("version") != old_version and serve.get("updated"):
            return topo
        return None

    topo = wait_for(rolled, 120, message=lambda: debug(kube, ns, operator))
    dep = kube.apps.read_namespaced_deployment("serve-oracle", ns)
    annotations = dep.spec.template.metadata.annotations
    assert annotations["swarmkit.dev/topology-version"] == topo["status"]["version"]
    [new_pod] = wait_for(
        lambda: (
            [p for p in served_pods(kube, ns) if p.metadata.name != old_pod.metadata.name] or None
        ),
        60,
    )
    assert (
        new_pod.metadata.annotations["swarmkit.dev/bundle-config-map"]
        != (old_pod.metadata.annotations["swarmkit.dev/bundle-config-map"])
    )
    # The old version's bundle is deleted once the new one rolled out.
    wait_for(
        lambda: (
            len(
                kube.core.list_namespaced_config_map(
                    ns, label_selector="swarmkit.dev/serve=oracle"
                ).items
            )
            == 1
        ),
        60,
    )


def test_missing_token_secret_and_removing_serve(
    kube: Kube, operator: OperatorProcess, team_b: dict[str, Any]
) -> None:
    ns = team_b["ns"]
    other = served_topology(free_port())
    other["metadata"]["name"] = "oracle-two"
    other["spec"]["serve"]["auth"]["bearerTokens"] = [{"name": "nobody", "key": "token"}]
    apply(kube, ns, other)

    def refused() -> dict[str, Any] | None:
        cond = serving(get(kube, ns, "Topology", "oracle-two"))
        return cond if cond is not None and cond["reason"] == "SecretNotFound" else None

    cond = wait_for(refused, 120, message=lambda: debug(kube, ns, operator))
    # Read back from the pods' CreateContainerConfigError: the operator reads no Secret.
    assert cond["status"] == "False", cond
    assert "Secret 'nobody' (key 'token') not found" in cond["message"], cond
    deployments = {d.metadata.name: d for d in kube.apps.list_namespaced_deployment(ns).items}
    assert sorted(deployments) == ["serve-oracle", "serve-oracle-two"]
    assert not deployments["serve-oracle-two"].status.ready_replicas
    # (its Deployment, with the waiting pods, goes with the Topology)
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "topologies", "oracle-two")

    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "topologies", "oracle", {"spec": {"serve": None}}
    )

    def unserved() -> dict[str, Any] | None:
        topo = get(kube, ns, "Topology", "oracle")
        cond = serving(topo)
        if cond is None or cond["reason"] != "NotServed":
            return None
        if kube.apps.list_namespaced_deployment(ns).items:
            return None
        return topo

    topo = wait_for(unserved, 120, message=lambda: debug(kube, ns, operator))
    assert "url" not in topo["status"] and "serving" not in topo["status"]
    services = [s.metadata.name for s in kube.core.list_namespaced_service(ns).items]
    assert "serve-oracle" not in services


def test_serve_added_to_a_ready_topology_is_served_within_seconds(
    kube: Kube, operator: OperatorProcess, team_b: dict[str, Any]
) -> None:
    # The previous test removed spec.serve from the Ready Topology "oracle". Adding it back
    # used to leave Serving "Pending: waiting for Topology oracle to be Ready (being
    # reconciled)" for a 30 s recheck: the reconcile that saw serve was the one that made
    # the Topology's own generation observed.
    ns = team_b["ns"]
    serve = served_topology(free_port())["spec"]["serve"]
    added = time.monotonic()
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "topologies", "oracle", {"spec": {"serve": serve}}
    )

    def deployed() -> bool:
        return any(
            d.metadata.name == "serve-oracle"
            for d in kube.apps.list_namespaced_deployment(ns).items
        )

    wait_for(deployed, 10, message=lambda: debug(kube, ns, operator))
    assert time.monotonic() - added < 10

    def serving_true() -> dict[str, Any] | None:
        cond = serving(get(kube, ns, "Topology", "oracle"))
        return cond if cond is not None and cond["status"] == "True" else None

    wait_for(serving_true, 60, message=lambda: debug(kube, ns, operator))


def test_a_deployment_the_operator_did_not_make_is_never_adopted(
    kube: Kube, operator: OperatorProcess, team_b: dict[str, Any]
) -> None:
    # Someone who may create Deployments in the namespace (Kubernetes' `edit`) makes
    # serve-<topology> before the Topology is served: server-side apply would adopt it and
    # keep every field the operator does not set. The operator neither uses nor changes it.
    ns = team_b["ns"]
    labels = {"app": "planted"}
    planted = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve-oracle-three", "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "planted", "image": "planted:1"}]},
            },
        },
    }
    kube.apps.create_namespaced_deployment(ns, planted)
    other = served_topology(free_port())
    other["metadata"]["name"] = "oracle-three"
    apply(kube, ns, other)

    def refused() -> dict[str, Any] | None:
        cond = serving(get(kube, ns, "Topology", "oracle-three"))
        return cond if cond is not None and cond["reason"] == "TamperedObject" else None

    cond = wait_for(refused, 120, message=lambda: debug(kube, ns, operator))
    assert cond["status"] == "False"
    assert "Deployment serve-oracle-three" in cond["message"], cond["message"]
    assert "Topology oracle-three" in cond["message"], cond["message"]
    dep = kube.apps.read_namespaced_deployment("serve-oracle-three", ns)
    assert not dep.metadata.owner_references
    assert [c.name for c in dep.spec.template.spec.containers] == ["planted"]
    assert dep.spec.replicas == 0
    services = [s.metadata.name for s in kube.core.list_namespaced_service(ns).items]
    assert "serve-oracle-three" not in services

    def warned() -> str | None:
        for e in kube.core.list_namespaced_event(ns).items:
            if (e.involved_object.name, e.reason) == ("oracle-three", "TamperedObject"):
                return str(e.message)
        return None

    assert "serve-oracle-three" in wait_for(warned, 30, message="a TamperedObject Event")


def test_the_served_objects_are_rechecked_at_every_reconcile(
    cluster: LocalCluster, kube: Kube, operator: OperatorProcess, team_b: dict[str, Any]
) -> None:
    # eve holds Kubernetes' built-in `edit`: she may update and delete NetworkPolicies and
    # Services, not a Topology's status. While the served Deployment is up to date (no
    # rollout coming), she opens its NetworkPolicy to every pod, then deletes its Service.
    # The next reconcile of the Topology (any event; here one on its Deployment) restores
    # each, with a Warning Event saying what and who. A NetworkPolicy she re-creates under
    # the name is not the one recorded: reported (Serving=False TamperedObject), never
    # written over; once it is gone, the operator's is back.
    from kubernetes import client

    ns, name = team_b["ns"], "serve-oracle"
    net = client.NetworkingV1Api(kube.api_client)
    cluster.kubectl(
        "-n", ns, "create", "rolebinding", "eve-edit", "--clusterrole=edit", "--user=eve"
    )
    original = net.read_namespaced_network_policy(name, ns)
    as_eve = ("--as=eve", "-n", ns)

    def poke() -> None:  # an event on the Deployment: the Topology is reconciled
        cluster.kubectl(
            "-n", ns, "annotate", "deployment", name, f"poke={time.time()}", "--overwrite"
        )

    def event(*words: str) -> str | None:
        for e in kube.core.list_namespaced_event(ns).items:
            message = str(e.message)
            if (e.involved_object.name, e.reason, e.type) == (
                "oracle",
                "TamperedObject",
                "Warning",
            ) and all(w in message for w in words):
                return message
        return None

    opened = [{"op": "replace", "path": "/spec/ingress", "value": [{}]}]
    cluster.kubectl(
        *as_eve, "patch", "networkpolicy", name, "--type=json", "-p", json.dumps(opened)
    )
    assert net.read_namespaced_network_policy(name, ns).spec.ingress[0].ports is None
    poke()
    wait_for(
        lambda: net.read_namespaced_network_policy(name, ns).spec.ingress == original.spec.ingress,
        30,
        message=lambda: debug(kube, ns, operator) + operator.tail(),
    )
    assert net.read_namespaced_network_policy(name, ns).metadata.uid == original.metadata.uid
    said = wait_for(lambda: event(f"NetworkPolicy {name}", "spec.ingress", "kubectl"), 30)
    assert "restored" in said, said

    service_uid = kube.core.read_namespaced_service(name, ns).metadata.uid
    cluster.kubectl(*as_eve, "delete", "service", name)
    poke()

    def service() -> Any:
        found = [s for s in kube.core.list_namespaced_service(ns).items if s.metadata.name == name]
        return found[0] if found else None

    restored = wait_for(service, 30, message=lambda: debug(kube, ns, operator))
    assert restored.metadata.uid != service_uid and restored.metadata.owner_references
    wait_for(lambda: event(f"Service {name}", "deleted", "restored"), 30)

    def recorded() -> dict[str, str]:
        topology = get(kube, ns, "Topology", "oracle") or {}
        return dict((topology.get("status") or {}).get("createdUids") or {})

    wait_for(lambda: recorded().get(f"Service/{name}") == restored.metadata.uid, 30)

    # Deleted and re-created by eve (her own, open to all): not the operator's to change.
    # She wins the race against the operator's next reconcile (any event may bring one
    # between her two writes, which then restores its own first): it is frozen meanwhile.
    mine = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name},
        "spec": {"podSelector": {}, "ingress": [{}]},
    }
    with operator.paused():
        cluster.kubectl(*as_eve, "delete", "networkpolicy", name)
        cluster.kubectl(*as_eve, "create", "-f", "-", input=json.dumps(mine))
    poke()

    def refused() -> dict[str, Any] | None:
        cond = serving(get(kube, ns, "Topology", "oracle"))
        return cond if cond is not None and cond["reason"] == "TamperedObject" else None

    cond = wait_for(refused, 60, message=lambda: debug(kube, ns, operator))
    assert cond["status"] == "False" and f"NetworkPolicy {name}" in cond["message"]
    assert net.read_namespaced_network_policy(name, ns).spec.pod_selector.match_labels is None
    # Once it is gone, the operator writes its own again.
    cluster.kubectl("-n", ns, "delete", "networkpolicy", name)
    poke()

    def serving_again() -> bool:
        return (serving(get(kube, ns, "Topology", "oracle")) or {}).get("status") == "True"

    wait_for(serving_again, 60, message=lambda: debug(kube, ns, operator))
    assert net.read_namespaced_network_policy(name, ns).spec.ingress == original.spec.ingress
