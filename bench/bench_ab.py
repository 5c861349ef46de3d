"""Benchmark: the operator's code at two git revisions, alternately, on the same reconcile load.

A design change is judged against the code before it on the same machine at the same time:
`bench_scale.py` (this checkout's, with this checkout's CRDs) runs `--repeat` times per
revision at one size, alternating A, B, A, B..., each run in its own private control
plane, the operator (`python -m swarmkit_operator`) imported from that revision's tree
(`git archive` into a scratch directory, byte-compiled as the image is, put first on
`PYTHONPATH`). Each run measures its own floor (a bare client doing the same writes), so
a run's ratio to its floor is comparable across a machine whose load moves.

Per revision, min / median / max over its runs: time to all Ready, the floor, the ratio,
the fan-out (hot skill edited until every granting agent is re-versioned), the restart's
first reconcile and the status writes a restart makes to unchanged objects; and each run's
load average before it. `make bench-ab` (`--a`/`--b` revisions); `--json` prints the
results as one JSON document, last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: bench_scale's per-size summary fields compared here (each {min, median, max} per run)
FIELDS = (
    "readySeconds",
    "floorSeconds",
    "xFloor",
    "fanoutSeconds",
    "restartFirstReconcileSeconds",
    "restartStatusWrites",
)


def _tree(rev: str, dest: Path) -> str:
    """Extract ``rev``'s files into ``dest`` (no worktree: the repository stays untouched)."""
    commit = subprocess.run(
        ["git", "-C", str(HERE.parent), "rev-parse", "--short", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dest.mkdir(parents=True)
    archive = subprocess.Popen(
        ["git", "-C", str(HERE.parent), "archive", commit, "operator"], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} failed")
    # Byte-compiled as the operator image does (operator/Dockerfile: compileall): with
    # PYTHONDONTWRITEBYTECODE set, a tree of bare sources is compiled again at every start,
    # ~0.12 s more CPU for the larger tree, that no deployed operator pays.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(dest / "operator"),
        ],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return commit


def _one(tree: Path, size: int, out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree / "operator")}
    subprocess.run(
        [
            sys.executable,
            str(HERE / "bench_scale.py"),
            "--sizes",
            str(size),
            "--repeat",
            "1",
            "--json",
            str(out),
        ],
        env=env,
        stdout=sys.stderr,  # its table stays visible; stdout carries only the JSON
        check=True,
    )
    summary = json.loads(out.read_text())["summary"][str(size)]
    run = {f: summary[f]["median"] for f in FIELDS}
    run["objects"] = summary["objects"]
    run["load"] = summary["load"][0]
    return run


def _mmm(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--a", required=True, help="revision A (e.g. the code before a change)")
    parser.add_argument("--b", default="HEAD", help="revision B (default HEAD)")
    parser.add_argument("--size", type=int, default=1000, help="Skills (bench_scale's N)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per revision")
    parser.add_argument("--json", action="store_true", help="print the results as JSON, last")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="swarmkit-bench-ab-"))
    try:
        commits = {key: _tree(rev, scratch / key) for key, rev in (("a", args.a), ("b", args.b))}
        runs: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        for i in range(args.repeat):
            for key in ("a", "b"):
                print(f"run {i + 1} of {args.repeat}: {key} = {commits[key]}", file=sys.stderr)
                runs[key].append(_one(scratch / key, args.size, scratch / f"{key}-{i}.json"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results = {
        "size": args.size,
        "repeat": args.repeat,
        "revisions": {
            "a": {"rev": args.a, "commit": commits["a"]},
            "b": {"rev": args.b, "commit": commits["b"]},
        },
        "objects": runs["a"][0]["objects"],
        "summary": {
            key: {f: _mmm([float(r[f]) for r in runs[key]]) for f in FIELDS} for key in runs
        },
        "runs": runs,
    }
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
