"""No Secret value appears in any ConfigMap, Job, status, Event or log line (scan them all)."""

from __future__ import annotations

import base64
import http.server
import json
import secrets
import threading
from typing import Any

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube

from .runs_support import (
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    finished,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)


class EchoModel(http.server.ThreadingHTTPServer):
    """An 'OpenAI' endpoint that rejects every call and echoes the credential it got."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        super().__init__(("127.0.0.1", 0), _Echo)


class _Echo(http.server.BaseHTTPRequestHandler):
    server: EchoModel

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        self.server.seen.append(auth)
        body = json.dumps({"error": {"message": f"invalid credential: {auth}"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _secret(kube: Kube, ns: str, name: str, values: dict[str, str]) -> None:
    kube.core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": name},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
        },
    )


def test_no_secret_value_anywhere(
    kube: Kube, namespace: str, operator: OperatorProcess, cluster: LocalCluster
) -> None:
    ns = namespace
    model_key = "sk-live-" + secrets.token_hex(16)
    mcp_password = "pw-" + secrets.token_hex(16)
    tool_token = "tok-" + secrets.token_hex(16)
    values = [model_key, mcp_password, tool_token]
    _secret(kube, ns, "llm", {"api-key": model_key})
    _secret(kube, ns, "db", {"password": mcp_password})
    _secret(kube, ns, "tools", {"token": tool_token})

    server = EchoModel()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            spec = doc["spec"]
            spec["modelProviders"] = [
                *spec["modelProviders"],
                {
                    "name": "echo",
                    "type": "openai",
                    "baseUrl": f"http://127.0.0.1:{port}/v1",
                    "apiKey": {"name": "llm", "key": "api-key"},
                    "defaultModel": "m",
                    "maxRetries": 0,
                    "timeoutSeconds": 5,
                },
            ]
            spec["mcpServers"] = [
                {
                    "id": "pg",
                    "transport": "stdio",
                    "command": ["pg-mcp"],
                    "env": [
                        {"name": "PGPASSWORD", "secretKeyRef": {"name": "db", "key": "password"}}
                    ],
                }
            ]
            spec["tools"] = [
                {
                    "name": "lookup",
                    "description": "Look something up.",
                    "http": {"url": "https://api.example.com/{q}"},
                    "credentials": {"secretKeyRef": {"name": "tools", "key": "token"}},
                }
            ]
            spec["credentials"] = [
                {"name": "peer", "secretKeyRef": {"name": "llm", "key": "api-key"}}
            ]
        return doc

    apply_examples(kube, ns, edit)
    apply(kube, ns, agent_with("leaky", [], model={"provider": "echo"}))
    wait_ready(kube, ns, "Topology", "review-pipeline")
    wait_ready(kube, ns, "Agent", "leaky")

    create(kube, ns, run_manifest("ok"))
    create(kube, ns, run_manifest("echoed", agent="leaky"))
    ok = wait_run(kube, ns, "ok", finished, operator=operator)
    assert succeeded(ok)["reason"] == "Succeeded", debug(kube, ns, operator)  # type: ignore[index]
    bad = wait_run(kube, ns, "echoed", finished, operator=operator)
    cond = succeeded(bad)
    assert cond is not None and cond["reason"] == "Failed", debug(kube, ns, operator)
    # the runner really got the key through the Job's env (valueFrom.secretKeyRef)...
    assert any(model_key in seen for seen in server.seen), server.seen
    server.shutdown()

    # ... and it appears nowhere the operator or the runner wrote.
    haystacks: dict[str, str] = {}
    for cm in kube.core.list_namespaced_config_map(ns).items:
        haystacks[f"configmap/{cm.metadata.name}"] = json.dumps(cm.data or {})
    for job in kube.batch.list_namespaced_job(ns).items:
        haystacks[f"job/{job.metadata.name}"] = json.dumps(
            kube.api_client.sanitize_for_serialization(job)
        )
    for pod in kube.core.list_namespaced_pod(ns).items:
        haystacks[f"pod/{pod.metadata.name}"] = json.dumps(
            kube.api_client.sanitize_for_serialization(pod)
        )
    for plural in ("runs", "agents", "skills", "topologies", "workspaces"):
        items = kube.custom.list_namespaced_custom_object("swarmkit.dev", "v1alpha1", ns, plural)
        for obj in items["items"]:
            haystacks[f"{plural}/{obj['metadata']['name']}"] = json.dumps(obj)
    for event in kube.core.list_namespaced_event(ns).items:
        haystacks[f"event/{event.metadata.name}"] = f"{event.reason} {event.message}"
    haystacks["operator.log"] = operator.log()
    pod_dirs = sorted(cluster.pods_dir.glob(f"{ns}_*"))
    assert pod_dirs, "the runner pods' logs are on the node"
    for pod_dir in pod_dirs:
        for log in pod_dir.glob("*.log"):
            haystacks[f"log/{pod_dir.name}/{log.name}"] = log.read_text(errors="replace")
        for term in pod_dir.glob("root/*/dev/termination-log"):
            haystacks[f"termination/{pod_dir.name}"] = term.read_text(errors="replace")
    assert any(k.startswith("job/") for k in haystacks)
    assert any(k.startswith("configmap/run-") for k in haystacks)
    leaks = [
        (where, value[:8] + "…")
        for where, text in haystacks.items()
        for value in values
        if value in text
    ]
    assert leaks == [], leaks
    # The Job references each Secret key by name.
    job_text = " ".join(v for k, v in haystacks.items() if k.startswith("job/"))
    for ref in ('"name": "llm"', '"name": "db"', '"name": "tools"'):
        assert ref in job_text
