"""Benchmark the reconcile loop against the real local control plane (``make bench-reconcile``).

1. Start the operator (``python -m swarmkit_operator``, as deployed) and apply, all at once
   from a 16-way client, a Workspace, 1,000 Skills, 200 Agents (10 grants each, one skill
   granted by all 200) and 20 Topologies (10 agents each). Time until every object is
   Ready (watched through the operator's ``swarmkit_objects`` gauge, then checked with a
   LIST), count the API writes the operator made (its ``swarmkit_api_requests_total``) and
   read its RSS.
2. The floor: a bare client (the same JSON client, 16-way) does the same writes into a
   fresh namespace: the same 1,221 creates, the same rendered ConfigMaps, the same status
   patches and as many Events. The operator's time over this is the "x the floor" number.
3. Edit the one skill all 200 agents grant and time until all 200 agents report a new
   version.

Uses the cluster of ``$SWARMKIT_KUBECONFIG`` if set (make sure no other operator watches
it), else starts a private one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for sub in ("operator", "hack", "."):
    sys.path.insert(0, str(REPO / sub))

from bench_support import proc_status  # noqa: E402
from tests.support.served import free_port  # noqa: E402

from swarmkit_devcluster.testing import (  # noqa: E402
    apply_crds,
    session_cluster,
    writes_by_resource,
)
from swarmkit_operator import k8s  # noqa: E402

GROUP_VERSION = "swarmkit.dev/v1alpha1"
PLURALS = {
    "Workspace": "workspaces",
    "Skill": "skills",
    "Agent": "agents",
    "Topology": "topologies",
}
CONCURRENCY = 16


def manifests(skills: int, agents: int, grants: int, topologies: int) -> list[dict[str, Any]]:
    def obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": GROUP_VERSION,
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        }

    docs = []
    for i in range(skills):
        docs.append(
            obj(
                "Skill",
                f"skill-{i:04d}",
                {
                    "description": f"Use when benchmark task {i} comes up.",
                    "category": "capability",
                    "instructions": f"# Skill {i}\n\nDo step one, then step two.\n",
                    "files": [{"path": "reference/notes.md", "content": f"notes {i}\n"}],
                    "provenance": {"authoredBy": "human", "version": "1.0.0"},
                },
            )
        )
    for a in range(agents):
        granted = ["skill-0000"] + [
            f"skill-{1 + (a * (grants - 1) + j) % (skills - 1):04d}" for j in range(grants - 1)
        ]
        docs.append(
            obj(
                "Agent",
                f"agent-{a:03d}",
                {"systemPrompt": f"You are agent {a}.", "skills": granted},
            )
        )
    per = max(1, agents // topologies)
    for t in range(topologies):
        members = [f"agent-{a:03d}" for a in range(t * per, min(agents, (t + 1) * per))]
        nodes: list[dict[str, Any]] = [
            {"name": "root", "agentRef": {"name": members[0]}, "role": "root"}
        ]
        nodes += [
            {"name": f"w{i}", "agentRef": {"name": m}, "role": "worker", "parent": "root"}
            for i, m in enumerate(members[1:])
        ]
        docs.append(
            obj("Topology", f"team-{t:02d}", {"workspaceRef": {"name": "default"}, "agents": nodes})
        )
    return docs


WORKSPACE = {
    "apiVersion": GROUP_VERSION,
    "kind": "Workspace",
    "metadata": {"name": "default"},
    "spec": {"modelProviders": [{"name": "replay", "type": "replay"}]},
}


async def bounded(jobs: Iterable[Callable[[], Awaitable[Any]]], limit: int = CONCURRENCY) -> None:
    sem = asyncio.Semaphore(limit)

    async def run(job: Callable[[], Awaitable[Any]]) -> None:
        async with sem:
            await job()

    await asyncio.gather(*(run(j) for j in jobs))


def creator(namespace: str, doc: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    return lambda: k8s.create_custom(PLURALS[doc["kind"]], namespace, doc)


def cm_creator(body: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    return lambda: k8s.create_config_map(body)


async def create_namespace(name: str) -> None:
    status, payload = await k8s.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    if status >= 300:
        raise RuntimeError(f"creating namespace {name}: {status} {payload}")


async def delete_namespace(name: str) -> None:
    await k8s.request("DELETE", f"/api/v1/namespaces/{name}")


async def list_custom(plural: str, namespace: str) -> list[dict[str, Any]]:
    path = k8s.custom_path(plural, namespace)
    status, payload = await k8s.request("GET", path)
    if status >= 300:
        raise RuntimeError(f"GET {path}: {status}")
    return list(payload.get("items") or [])


async def list_config_maps(namespace: str) -> list[dict[str, Any]]:
    status, payload = await k8s.request("GET", k8s.core_path("configmaps", namespace))
    return list(payload.get("items") or []) if status < 300 else []


async def not_ready_summary(namespace: str) -> str:
    """Objects not Ready, by kind and reason (for a timed-out run)."""
    lines = []
    for kind, plural in PLURALS.items():
        reasons: dict[str, int] = {}
        items = await list_custom(plural, namespace)
        for item in items:
            conds = (item.get("status") or {}).get("conditions") or []
            ready = next((c for c in conds if c["type"] == "Ready"), None)
            if ready is None or ready["status"] != "True":
                key = ready["reason"] if ready else "(no status)"
                reasons[key] = reasons.get(key, 0) + 1
        lines.append(f"{kind}: {len(items)} objects, not Ready: {reasons or 'none'}")
    return "\n".join(lines)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def metric_sum(text: str, name: str, match: dict[str, str] | None = None) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if match and any(labels.get(k) != v for k, v in match.items()):
            continue
        total += float(line.rsplit(" ", 1)[1])
    return total


def rss_mb(pid: int) -> tuple[float, float]:
    fields = proc_status(pid)
    return (
        int(fields.get("VmRSS", "0 kB").split()[0]) / 1024,
        int(fields.get("VmHWM", "0 kB").split()[0]) / 1024,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], timeout: float, interval: float, what: str
) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(interval)


async def bench(args: argparse.Namespace, kubeconfig: Path) -> dict[str, Any]:
    k8s.configure(workers=CONCURRENCY, kubeconfig=str(kubeconfig))
    suffix = secrets.token_hex(3)
    ns, floor_ns = f"bench-reconcile-{suffix}", f"bench-floor-{suffix}"
    docs = manifests(args.skills, args.agents, args.grants, args.topologies)
    counts = {k: sum(1 for d in docs if d["kind"] == k) for k in PLURALS}
    counts["Workspace"] = 1
    total = sum(counts.values())

    async def no_old_namespaces() -> bool:
        _, payload = await k8s.request("GET", "/api/v1/namespaces")
        names = [n["metadata"]["name"] for n in (payload or {}).get("items", [])]
        return not [n for n in names if n.startswith(("bench-reconcile-", "bench-floor-"))]

    # A previous run's namespaces still being deleted would load the apiserver meanwhile.
    await wait_until(no_old_namespaces, 300, 1.0, "earlier benchmark namespaces to be gone")
    port, live = free_port(), free_port()
    log_path = Path(tempfile.mkdtemp(prefix="bench-reconcile-")) / "operator.log"
    env = dict(os.environ, KUBECONFIG=str(kubeconfig), SWARMKIT_LOG_FORMAT="plain")
    with log_path.open("wb") as log:
        profile = os.environ.get("BENCH_PROFILE")  # a path: run the operator under cProfile
        proc = subprocess.Popen(
            [
                sys.executable,
                *(["-m", "cProfile", "-o", profile] if profile else []),
                "-m",
                "swarmkit_operator",
                "--metrics-port",
                str(port),
                "--liveness",
                f"http://127.0.0.1:{live}/healthz",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    result: dict[str, Any] = {"objects": counts, "operatorLog": str(log_path)}
    try:

        async def operator_up() -> bool:
            try:
                scrape(port)
                with urllib.request.urlopen(f"http://127.0.0.1:{live}/healthz", timeout=2):
                    return True
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(f"operator exited; see {log_path}") from None
                return False

        await wait_until(operator_up, 60, 0.2, "the operator to start")
        await create_namespace(ns)
        writes_before = writes_by_resource(scrape(port))

        def ready_count() -> float:
            text = scrape(port)
            return sum(
                metric_sum(
                    text, "swarmkit_objects", {"kind": k, "condition": "Ready", "status": "True"}
                )
                for k in PLURALS
            )

        baseline = ready_count()
        started = time.monotonic()
        await k8s.create_custom("workspaces", ns, WORKSPACE)
        await bounded(creator(ns, d) for d in docs)
        applied = time.monotonic() - started

        async def all_ready_listed() -> bool:
            for plural in PLURALS.values():
                for item in await list_custom(plural, ns):
                    conds = (item.get("status") or {}).get("conditions") or []
                    if not any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                        return False
            return True

        last_list = [time.monotonic()]

        async def all_ready() -> bool:
            # Cheap: the operator's own gauge; a LIST confirms it (and, every 2 s, covers
            # objects of other namespaces coming or going and skewing the gauge).
            if ready_count() - baseline >= total or time.monotonic() - last_list[0] > 2:
                last_list[0] = time.monotonic()
                return await all_ready_listed()
            return False

        try:
            await wait_until(all_ready, args.timeout, 0.1, f"{total} objects Ready")
        except TimeoutError:
            print(await not_ready_summary(ns), file=sys.stderr)
            raise
        ready_time = time.monotonic() - started
        text = scrape(port)
        writes_after = writes_by_resource(text)
        op_writes = {
            k: writes_after.get(k, 0) - writes_before.get(k, 0)
            for k in writes_after
            if writes_after.get(k, 0) - writes_before.get(k, 0) > 0
        }
        rss, peak = rss_mb(proc.pid)
        result["operatorCpuSeconds"] = round(cpu_seconds(proc.pid), 2)
        result["apply"] = {"seconds": round(applied, 2), "writes": total}
        result["ready"] = {
            "seconds": round(ready_time, 2),
            "operatorWrites": sum(op_writes.values()),
            "operatorWritesBy": op_writes,
        }
        result["rssMB"] = round(rss, 1)
        result["peakRssMB"] = round(peak, 1)

        # --- edit one skill granted by every agent ---
        agents_before = {
            a["metadata"]["name"]: a["status"]["version"] for a in await list_custom("agents", ns)
        }
        hot = [d for d in docs if d["kind"] == "Agent"]
        old_hash = next(
            (i.get("status") or {}).get("contentHash")
            for i in await list_custom("skills", ns)
            if i["metadata"]["name"] == "skill-0000"
        )

        started = time.monotonic()
        status, payload = await k8s.request(
            "PATCH",
            k8s.custom_path("skills", ns, "skill-0000"),
            {"spec": {"instructions": "# Skill 0\n\nEdited.\n"}},
            content_type="application/merge-patch+json",
        )
        if status >= 300:
            raise RuntimeError(f"editing skill-0000: {status} {payload}")

        async def all_reversioned() -> bool:
            items = await list_custom("agents", ns)
            moved = sum(
                1
                for a in items
                if (a.get("status") or {}).get("version")
                != agents_before.get(a["metadata"]["name"])
            )
            return moved >= len(hot)

        async def skill_rerendered() -> bool:
            skill = await k8s.get_custom("skills", ns, "skill-0000")
            return ((skill or {}).get("status") or {}).get("contentHash") != old_hash

        await wait_until(skill_rerendered, 60, 0.02, "the edited skill re-rendered")
        rendered_after = time.monotonic() - started
        await wait_until(all_reversioned, 60, 0.1, "every agent re-versioned")
        result["editOneSkill"] = {
            "agents": len(hot),
            "seconds": round(time.monotonic() - started, 2),
            "skillRenderedSeconds": round(rendered_after, 2),
        }

        # --- restart: time to the first reconcile, and no writes to what is unchanged ---
        stop(proc)
        port = free_port()
        restarted = time.monotonic()
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "swarmkit_operator",
                    "--metrics-port",
                    str(port),
                    "--liveness",
                    f"http://127.0.0.1:{live}/healthz",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        probe = dict(docs[0], metadata={"name": "after-restart"})
        await k8s.create_custom("skills", ns, probe)

        async def probe_ready() -> bool:
            skill = await k8s.get_custom("skills", ns, "after-restart")
            conds = ((skill or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        await wait_until(probe_ready, 120, 0.1, "a skill created after a restart to be Ready")
        first = time.monotonic() - restarted
        await asyncio.sleep(2)
        text = scrape(port)
        rewrites = sum(v for k, v in writes_by_resource(text).items() if "status" in k)
        result["restart"] = {
            "firstReconcileSeconds": round(first, 2),
            "statusWritesAfterRestart": rewrites,
            "objects": total + 1,
        }
        result["reconciles"] = {
            f"{k} {o}": int(metric_sum(text, "swarmkit_reconcile_total", {"kind": k, "outcome": o}))
            for k in ("Workspace", "Skill", "Agent", "Topology", "GC")
            for o in ("changed", "unchanged", "deferred", "gone", "error")
            if metric_sum(text, "swarmkit_reconcile_total", {"kind": k, "outcome": o})
        }
        # --- the floor: the same writes by a bare client (with the operator stopped) ---
        stop(proc)
        result["floor"] = await floor_writes(ns, floor_ns, docs, op_writes)
        floor = result["floor"]["seconds"]
        result["xFloor"] = round(ready_time / floor, 2) if floor else None
    finally:
        stop(proc)
        for name in (ns, floor_ns):
            await delete_namespace(name)
        await k8s.close_connections()
        k8s.shutdown()
    return result


async def floor_writes(
    source_ns: str,
    floor_ns: str,
    docs: list[dict[str, Any]],
    op_writes: dict[str, int],
    new_namespace: bool = True,
) -> dict[str, Any]:
    """The floor: a bare 16-way client doing the operator's writes into ``floor_ns``.

    The same creates as ``docs`` (plus the Workspace), the rendered ConfigMaps the operator
    made in ``source_ns`` (padded to its count of ConfigMap creates), its number of status
    patches (with the statuses it wrote) and of Events. Returns seconds and writes.
    """
    objects = {
        plural: {o["metadata"]["name"]: o for o in await list_custom(plural, source_ns)}
        for plural in PLURALS.values()
    }
    rendered = [
        c
        for c in await list_config_maps(source_ns)
        if (c["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by")
    ]
    if new_namespace:
        await create_namespace(floor_ns)
    n_status = sum(v for k, v in op_writes.items() if k.startswith("PATCH"))
    n_cms = sum(v for k, v in op_writes.items() if k == "POST configmaps")
    n_events = sum(v for k, v in op_writes.items() if k == "POST events")
    floor_docs = [WORKSPACE, *docs]
    skill_names = [d["metadata"]["name"] for d in docs if d["kind"] == "Skill"] or ["x"]
    status_targets = [(PLURALS[d["kind"]], d["metadata"]["name"]) for d in floor_docs]
    cm_bodies = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": c["metadata"]["name"],
                "namespace": floor_ns,
                "labels": c["metadata"].get("labels") or {},
            },
            "immutable": True,
            "data": c.get("data") or {},
        }
        for c in rendered
    ]
    while len(cm_bodies) < n_cms and cm_bodies:
        extra = json.loads(json.dumps(cm_bodies[len(cm_bodies) % len(rendered)]))
        extra["metadata"]["name"] += f"-{len(cm_bodies)}"
        cm_bodies.append(extra)

    def status_of(plural: str, name: str) -> dict[str, Any]:
        return dict((objects[plural].get(name) or {}).get("status") or {})

    # One chain per object (create it, its rendered ConfigMap, its status patches),
    # all chains and the Events through one 16-way pool: the tightest same-writes floor.
    per_object_patches = [0] * len(status_targets)
    for i in range(n_status):
        per_object_patches[i % len(status_targets)] += 1
    cm_for = dict(enumerate(cm_bodies[:n_cms]))

    def chain(i: int) -> Callable[[], Awaitable[None]]:
        doc = floor_docs[i]
        plural, name = status_targets[i]

        async def run() -> None:
            await k8s.create_custom(plural, floor_ns, doc)
            if i in cm_for:
                await k8s.create_config_map(cm_for[i])
            for _ in range(per_object_patches[i]):
                await k8s.patch_status(plural, floor_ns, name, status_of(plural, name))

        return run

    def event(i: int) -> Callable[[], Awaitable[None]]:
        involved = {
            "apiVersion": GROUP_VERSION,
            "kind": "Skill",
            "namespace": floor_ns,
            "name": skill_names[i % len(skill_names)],
            "uid": "",
        }
        return lambda: k8s.post_event(involved, "Normal", "Rendered", "Ready is True")

    extra_cms = [cm_creator(b) for b in cm_bodies[len(floor_docs) : n_cms]]
    started = time.monotonic()
    floor_jobs: list[Callable[[], Awaitable[Any]]] = [chain(i) for i in range(len(floor_docs))]
    floor_jobs += [event(i) for i in range(n_events)]
    floor_jobs += extra_cms
    await bounded(floor_jobs)
    return {
        "seconds": round(time.monotonic() - started, 2),
        "writes": len(floor_docs) + n_cms + n_status + n_events,
    }


async def floor_fanout(source_ns: str, floor_ns: str, agents: list[str]) -> dict[str, Any]:
    """The fan-out's floor: a bare 16-way client doing its minimum writes in ``floor_ns``
    (whose objects :func:`floor_writes` created): for each of ``agents`` its new rendered
    ConfigMap (a copy of the one it has in ``source_ns``) and a status patch that changes
    its ``version``, then one status patch per Topology. Returns seconds and writes, and the
    seconds of the absolute minimum (``minimumSeconds``): one status patch per agent."""
    by_name = {c["metadata"]["name"]: c for c in await list_config_maps(source_ns)}
    rendered = {
        a["metadata"]["name"]: by_name.get((a.get("status") or {}).get("renderedConfigMap", ""))
        for a in await list_custom("agents", source_ns)
    }
    topologies = [t["metadata"]["name"] for t in await list_custom("topologies", floor_ns)]

    def agent_writes(name: str) -> Callable[[], Awaitable[None]]:
        cm = rendered.get(name) or {"data": {}}

        async def run() -> None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{name}-fanout", "namespace": floor_ns},
                "immutable": True,
                "data": cm.get("data") or {},
            }
            await k8s.create_config_map(body)
            await k8s.patch_status("agents", floor_ns, name, {"version": f"{name}-fanout"})

        return run

    def topology_write(name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            await k8s.patch_status("topologies", floor_ns, name, {"version": f"{name}-fanout"})

        return run

    def status_only(name: str) -> Callable[[], Awaitable[None]]:
        return lambda: k8s.patch_status("agents", floor_ns, name, {"version": f"{name}-min"})

    started = time.monotonic()
    await bounded([agent_writes(a) for a in agents])
    await bounded([topology_write(t) for t in topologies])
    seconds = round(time.monotonic() - started, 2)
    # The least any design can write when every granting agent's version must change and
    # only those agents are touched: one status patch each, nothing else.
    started = time.monotonic()
    await bounded([status_only(a) for a in agents])
    return {
        "seconds": seconds,
        "writes": 2 * len(agents) + len(topologies),
        "minimumSeconds": round(time.monotonic() - started, 2),
        "minimumWrites": len(agents),
    }


def report(r: dict[str, Any]) -> str:
    o = r["objects"]
    ready = r["ready"]
    lines = [
        f"reconcile benchmark: {o['Skill']} skills, {o['Agent']} agents, "
        f"{o['Topology']} topologies, 1 workspace",
        f"  apply (16-way client)         {r['apply']['seconds']:7.2f} s  "
        f"({r['apply']['writes']} creates)",
        f"  all Ready                     {ready['seconds']:7.2f} s  "
        f"(operator writes: {ready['operatorWrites']} = "
        + ", ".join(f"{v} {k}" for k, v in sorted(ready["operatorWritesBy"].items()))
        + ")",
        f"  floor: same {r['floor']['writes']} writes, bare client "
        f"{r['floor']['seconds']:7.2f} s  -> operator at {r['xFloor']}x the floor (target <= 2x)",
        f"  operator RSS                  {r['rssMB']:7.1f} MB (peak {r['peakRssMB']} MB; "
        "target < 300 MB)",
        f"  operator CPU until all Ready  {r['operatorCpuSeconds']:7.2f} s",
        f"  restart with {r['restart']['objects']} objects: first reconcile after "
        f"{r['restart']['firstReconcileSeconds']:.2f} s, "
        f"{r['restart']['statusWritesAfterRestart']} status write(s) (1 = the new skill)",
        f"  edit 1 skill granted by {r['editOneSkill']['agents']} agents: all re-versioned in "
        f"{r['editOneSkill']['seconds']:.2f} s (target < 3 s; the skill itself re-rendered "
        f"after {r['editOneSkill']['skillRenderedSeconds']:.2f} s)",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=1000)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--grants", type=int, default=10)
    parser.add_argument("--topologies", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", action="store_true", help="print the raw numbers as JSON")
    args = parser.parse_args()
    with session_cluster() as cluster:
        apply_crds(cluster)
        result = asyncio.run(bench(args, cluster.kubeconfig))
    print(json.dumps(result, indent=1) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
