"""Record a benchmark's JSON output as a committed result the docs render.

``python bench/record.py NAME -- COMMAND...`` runs COMMAND (a benchmark with its ``--json``
flag), parses the JSON document it prints last on stdout (or, with ``--json-file PATH``
given before NAME, the file the benchmark wrote: ``bench_scale.py --json PATH``) and writes
``bench/results/NAME.json``: ``{"benchmark", "command", "date", "machine", "load",
"results"}`` (``load``: the 1/5/15-minute load averages just before and after the command, so
a figure measured on a busy shared machine says so).
``make generate`` renders every such file into ``docs/performance/index.md``, so a figure in
the docs is always one a benchmark printed, with the date, machine and command beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _machine() -> dict[str, object]:
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


def _last_json(stdout: str) -> object:
    # A benchmark may print progress before its document: take the last one that parses.
    text = stdout.strip()
    for start in [i for i, ch in enumerate(text) if ch in "{["]:
        try:
            return json.loads(text[start:])
        except json.JSONDecodeError:
            continue
    raise SystemExit("the benchmark printed no JSON document on stdout (did you pass --json?)")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("name", help="result name: bench/results/NAME.json")
    parser.add_argument("--json-file", type=Path, help="read the results from this file")
    parser.add_argument(
        "--results-dir", type=Path, default=HERE / "results", help="where NAME.json goes"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the benchmark")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the benchmark command after --")
    started, load_before = time.time(), [round(x, 2) for x in os.getloadavg()]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    record = {
        "benchmark": args.name,
        "command": shlex.join(command),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "duration_s": round(time.time() - started, 1),
        "machine": _machine(),
        "load": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
        "results": (
            json.loads(args.json_file.read_text()) if args.json_file else _last_json(done.stdout)
        ),
    }
    out = args.results_dir / f"{args.name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
