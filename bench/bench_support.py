"""What the benchmark scripts share: percentiles, best/median/worst of repeats, the machine's
load, a process's status fields and CPU time and an optional py-spy profile of a process.

A benchmark prints its numbers with the load they were measured under: every series is
run several times and reported as min / median / max over the repeats, so the worst of
three is in the table, not only the best.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
#: The verbs of ``apiserver_request_total`` that change something.
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
_METRIC_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def apiserver_writes(metrics_text: str) -> dict[str, int]:
    """``"VERB resource[/subresource]"`` → writes the apiserver has served (all clients),
    from its ``/metrics`` text; subtract two readings to count what happened between."""
    out: dict[str, int] = {}
    for line in metrics_text.splitlines():
        m = _METRIC_LINE.match(line)
        if m is None:
            continue
        labels = dict(_LABEL.findall(m["labels"]))
        if labels.get("verb") not in WRITE_VERBS:
            continue
        what = labels.get("resource", "")
        if labels.get("subresource"):
            what += "/" + labels["subresource"]
        key = f"{labels['verb']} {what}"
        out[key] = out.get(key, 0) + int(float(m["value"]))
    return out


def busy_writes(metrics_text: str) -> int:
    """The apiserver's writes so far, leases aside (components renew them every few seconds
    whatever else happens)."""
    return sum(v for k, v in apiserver_writes(metrics_text).items() if not k.endswith(" leases"))


def wait_quiet_apiserver(
    metrics: Callable[[], str], writes: float = 2.0, window: float = 3.0, limit: float = 180.0
) -> str:
    """Wait until the apiserver serves fewer than ``writes`` writes a second (leases aside)
    over ``window`` seconds, at most ``limit``: the previous run's aftermath (a namespace of
    thousands of objects being deleted, the garbage collector, the Job controller's trailing
    writes) is not measured as the next run's time. ``metrics()`` returns the apiserver's
    ``/metrics`` text. Returns what was waited, for the log."""
    began = time.monotonic()
    while True:
        before = busy_writes(metrics())
        time.sleep(window)
        rate = (busy_writes(metrics()) - before) / window
        waited = time.monotonic() - began
        if rate < writes or waited >= limit:
            return f"waited {waited:.0f} s for a quiet apiserver ({rate:.1f} writes/s)"


def diff_counts(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """``after - before`` per key, keeping only what grew, largest first."""
    grown = {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}
    return dict(sorted(grown.items(), key=lambda kv: (-kv[1], kv[0])))


def pct(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, linearly interpolated; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(seconds: Sequence[float]) -> dict[str, float]:
    """n, p50, p95, max and mean of intervals given in seconds, in milliseconds."""
    ms = [v * 1000 for v in seconds]
    nan = float("nan")
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 0.5), 1),
        "p95_ms": round(pct(ms, 0.95), 1),
        "max_ms": round(max(ms), 1) if ms else nan,
        "mean_ms": round(statistics.fmean(ms), 1) if ms else nan,
    }


def spread(values: Sequence[float], digits: int = 1) -> dict[str, float]:
    """min / median / max of one figure over the repeats of a series, rounded to ``digits``
    decimals (a ratio against a goal needs more than a time in ms)."""
    clean = [v for v in values if v == v]  # NaN (no samples) never wins min or max
    if not clean:
        return {"min": float("nan"), "median": float("nan"), "max": float("nan")}
    return {
        "min": round(min(clean), digits),
        "median": round(statistics.median(clean), digits),
        "max": round(max(clean), digits),
    }


def fmt_spread(s: dict[str, float], unit: str = "ms") -> str:
    return f"{s['min']:g} / {s['median']:g} / {s['max']:g} {unit}"


def loadavg() -> tuple[float, float, float]:
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {"cpus": os.cpu_count(), "python": sys.version.split()[0], "loadavg": loadavg()}


def proc_status(pid: int | str) -> dict[str, str]:
    """``/proc/<pid>/status`` as its fields (``VmRSS``, ``VmData``, ``PPid``...), values
    stripped; OSError once the process has gone."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User + system CPU time of ``pid`` (plus its reaped children's with ``children``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    # Fields after the command: state is index 0, utime 11, stime 12, cutime 13, cstime 14.
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


class Profile:
    """``py-spy record`` of one process in collapsed-stack text (``--format raw``).

    Started only when asked (``--profile DIR``); py-spy comes with the dev extra. Samples
    are taken without pausing the target (``--nonblocking``), so the profile does not slow
    down what it measures.
    """

    def __init__(self, pid: int, out: Path, rate: int = 100) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(exe).exists():
            raise SystemExit("--profile needs py-spy: pip install py-spy (the dev extra has it)")
        self.out = out
        out.parent.mkdir(parents=True, exist_ok=True)
        argv = [exe, "record", "--pid", str(pid), "--rate", str(rate), "--nonblocking"]
        self.proc = subprocess.Popen(
            [*argv, "--format", "raw", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> Path:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.out


def top_frames(collapsed: Path, limit: int = 8, within: str = "") -> list[tuple[str, float]]:
    """Where a collapsed profile's samples are: share of samples per function.

    Without ``within``: by the innermost frame (self time). With ``within`` (a path part
    such as ``swarmkit_operator/``): by every frame from that code on the stack (inclusive),
    leaving out the frames every sample has (the entry point and the event loop).
    """
    totals: dict[str, int] = {}
    samples = 0
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]  # one row per function
        if not within:
            picked = {frames[-1]}
        else:
            picked = {f for f in frames if within in f and "__main__" not in f}
        for frame in picked:
            totals[frame] = totals.get(frame, 0) + n
    if not samples:
        return []
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:limit]
    return [(frame, round(100 * n / samples, 1)) for frame, n in ranked]
