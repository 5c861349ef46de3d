"""Funnel gate overhead per gated artifact (``make bench-funnel``); prints the numbers.

The runner in-process (the same ``execute`` a Job runs, minus process start-up) on a
one-node Topology whose node is bound to a Funnel with ``validate`` (a JSON Schema) and
``judge`` (an ``llm_prompt`` decision skill) against the scripted OpenAI-compatible model
API on 127.0.0.1 (the wire-format server the tests use: real HTTP, no model). Each gated
run drafts once, passes validate and the judge, and parks for the approval.

Per gated artifact it reports, from the runner's own audit lines (``duration_ms``):

* **validate**: the in-process layer (JSON Schema check of the artifact);
* **judge**: the decision skill call through the skill pipeline: one model request over
  HTTP to the local server, the outputs schema check, the audit;
* **added**: the gated run's wall time minus an ungated run's (same agent, same answer,
  no funnel), paired run by run: the layers plus parking for the approval (checkpoint).

``--runs`` (50) pairs, alternating gated and ungated; median and p95 of each.
Usage: ``python bench/bench_funnel.py [--runs N] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_support import loadavg, machine  # noqa: E402
from tests.support.bundles import (  # noqa: E402
    agent,
    bundle,
    decision_skill,
    openai_provider,
    write_bundle,
)
from tests.support.model_server import ScriptedModelServer, text  # noqa: E402
from tests.support.runner import run_in_process  # noqa: E402

from swarmkit_api.bundle import BundleTopology  # noqa: E402
from swarmkit_api.funnel import FunnelSpec  # noqa: E402
from swarmkit_api.topology import TopologySpec  # noqa: E402

ARTIFACT = json.dumps({"title": "v2", "body": "Runs start 3x faster; see docs/runs.md."})
JUDGED = json.dumps({"verdict": "pass", "confidence": 0.95, "reasoning": "Specific."})
FUNNEL = {
    "validate": {
        "schema": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["title", "body"],
        }
    },
    "judge": {"skill": "notes-judge"},
    "approve": {"rules": [{"roles": ["leads"], "kOf": 2}], "roles": {"leads": {"groups": ["l"]}}},
}
OUTPUTS = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string"},
        "confidence": {"type": "number"},
        "reasoning": {"type": "string"},
    },
    "required": ["verdict", "confidence", "reasoning"],
}


def _bundle(url: str, gated: bool) -> Any:
    node: dict[str, Any] = {"name": "draft", "agentRef": {"name": "writer"}, "role": "root"}
    if gated:
        node["funnel"] = {"name": "gate"}
    spec = TopologySpec.model_validate({"workspaceRef": {"name": "default"}, "agents": [node]})
    funnels = {"gate": FunnelSpec.model_validate(FUNNEL)} if gated else {}
    topo = BundleTopology(name="notes", version="v1", spec=spec, funnels=funnels)
    judge = decision_skill(
        "notes-judge", {"type": "llm_prompt", "prompt": "Score it."}, outputs=OUTPUTS
    )
    return bundle(
        agents=[agent("writer", provider="m", skills=["notes-judge"])],
        skills=[judge],
        providers=[openai_provider("m", url)],
        topology=topo,
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(runs: int) -> dict[str, Any]:
    before = machine()
    validate: list[float] = []
    judge: list[float] = []
    added: list[float] = []
    with ScriptedModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        layouts = {}
        for g in (True, False):
            b = _bundle(server.openai_base_url, g)
            layouts[g] = (b, write_bundle(b, Path(tmp) / str(g)))
        for i in range(runs + 2):  # two warm-up pairs
            times = {}
            for gated in (True, False):
                b, layout = layouts[gated]
                server.push(text(ARTIFACT), *([text(JUDGED)] if gated else []))
                t0 = time.perf_counter()
                out = await run_in_process(b, layout)
                times[gated] = (time.perf_counter() - t0) * 1000
                expected = "AwaitingReview" if gated else "Succeeded"
                assert out.outcome == expected, out.result
                if gated and i >= 2:
                    [v] = out.events("funnel.validate")
                    [j] = out.events("funnel.judge")
                    validate.append(float(v["duration_ms"]))
                    judge.append(float(j["duration_ms"]))
            if i >= 2:
                added.append(times[True] - times[False])
    result: dict[str, Any] = {"runs": runs, "machine": before, "loadavg_after": loadavg()}
    for name, values in (("validate_ms", validate), ("judge_ms", judge), ("added_ms", added)):
        result[name] = {
            "median": round(statistics.median(values), 2),
            "p95": round(_pct(values, 0.95), 2),
            "min": round(min(values), 2),
            "max": round(max(values), 2),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.runs))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"funnel gate overhead per gated artifact, {args.runs} runs ({result['machine']})")
    for name in ("validate_ms", "judge_ms", "added_ms"):
        r = result[name]
        spread = f"(min {r['min']}, max {r['max']})"
        print(f"  {name:12} median {r['median']:8.2f}  p95 {r['p95']:8.2f}  {spread}")


if __name__ == "__main__":
    main()
