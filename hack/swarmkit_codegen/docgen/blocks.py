"""Renderers of the prose pages' figures blocks: records → Markdown lines, nothing else.

Each takes the records its block reads (name → the JSON ``bench/record.py`` wrote:
``command``, ``date``, ``machine``, ``load``, ``results``) and returns the block's lines.
Every number printed is read from a record; what a renderer adds is words, arithmetic on
those numbers (a median, a difference) and the goal a test asserts. :mod:`.figures` puts
the lines between the page's markers.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .schema import cell

Records = Mapping[str, Mapping[str, Any]]


def _num(value: Any) -> str:
    """A measured number as the record has it, thousands grouped (no invented precision)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.1f}"
    return f"{int(value):,}"


def _mmm(stats: Mapping[str, Any], unit: str = "") -> str:
    text = " / ".join(_num(stats[k]) for k in ("min", "median", "max"))
    return f"{text} {unit}".rstrip()


def _load(values: Any) -> str:
    return " / ".join(_num(v) for v in values) if isinstance(values, list) else str(values)


def provenance(name: str, record: Mapping[str, Any]) -> str:
    """Where the figures below come from: command, date, machine and the machine's load."""
    machine = record.get("machine") or {}
    load = record.get("load") or {}
    parts = [
        f"Measured {record.get('date', '?')} with `{record.get('command', '?')}`"
        + (f" ({_num(record['duration_s'])} s)" if "duration_s" in record else ""),
        f"on {machine.get('cpus', '?')} cores and {_num(machine.get('memory_gib', '?'))} GiB "
        f"(Python {machine.get('python', '?')}, {machine.get('system', '?')})",
    ]
    if load:
        parts.append(
            f"load average (1 / 5 / 15 min) {_load(load.get('before'))} before, "
            f"{_load(load.get('after'))} after"
        )
    return "; ".join(parts) + f". Raw numbers: `bench/results/{name}.json`."


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def _size(results: Mapping[str, Any]) -> str:
    if results.get("full"):
        return f"full size (`SWARMKIT_CHAOS=full`, `make chaos`), seed {results.get('seed')}"
    return (
        f"reduced size (as in `make test`; `make chaos` runs the full one), "
        f"seed {results.get('seed')}"
    )


def ha_failover(records: Records) -> list[str]:
    """The leader failover of the chaos suite (``test_leader_failover.py``)."""
    record = records["chaos"]
    results = record["results"]
    f = results["leader_failover"]
    acquired = [float(x["leaseAcquired"]) for x in f["failovers"]]
    first = f["firstWriteSeconds"]
    met = "met" if float(first["max"]) < 15 else "NOT met"
    return [
        provenance("chaos", record),
        "",
        f"At {_size(results)}: {f['replicas']} replicas with the chart's lease "
        f"({f['lease']}: duration / renew deadline / retry), {_num(f['objects'])} objects, "
        f"{f['runs']} Runs and an every-minute schedule ({f['scheduledTicks']} ticks), "
        f"the leader SIGKILLed {f['kills']} time(s):",
        "",
        *_table(
            ("", "min", "median", "max", "goal"),
            [
                (
                    "leader killed → a standby holds the Lease",
                    *(
                        f"{_num(v)} s"
                        for v in (
                            min(acquired),
                            statistics.median(acquired),
                            max(acquired),
                        )
                    ),
                    "",
                ),
                (
                    "leader killed → the new leader's first write (a Skill created right "
                    "after the kill)",
                    *(f"{_num(first[k])} s" for k in ("min", "median", "max")),
                    f"< 15 s: {met}",
                ),
                (
                    "write requests of a replica while it was a standby (its own request "
                    "metric, the Lease aside)",
                    "0",
                    "0",
                    "0",
                    "0: met (the test fails on any other count, so a recorded run had none)",
                ),
            ],
        ),
    ]


