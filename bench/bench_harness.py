"""Harness node cold start against the runner's own, on a running cluster (issue 40).

On the cluster of ``$SWARMKIT_KUBECONFIG`` (``make cluster-up`` and ``make operator-up`` in
the checkout, whose ``make images`` built the runtime image with the pinned Claude Code),
in a fresh namespace, ``--runs`` (3) times each, alternating:

* **runner**: a Run of an Agent (a model node) against the scripted model server: from the
  runner process's start (``/proc/<pid>/stat`` of the pod's ``process://PID``) to the first
  model request arriving (series C of ``bench_runs.py``);
* **harness**: a Run of a Topology whose node is ``harness: {kind: claude-code}`` with the
  same Agent (no tools: the bare cost of each): the runner's part (process start → its
  ``harness.start`` audit line: bundle, MCP servers, proxy, gateway, skills laid out) and
  the harness's cold start (``harness.start`` → the CLI's first model request: ``claude``
  starting, reading its config, connecting the gateway over MCP).

Prints min / median / max of each. Usage::

    SWARMKIT_KUBECONFIG=$PWD/.cluster/kubeconfig .venv/bin/python bench/bench_harness.py
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "runtime_image", "bench", ""):
    sys.path.insert(0, str(REPO / sub))

from bench_runs_cold import custom, obj, process_start_time, wait_ready  # noqa: E402
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer  # noqa: E402

from swarmkit_devcluster.kubeapi import KubeClient  # noqa: E402
from swarmkit_devcluster.testing import wait_for  # noqa: E402

KEY = "sk-ant-bench-provider-key-0123456789"


def answer(request: RecordedRequest) -> Reply:
    return Reply(text="done")


def setup(client: KubeClient, ns: str, url: str) -> None:
    client.create(
        f"/api/v1/namespaces/{ns}/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "anthropic"},
            "data": {"apiKey": base64.b64encode(KEY.encode()).decode()},
        },
    )
    client.create(
        custom(ns, "workspaces"),
        obj(
            "Workspace",
            "default",
            {
                "modelProviders": [
                    {
                        "name": "claude",
                        "type": "anthropic",
                        "baseUrl": url,
                        "maxRetries": 0,
                        "apiKey": {"name": "anthropic", "key": "apiKey"},
                    }
                ]
            },
        ),
    )
    client.create(
        custom(ns, "agents"),
        obj(
            "Agent",
            "coder",
            {
                "model": {"provider": "claude", "name": "claude-sonnet-4-5", "maxTokens": 1024},
                "systemPrompt": "Benchmark.",
            },
        ),
    )
    client.create(
        custom(ns, "topologies"),
        obj(
            "Topology",
            "h",
            {
                "workspaceRef": {"name": "default"},
                "agents": [
                    {
                        "name": "coder",
                        "role": "root",
                        "agentRef": {"name": "coder"},
                        "harness": {"kind": "claude-code"},
                    }
                ],
            },
        ),
    )
    wait_ready(client, ns, "agents", "coder")
    wait_ready(client, ns, "topologies", "h")


def pod_of(client: KubeClient, ns: str, run: str) -> dict[str, Any] | None:
    for p in client.get(f"/api/v1/namespaces/{ns}/pods")["items"]:
        if p["metadata"]["name"].startswith(f"run-{run}-"):
            return dict(p)
    return None


def one(
    client: KubeClient, ns: str, server: ScriptedModelServer, name: str, ref: dict[str, Any]
) -> dict[str, float]:
    before = len(server.requests)
    spec = {**ref, "input": "Say done.", "timeoutSeconds": 300}
    client.create(custom(ns, "runs"), obj("Run", name, spec))

    def pid() -> int | None:
        p = pod_of(client, ns, name) or {}
        for cs in (p.get("status") or {}).get("containerStatuses") or ():
            cid = cs.get("containerID") or ""
            if cid.startswith("process://"):
                return int(cid.removeprefix("process://"))
        return None

    started = process_start_time(wait_for(pid, 120, interval=0.02, message="the runner"))
    wait_for(lambda: len(server.requests) > before, 120, interval=0.02, message="a model call")
    first = server.requests[before].at

    def final() -> dict[str, Any] | None:
        run = client.get(custom(ns, "runs", name))
        for c in (run.get("status") or {}).get("conditions") or ():
            if c.get("type") == "Succeeded" and c.get("status") in ("True", "False"):
                return dict(c)
        return None

    cond = wait_for(final, 300, message=f"run {name} to finish")
    if cond["reason"] != "Succeeded":
        raise SystemExit(f"run {name} ended {cond['reason']}: {cond.get('message')}")
    out = {"to_first_model_call": first - started}
    pod = pod_of(client, ns, name) or {}
    _status, log = client.request_raw(
        "GET", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/log"
    )
    for line in log.decode().splitlines():
        if line.startswith("{") and '"harness.start"' in line:
            at = datetime.fromisoformat(json.loads(line)["ts"]).timestamp()
            out["runner_to_harness_start"] = at - started
            out["harness_cold_start"] = first - at
    return out


def spread(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"{ms[0]:.0f} / {statistics.median(ms):.0f} / {ms[-1]:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    client = KubeClient.from_kubeconfig(Path(os.environ["SWARMKIT_KUBECONFIG"]))
    ns = f"bench-harness-{int(time.time())}"
    client.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    server = ScriptedModelServer(default=answer, api_key=KEY).start()
    try:
        setup(client, ns, server.url)
        plain, harness = [], []
        for i in range(args.runs):
            plain.append(one(client, ns, server, f"plain-{i}", {"agentRef": {"name": "coder"}}))
            harness.append(one(client, ns, server, f"harness-{i}", {"topologyRef": {"name": "h"}}))
            print(f"run {i}: runner {plain[-1]}, harness {harness[-1]}", flush=True)
    finally:
        server.close()
        client.delete(f"/api/v1/namespaces/{ns}")
    print(f"load average: {os.getloadavg()}")
    print("| measure | min / median / max |")
    print("|---|---|")
    print(
        f"| runner (model node): process start → first model call | "
        f"{spread([p['to_first_model_call'] for p in plain])} |"
    )
    print(
        f"| harness node: process start → harness.start (runner part) | "
        f"{spread([h['runner_to_harness_start'] for h in harness])} |"
    )
    print(
        f"| harness node: harness.start → first model call (Claude Code cold start) | "
        f"{spread([h['harness_cold_start'] for h in harness])} |"
    )
    print(
        f"| harness node: process start → first model call | "
        f"{spread([h['to_first_model_call'] for h in harness])} |"
    )


if __name__ == "__main__":
    main()
