"""Series C of ``bench_runs.py``: the real runner's cold start through the cluster.

A Run of an agent with N granted skills against a local OpenAI-compatible endpoint; from
the runner process's start time (``/proc/<pid>/stat``, the pod's ``process://PID``) to the
first model request arriving at the endpoint. Runs one after another (nothing else of the
benchmark runs meanwhile).
"""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from bench_support import summary

from swarmkit_devcluster.kubeapi import KubeClient
from swarmkit_devcluster.testing import wait_for

GV = "swarmkit.dev/v1alpha1"


def custom(ns: str, plural: str, name: str | None = None) -> str:
    base = f"/apis/swarmkit.dev/v1alpha1/namespaces/{ns}/{plural}"
    return f"{base}/{name}" if name else base


def obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": GV, "kind": kind, "metadata": {"name": name}, "spec": spec}


def wait_ready(client: KubeClient, ns: str, plural: str, name: str) -> None:
    def ready() -> bool:
        o = client.get(custom(ns, plural, name))
        return any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (o.get("status") or {}).get("conditions") or ()
        )

    wait_for(ready, 120, message=f"{plural}/{name} Ready")


class ModelEndpoint(http.server.ThreadingHTTPServer):
    """A minimal OpenAI-compatible chat endpoint that records request arrival times."""

    def __init__(self) -> None:
        self.requests: list[float] = []
        super().__init__(("127.0.0.1", 0), _ModelHandler)


class _ModelHandler(http.server.BaseHTTPRequestHandler):
    server: ModelEndpoint

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.server.requests.append(time.time())
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = json.dumps(
            {
                "id": "bench",
                "object": "chat.completion",
                "model": "bench",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "done"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def process_start_time(pid: int) -> float:
    """The wall-clock time ``pid`` started, to a clock tick (10 ms; rounded down, so a cold
    start reads up to one tick long).

    ``/proc/<pid>/stat`` gives the start in ticks since boot. The boot time in
    ``/proc/stat`` (``btime``) is whole seconds, truncated: adding the two put every start
    up to a second early (0.6 s on the project machine, which series C once reported as
    part of the cold start). The origin here is the wall clock minus ``CLOCK_BOOTTIME``,
    the clock the kernel counts start times in, read at the same instant."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    ticks = int(stat.rsplit(")", 1)[1].split()[19])
    boot_origin = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return boot_origin + ticks / os.sysconf("SC_CLK_TCK")


def _one_cold_start(client: KubeClient, ns: str, server: ModelEndpoint, name: str) -> list[float]:
    before = len(server.requests)
    client.create(
        custom(ns, "runs"),
        obj("Run", name, {"agentRef": {"name": "cold"}, "timeoutSeconds": 120}),
    )

    def running_pid() -> int | None:
        for p in client.get(f"/api/v1/namespaces/{ns}/pods")["items"]:
            if not p["metadata"]["name"].startswith(f"run-{name}-"):
                continue
            for cs in (p.get("status") or {}).get("containerStatuses") or ():
                cid = cs.get("containerID") or ""
                if cid.startswith("process://"):
                    return int(cid.removeprefix("process://"))
        return None

    pid = wait_for(running_pid, 60, interval=0.02, message="the runner process")
    assert pid is not None
    try:
        started: float | None = process_start_time(pid)
    except OSError:
        started = None
    wait_for(lambda: len(server.requests) > before, 60, interval=0.02, message="a model call")

    def final() -> bool:
        run = client.get(custom(ns, "runs", name))
        return any(
            c.get("type") == "Succeeded" and c.get("status") in ("True", "False")
            for c in (run.get("status") or {}).get("conditions") or ()
        )

    wait_for(final, 60)
    return [server.requests[before] - started] if started is not None else []


def bench_cold_start(client: KubeClient, ns: str, count: int, skills: int) -> dict[str, Any]:
    """``count`` cold starts of the real runner with ``skills`` granted skills in ``ns``."""
    server = ModelEndpoint()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    client.create(
        custom(ns, "workspaces"),
        obj(
            "Workspace",
            "default",
            {
                "modelProviders": [
                    {
                        "name": "local",
                        "type": "openai",
                        "baseUrl": f"http://127.0.0.1:{port}/v1",
                        "defaultModel": "bench",
                        "maxRetries": 0,
                    }
                ]
            },
        ),
    )
    names = []
    for i in range(skills):
        name = f"skill-{i:02d}"
        names.append(name)
        client.create(
            custom(ns, "skills"),
            obj(
                "Skill",
                name,
                {
                    "description": f"Use when benchmark task {i} comes up.",
                    "category": "capability",
                    "instructions": f"# Skill {i}\n\nStep one, then step two.\n",
                    "files": [{"path": "reference/notes.md", "content": f"notes {i}\n"}],
                    "provenance": {"authoredBy": "human", "version": "1.0.0"},
                },
            ),
        )
    client.create(
        custom(ns, "agents"),
        obj("Agent", "cold", {"systemPrompt": "Benchmark.", "skills": names}),
    )
    wait_ready(client, ns, "agents", "cold")
    deltas: list[float] = []
    for i in range(count):
        deltas.extend(_one_cold_start(client, ns, server, f"cold-{i}"))
    server.shutdown()
    return {"runs": count, "granted_skills": skills, "cold_start": summary(deltas)}
