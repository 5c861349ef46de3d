"""Benchmark ``kubectl swarmkit import`` (``make bench-import``); no cluster needed.

1. The fixture tree (tests/fixtures/import_tree: the source documents' examples) imported
   by the installed console script, end to end (process start-up included).
2. A synthetic workspace a large team might have, in upstream's formats: 1,000 SwarmKit
   skills, 200 Agent Skills directories (SKILL.md, a script, a reference doc), 100 Swarm
   tools, 100 agents, 20 archetypes and 20 topologies, imported in-process to a directory.

Each is run three times; min/median/max and the machine's load average are printed;
``--json`` also prints the figures as one JSON document (for ``bench/record.py``).
"""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "operator"))

from swarmkit_cli.console import Console  # noqa: E402
from swarmkit_cli.main import main  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "import_tree"
CLI = Path(sys.executable).parent / "kubectl-swarmkit"
RUNS = 3


def synthetic(root: Path) -> int:
    """Write the synthetic workspace (upstream formats); returns the number of source files."""
    files = 0
    sk = root / "swarmkit"
    (sk / "skills").mkdir(parents=True)
    (sk / "workspace.yaml").write_text(
        "apiVersion: swarmkit/v1\nkind: Workspace\nmetadata: {id: bench, name: Bench}\n"
        "credentials:\n"
        + "".join(f"  token-{i}: {{source: env, config: {{env: TOKEN_{i}}}}}\n" for i in range(20))
        + "mcp_servers:\n"
        + "".join(
            f"  - id: server-{i}\n    transport: stdio\n    command: [srv, '{i}']\n"
            f"    credentials_ref: token-{i}\n"
            for i in range(20)
        )
    )
    for i in range(1000):
        (sk / "skills" / f"skill-{i}.yaml").write_text(
            "apiVersion: swarmkit/v1\nkind: Skill\n"
            f"metadata: {{id: skill-{i}, name: Skill {i}, description: Use when case {i} comes.}}\n"
            "category: capability\n"
            f"implementation: {{type: mcp_tool, server: server-{i % 20}, tool: t{i}}}\n"
            "constraints: {timeout_seconds: 30, retry: {attempts: 2, backoff: linear}}\n"
            "provenance: {authored_by: human, version: 1.0.0}\n"
        )
    files += 1001
    (sk / "archetypes").mkdir()
    (sk / "topologies").mkdir()
    for i in range(20):
        grants = ", ".join(f"skill-{i * 50 + j}" for j in range(10))
        (sk / "archetypes" / f"a{i}.yaml").write_text(
            "apiVersion: swarmkit/v1\nkind: Archetype\n"
            f"metadata: {{id: arch-{i}, name: Arch {i}, description: Archetype number {i}.}}\n"
            "role: worker\ndefaults:\n"
            "  model: {provider: anthropic, name: claude-sonnet-4-6}\n"
            f"  prompt: {{system: You are archetype {i}.}}\n  skills: [{grants}]\n"
            "provenance: {authored_by: human, version: 1.0.0}\n"
        )
        (sk / "topologies" / f"t{i}.yaml").write_text(
            "apiVersion: swarmkit/v1\nkind: Topology\n"
            f"metadata: {{name: topo-{i}, version: 1.0.0}}\nagents:\n  root:\n"
            f"    id: root\n    role: root\n    archetype: arch-{i}\n    children:\n"
            f"      - {{id: helper, role: worker, archetype: arch-{(i + 1) % 20}, "
            f"skills_additional: [skill-{i}]}}\n"
        )
    files += 40
    vs = root / "vectorstep" / "skills"
    for i in range(200):
        d = vs / f"vs-{i}"
        (d / "scripts").mkdir(parents=True)
        (d / "reference").mkdir()
        (d / "SKILL.md").write_text(
            f"---\nname: vs-{i}\ndescription: Use when step {i} is needed.\nlicense: MIT\n"
            f"metadata: {{author: team-{i % 7}}}\n---\n\n"
            + "# Steps\n\n"
            + "".join(f"{n}. Do thing {n}.\n" for n in range(30))
        )
        (d / "scripts" / "run.py").write_text(f"print({i})\n" * 20)
        (d / "reference" / "notes.md").write_text("note\n" * 200)
    files += 600
    sw = root / "swarm"
    sw.mkdir()
    (sw / "tools.yaml").write_text(
        "".join(
            f"tool_{i}:\n  description: Tool {i}.\n  input_schema: {{q: text, n: integer}}\n"
            f"  http: {{method: POST, url: 'https://x/{i}?q={{{{input.q}}}}'}}\n"
            for i in range(100)
        )
    )
    (sw / "policy.yaml").write_text(
        "permission_bundles:\n  worker: {permissions: [message_flow, mailbox_send]}\n"
    )
    (sw / "agents.yaml").write_text(
        "".join(
            f"agent-{i}:\n  intent: {{inline: You are agent {i}.}}\n  model: anthropic/claude\n"
            f"  permissions_bundle: worker\n  tools: [tool_{i}]\n"
            f"  skills: [vs-{i}, skill-{i}]\n"
            for i in range(100)
        )
    )
    return files + 3


def timed(fn: Callable[[], None]) -> list[float]:
    out = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


#: what → {min, median, max} seconds; printed as one JSON document with ``--json``.
RESULTS: dict[str, dict[str, float]] = {}


def show(what: str, times: list[float]) -> None:
    RESULTS[what] = {
        "min_s": round(min(times), 3),
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
    }
    print(
        f"{what}: min {min(times):.3f} s, median {statistics.median(times):.3f} s, "
        f"max {max(times):.3f} s ({RUNS} runs)"
    )


def main_() -> None:
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        out = Path(tmp) / "out"

        def fixture_cli() -> None:
            subprocess.run([str(CLI), "import", str(FIXTURES), "-o", str(out)], check=True,
                           capture_output=True)  # fmt: skip

        show("fixture tree, console script end to end", timed(fixture_cli))
        src = Path(tmp) / "src"
        n = synthetic(src)

        def big() -> None:
            err = io.StringIO()
            con = Console(out=io.StringIO(), err=err, environ={})
            code = main(["import", str(src), "-o", str(Path(tmp) / "big")], console=con)
            if code != 0:
                raise SystemExit(err.getvalue()[-2000:])

        times = timed(big)
        written = len(list((Path(tmp) / "big").glob("*.yaml")))
        show(f"synthetic workspace ({n} source files → {written} files), in-process", times)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if "--json" in sys.argv[1:]:  # for bench/record.py: the figures as the last document
        print(json.dumps({"runs": RUNS, "times": RESULTS}, indent=1))


if __name__ == "__main__":
    main_()