def _by_kind(value: Any) -> str:
    """A count, or a count per kind as its total and its parts."""
    if isinstance(value, Mapping):
        parts = ", ".join(f"{k} {_num(v)}" for k, v in sorted(value.items(), key=lambda kv: -kv[1]))
        return f"{_num(sum(value.values()))} ({parts})"
    return _num(value)


def _chaos_row(key: str, v: Mapping[str, Any]) -> tuple[str, str] | None:
    if key == "operator_killed":
        kills = ", ".join(_num(x) for x in v["killAfterSeconds"])
        return (
            "operator SIGKILLed",
            f"{_num(v['objects'])} objects, {v['runs']} Runs, {v['kills']} kills at {kills} s "
            f"after a chunk, {v['skillsEditedWhileDown']} skills edited while it was down; "
            f"converged {_num(v['convergedSecondsAfterLastChunk'])} s after the last chunk "
            f"({_num(v['totalSeconds'])} s in all)",
        )
    if key.startswith("restart_"):
        component = key.removeprefix("restart_")
        return (
            f"{component} restarted",
            f"{_num(v['objects'])} objects, {v['runs']} Runs, {_num(v['outageSeconds'])} s "
            f"outage; {component} healthy {_num(v['componentHealthyAfterStartSeconds'])} s "
            f"after start; converged {_num(v['convergedSecondsAfterRestart'])} s after; "
            f"operator restarts (a leader that could not renew) {v['operatorRestarts']}",
        )
    if key == "conflicts":
        watched = _by_kind(v["versionsWatched"])
        return (
            "conflicts",
            f"{_num(v['userEditsPerObject'])} edits per object by two concurrent editors in "
            f"{_num(v['editSeconds'])} s; status versions watched {watched}; "
            f"{v['statusRegressions']} status regressions",
        )
    if key == "bad_input":
        return (
            "bad input",
            f"{_num(v['cases'])} cases in {_num(v['stormSeconds'])} s: "
            f"{_by_kind(v['rejectedAtAdmission'])} rejected at admission naming a field path; "
            f"{_num(v['admittedAndConditioned'])} admitted, every one conditioned with a "
            f"reason {_num(v['allConditionedSecondsAfterStorm'])} s after the storm; canary "
            f"Skill Ready in {_num(v['canaryReadySeconds'])} s; "
            f"{_num(v['idleApiRequestsPerSecond'])} API requests/s afterwards",
        )
    if key == "secrets_scan":
        return (
            "secrets scan",
            f"{v['secrets']} test secrets; scanned {_by_kind(v['scanned'])}; {v['hits']} hits",
        )
    if key == "leader_failover":
        return (
            "leader failover",
            f"{v['replicas']} replicas, {_num(v['objects'])} objects, {v['runs']} Runs, "
            f"{v['kills']} kill(s); new leader's first write "
            f"{_mmm(v['firstWriteSeconds'], 's')} (min / median / max) after the kill",
        )
    return None


def chaos(records: Records) -> list[str]:
    """The chaos suite's report (``chaos-report.json``): one row per test that recorded."""
    record = records["chaos"]
    results = record["results"]
    loads = results.get("loadavg") or {}
    rows = []
    for key, value in results.items():
        row = _chaos_row(key, value) if isinstance(value, Mapping) else None
        if row is not None:
            rows.append((*row, _load(loads.get(key, "not recorded"))))
    return [
        provenance("chaos", record),
        "",
        f"At {_size(results)}. Times are wall-clock on that machine under that load.",
        "",
        *_table(("test", "figures", "load (1 / 5 / 15 min) when recorded"), rows),
    ]


def _spread(runs: Sequence[Mapping[str, Any]], pick: str, key: str) -> str:
    """One statistic of each repeat: a traced segment's (``pick``) or the Run → Job time's."""
    stats = [r["segments"][pick] if pick else r["run_created_to_job_created"] for r in runs]
    return " / ".join(_num(s[key]) for s in stats)


