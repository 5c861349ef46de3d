"""Benchmark: web view page time with 1,000 skills, and what the usage roll-ups cost in writes.

1. Pages: a WebView over in-memory indexes holding N skills (default 1,000), 200 agents
   granting 10 each and 200 finished runs, exactly as the operator's index functions keep
   them; each page is fetched over HTTP on loopback (render included), 3 rounds of
   ``--requests`` requests, min / median / max per page.
2. Writes: 100 finished Runs, each granting 10 skills and loading 5, reach the skill library
   within one flush interval; the writes one flush makes (ConfigMap + Skill status) against
   the 1,000 a write per Run per skill would be.

No cluster needed (the API writes are counted by a stand-in of the ``k8s`` package's two calls).
``make bench-webview``; prints JSON and the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.served import free_port

import swarmkit_operator.handlers  # noqa: F401  (registers the index functions)
from swarmkit_operator import k8s
from swarmkit_operator.config import OperatorConfig
from swarmkit_operator.handlers.root import wiring
from swarmkit_operator.library import SkillLibrary
from swarmkit_operator.webview import Sources, WebView

NS = "bench"


def meta(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": NS,
        "uid": str(uuid.uuid4()),
        "generation": 1,
        "creationTimestamp": "2026-12-03T08:00:00Z",
    }


def skill(i: int) -> dict[str, Any]:
    h = f"{i:064x}"
    return {
        "metadata": meta(f"skill-{i:04d}"),
        "spec": {
            "description": f"Use when task {i} needs doing; returns a short answer.",
            "category": "capability",
            "instructions": f"# Skill {i}\n\n1. Read the input.\n2. Answer.\n" * 5,
            "files": [{"path": "reference/notes.md", "content": "notes " * 50}],
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
        "status": {
            "observedGeneration": 1,
            "contentHash": h,
            "version": h[:12],
            "conditions": [{"type": "Ready", "status": "True", "reason": "Rendered"}],
        },
    }


def agent(i: int, skills: int) -> dict[str, Any]:
    grants = [f"skill-{(i * 10 + j) % skills:04d}" for j in range(10)]
    return {
        "metadata": meta(f"agent-{i:03d}"),
        "spec": {"model": {"provider": "replay"}, "skills": grants},
        "status": {
            "observedGeneration": 1,
            "version": f"v{i:011d}",
            "resolvedSkills": [
                {"name": g, "contentHash": f"{int(g[6:]):064x}", "renderedConfigMap": g}
                for g in grants
            ],
            "conditions": [{"type": "Ready", "status": "True", "reason": "Resolved"}],
        },
    }


def run(i: int, granted: list[str], loaded: list[str]) -> dict[str, Any]:
    return {
        "metadata": meta(f"run-{i:04d}"),
        "spec": {"topologyRef": {"name": "pipeline"}, "input": "go"},
        "status": {
            "conditions": [{"type": "Succeeded", "status": "True", "reason": "Succeeded"}],
            "completionTime": "2026-12-03T08:10:00Z",
            "pinned": {"agents": {"agent-000": "v0"}, "skills": dict.fromkeys(granted, "h")},
            "skills": [{"agent": "agent-000", "loaded": loaded, "loads": len(loaded)}],
            "output": "done",
        },
    }


async def pages(skills: int, requests: int, rounds: int) -> dict[str, Any]:
    idx = wiring().indexes()
    for i in range(skills):
        idx.update("skills", skill(i))
    for i in range(200):
        idx.update("agents", agent(i, skills))
    lib = SkillLibrary(OperatorConfig(), idx)
    lib.seed()
    for i in range(200):
        grants = [f"skill-{(i * 10 + j) % skills:04d}" for j in range(10)]
        body = run(i, grants, grants[:5])
        idx.update("runs", body)
        lib.run_seen(NS, body["metadata"]["uid"], body["status"])
    view = WebView(Sources(idx, lib))
    port = free_port()
    await view.start("127.0.0.1", port)
    urls = {
        "skills list": "/skills",
        "skill detail": f"/skills/{NS}/skill-0007",
        "agent detail": f"/agents/{NS}/agent-007",
        "runs list": "/runs",
        "run detail": f"/runs/{NS}/run-0007",
    }
    out: dict[str, Any] = {}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for label, path in urls.items():
                per_round = []
                size = 0
                for _ in range(rounds):
                    times = []
                    for _ in range(requests):
                        t0 = time.perf_counter()
                        resp = await client.get(path)
                        times.append((time.perf_counter() - t0) * 1000)
                        assert resp.status_code == 200, (path, resp.status_code)
                        size = len(resp.content)
                    per_round.append(statistics.median(times))
                out[label] = {
                    "medianMs": {
                        "min": round(min(per_round), 2),
                        "median": round(statistics.median(per_round), 2),
                        "max": round(max(per_round), 2),
                    },
                    "bytes": size,
                }
    finally:
        await view.stop()
    return out


async def writes() -> dict[str, Any]:
    counted = {"configMaps": 0, "statusPatches": 0}

    async def put_config_map(manifest: dict[str, Any], exists: bool = True) -> None:
        counted["configMaps"] += 1

    async def patch_status(
        plural: str, ns: str, name: str, patch: dict[str, Any], manager: str = ""
    ) -> str:
        # k8s.patch_status's signature, field manager included (one per status writer).
        counted["statusPatches"] += 1
        return "1"

    k8s.put_config_map = put_config_map  # type: ignore[assignment]
    k8s.patch_status = patch_status  # type: ignore[assignment]
    idx = wiring().indexes()
    skills = [f"skill-{i:04d}" for i in range(10)]
    for i in range(10):
        idx.update("skills", skill(i))
    lib = SkillLibrary(OperatorConfig(), idx)
    lib.seed()
    await lib.flush()
    counted.update(configMaps=0, statusPatches=0)
    t0 = time.perf_counter()
    for i in range(100):
        body = run(i, skills, skills[:5])
        idx.update("runs", body)
        lib.run_seen(NS, body["metadata"]["uid"], body["status"])
    await lib.flush()
    return {
        "runs": 100,
        "skillsPerRun": 10,
        "writes": counted,
        "naiveWrites": 100 * 10,
        "flushMs": round((time.perf_counter() - t0) * 1000, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = {
        "skills": args.skills,
        "pages": asyncio.run(pages(args.skills, args.requests, args.rounds)),
        "rollupWrites": asyncio.run(writes()),
        "loadAverage": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
