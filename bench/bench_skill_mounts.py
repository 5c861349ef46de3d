"""What the runner's check of its mounted skill files adds to its start (issue 46).

Before anything runs, the runner hashes every file the pod mounts from the skill revision
ConfigMaps and compares it with the digest the bundle records
(:func:`swarmkit_runner.skill_mounts.check_skill_files`). This times exactly that call, in
process, over files laid out as the kubelet mounts them (in the page cache, as files the
kubelet has just written are):

1. an agent with 20 skills, each SKILL.md and 3 files of 2 KiB (80 files, 0.2 MiB);
2. 100 skills, each SKILL.md and 9 files of 4 KiB (1,000 files, 3.6 MiB);
3. one large skill: SKILL.md and 64 files of 128 KiB (8 MiB, the size of
   ``tests/integration/test_large_skill.py``'s).

Each case is checked ``--repeats`` (9) times after a warm-up; min / median / max wall time
and the median CPU time, with the load average before. ``--json`` prints one JSON document.

Usage: ``python bench/bench_skill_mounts.py [--repeats N] [--json]``.
"""

from __future__ import annotations

import argparse
import hashlib
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

from bench_support import fmt_spread, loadavg, machine, spread  # noqa: E402
from tests.support.bundles import agent, bundle, skill  # noqa: E402

from swarmkit_api.bundle import RunBundle  # noqa: E402
from swarmkit_runner.paths import RunnerPaths  # noqa: E402
from swarmkit_runner.skill_mounts import check_skill_files  # noqa: E402

#: (label, skills, files per skill besides SKILL.md, bytes per file)
CASES = (
    ("20 skills x (SKILL.md + 3 x 2 KiB)", 20, 3, 2 * 1024),
    ("100 skills x (SKILL.md + 9 x 4 KiB)", 100, 9, 4 * 1024),
    ("1 skill: SKILL.md + 64 x 128 KiB (8 MiB)", 1, 64, 128 * 1024),
)


def _laid_out(root: Path, skills: int, files: int, size: int) -> tuple[RunBundle, RunnerPaths]:
    """A bundle of ``skills`` skills whose files are written under ``root`` (one directory
    per skill, as mounted) with their digests recorded, as the operator records them."""
    pinned = []
    for s in range(skills):
        name = f"skill-{s:03d}"
        directory = root / name
        contents = {"SKILL.md": f"---\nname: {name}\n---\n\n# {name}\n" * 8}
        contents.update(
            {f"reference/doc-{i:02d}.md": (f"{name}/{i} " * size)[:size] for i in range(files)}
        )
        digests = {}
        for path, text in contents.items():
            target = directory / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            digests[path] = hashlib.sha256(text.encode()).hexdigest()
        made = skill(name).model_copy(update={"files_sha256": digests, "config_map": name})
        pinned.append(made)
    b = bundle(agents=[agent("a", skills=[p.name for p in pinned])], skills=pinned)
    return b, RunnerPaths.resolve(str(root / "bundle"), str(root))


def _measure(b: RunBundle, paths: RunnerPaths, repeats: int) -> dict[str, Any]:
    checked = check_skill_files(b, paths)  # warm-up (and the count)
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        check_skill_files(b, paths)
        wall.append((time.perf_counter() - w0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return {
        "files": checked,
        "wall_ms": spread(wall),
        "cpu_ms_median": round(statistics.median(cpu), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {"machine": machine(), "cases": {}}
    for label, skills, files, size in CASES:
        with tempfile.TemporaryDirectory(prefix="bench-skill-mounts-") as tmp:
            b, paths = _laid_out(Path(tmp), skills, files, size)
            load = loadavg()
            result = _measure(b, paths, args.repeats)
            mib = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file()) / 2**20
            result.update({"mib": round(mib, 2), "loadavg_before": load})
            report["cases"][label] = result
        if not args.json:
            print(
                f"{label}: {result['files']} files, {result['mib']} MiB: "
                f"{fmt_spread(result['wall_ms'])} (min/median/max), "
                f"CPU {result['cpu_ms_median']} ms median; load {load[0]}"
            )
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