def egress_overhead(records: Records) -> list[str]:
    """``bench_runs.py --trace``, series A, with ``--egress declared`` against ``none``."""
    declared = records["isolation-egress-declared"]
    none = records["isolation-egress-none"]
    d_runs, n_runs = declared["results"]["series"]["A"], none["results"]["series"]["A"]
    plan, post = "operator: egress plan (resolve + render)", "operator: NetworkPolicy POSTed"
    keys = ("p50_ms", "p95_ms", "max_ms")
    rows = [
        ("egress plan (resolve + render), `declared`", *(_spread(d_runs, plan, k) for k in keys)),
        ("NetworkPolicy POST, `declared`", *(_spread(d_runs, post, k) for k in keys)),
        ("Run created → Job created, `declared`", *(_spread(d_runs, "", k) for k in keys)),
        ("Run created → Job created, `none` (baseline)", *(_spread(n_runs, "", k) for k in keys)),
    ]
    writes = {
        label: " / ".join(_num(r["api_writes_per_run"]) for r in runs)
        for label, runs in (("declared", d_runs), ("none", n_runs))
    }
    first = d_runs[0]
    repeats = " / ".join(str(i + 1) for i in range(len(d_runs)))
    return [
        provenance("isolation-egress-declared", declared),
        "",
        provenance("isolation-egress-none", none),
        "",
        f"Series A (runner stand-in: the operator and the apiserver are what is timed), "
        f"{first['runs']} Runs at {_num(first['rate_per_s'])}/s, {len(d_runs)} repeats each:",
        "",
        *_table((f"measure (ms, repeat {repeats})", "p50", "p95", "max"), rows),
        "",
        f"API writes per Run (all clients, repeat by repeat): `declared` {writes['declared']}, "
        f"`none` {writes['none']}.",
    ]


def client_install(records: Records) -> list[str]:
    """``bench_clients.py``: ``make clients`` cold (empty caches) and warm."""
    record = records["bench-clients"]
    r = record["results"]
    parts = r["cold"].get("parts") or {}
    names = {"a2a-go-client": "the A2A Go client built", "node-clients": "`npm ci` of the npm SDKs"}
    inside = "; ".join(f"{names.get(k, k)} {_num(v)} s" for k, v in sorted(parts.items()))
    return [
        provenance("bench-clients", record),
        "",
        *_table(
            ("`python -m swarmkit_devcluster clients`", "wall-clock"),
            [
                (
                    "cold (empty `SWARMKIT_CACHE_DIR`, `GOCACHE`, `GOMODCACHE`, npm cache)",
                    f"{_num(r['cold']['seconds'])} s" + (f" ({inside})" if inside else ""),
                ),
                ("warm (installed: a no-op)", f"{_num(r['warm']['seconds'])} s"),
            ],
        ),
    ]


def _warm_label(r: Mapping[str, Any]) -> str:
    if "warmRebuilt" not in r:
        return "warm `make images` (not checked whether it rebuilt anything)"
    if r["warmRebuilt"]:
        return (
            f"warm `make images`: rebuilt {', '.join(r['warmRebuilt'])} (a source changed "
            "between the two runs: not a no-op)"
        )
    return "warm `make images` (inputs unchanged: nothing rebuilt)"


def image_build(records: Records) -> list[str]:
    """``bench_images.py``: ``make images`` cold in a scratch store, then warm."""
    record = records["bench-images"]
    r = record["results"]
    rows = [
        (
            f"{name} image (`{img['reference']}`)",
            f"{_num(img['buildSeconds'])} s",
            f"{_num(img['rootfsMiB'])} MiB root filesystem",
        )
        for name, img in r["images"].items()
    ]
    return [
        provenance("bench-images", record),
        "",
        f"Builder: {', '.join(r['builder'])}.",
        "",
        *_table(
            ("", "time", "size"),
            [
                (
                    "Debian tree (debootstrap) and bases (distroless closure, npm tarballs, "
                    "the three imports)",
                    f"{_num(r['basesSeconds'])} s",
                    "",
                ),
                *rows,
                ("cold `make images` total", f"{_num(r['coldSeconds'])} s", ""),
                (_warm_label(r), f"{_num(r['warmSeconds'])} s", ""),
            ],
        ),
    ]


_AB_ROWS = (
    ("time to all Ready", "readySeconds", "s"),
    ("bare client, same writes (floor, measured in the same run)", "floorSeconds", "s"),
    ("ratio to the floor", "xFloor", "x"),
    ("fan-out (hot skill edited → every granting agent re-versioned)", "fanoutSeconds", "s"),
    ("restart → first reconcile", "restartFirstReconcileSeconds", "s"),
    ("restart: status writes to unchanged objects", "restartStatusWrites", ""),
)


def _rev(rev: Mapping[str, Any]) -> str:
    named = f" ({rev['rev']})" if rev["rev"] != rev["commit"] else ""
    return f"`{rev['commit']}`{named}"


def runtime_ab(records: Records) -> list[str]:
    """``bench_ab.py``: two revisions of the operator, alternating, same size and floor."""
    record = records["bench-ab"]
    r = record["results"]
    a, b = r["revisions"]["a"], r["revisions"]["b"]
    sa, sb = r["summary"]["a"], r["summary"]["b"]
    rows = [(label, _mmm(sb[key], unit), _mmm(sa[key], unit)) for label, key, unit in _AB_ROWS]
    ready = float(sb["readySeconds"]["median"]) / float(sa["readySeconds"]["median"]) - 1
    loads = {k: ", ".join(run["load"] for run in r["runs"][k]) for k in ("a", "b")}
    return [
        provenance("bench-ab", record),
        "",
        f"{r['repeat']} runs of each at N = {_num(r['size'])} ({_num(r['objects'])} objects), "
        f"alternating; min / median / max:",
        "",
        *_table(
            (f"N = {_num(r['size'])}", f"B: {_rev(b)}", f"A: {_rev(a)}"),
            rows,
        ),
        "",
        f"Medians: time to Ready {ready:+.0%} for B against A; the ratio to the floor "
        f"{_num(sb['xFloor']['median'])}x against {_num(sa['xFloor']['median'])}x. "
        f"Load (1 / 5 / 15 min) before each run: B {loads['b']}; A {loads['a']}.",
    ]


def _per_size(runs: Sequence[Mapping[str, Any]], n: str, key: str) -> list[float]:
    return [float(r[key]) for r in runs if str(r.get("n")) == n and key in r]


def scale_limits(records: Records) -> list[str]:
    """``bench_scale.py``: what one leader spends per object at each N, from the runs."""
    record = records["bench-scale"]
    runs = record["results"]["runs"]
    sizes = sorted({str(r["n"]) for r in runs}, key=int)
    rows = []
    for n in sizes:
        at = [r for r in runs if str(r["n"]) == n]
        objects = int(at[0]["objects"])
        ready = statistics.median(_per_size(at, n, "readySeconds"))
        cpu = statistics.median(_per_size(at, n, "cpuSeconds"))
        rss = statistics.median(_per_size(at, n, "peakRssMB"))
        writes = statistics.median(_per_size(at, n, "operatorWrites"))
        floor = statistics.median(float(r["floor"]["seconds"]) for r in at)
        floor_writes = statistics.median(float(r["floor"]["writes"]) for r in at)
        rows.append(
            (
                f"{_num(int(n))} ({_num(objects)})",
                f"{_num(ready)} s / {_num(floor)} s",
                f"{cpu / ready:.2f} cores ({_num(cpu)} s)",
                f"{_num(rss)} MB ({rss * 2**20 / objects / 1024:.1f} KiB)",
                f"{_num(round(writes / ready))}/s",
                f"{_num(round(floor_writes / floor))}/s",
            )
        )
    return [
        provenance("bench-scale", record),
        "",
        "Medians over the repeats at each size (N Skills, objects in all):",
        "",
        *_table(
            (
                "N (objects)",
                "time to Ready / its floor",
                "operator CPU while reconciling",
                "peak RSS (per object)",
                "operator writes",
                "a bare client's writes (the apiserver's rate here)",
            ),
            rows,
        ),
    ]
