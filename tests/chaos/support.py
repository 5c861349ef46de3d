"""Shared pieces of the reliability suite: sizes, the operator with metrics, manifests with the
outcome their input deserves, and the invariant checks run after every fault.

Sizes: ``SWARMKIT_CHAOS=full`` (set by ``make chaos``) selects the full sizes of the issue
(500 objects, 50 Runs, 5 kills, 2,000 bad-input cases, ...); unset, the reduced sizes keep
``make test`` within a few minutes. Every random choice comes from ``random.Random(SEED)``
(``SWARMKIT_CHAOS_SEED``, default 11), so a failure replays with the same seed.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarmkit_devcluster.testing import Kube, wait_for
from tests.support import planted

from ..integration.runs_support import GROUP, PLURALS, VERSION, OperatorProcess

FULL = os.environ.get("SWARMKIT_CHAOS", "") == "full"
SEED = int(os.environ.get("SWARMKIT_CHAOS_SEED", "11"))
API = f"{GROUP}/{VERSION}"
MAX_CONTENT_CHARS = 65536

#: Every figure the suite reports (convergence times, cases tried, faults survived) goes
#: here too, so ``make chaos`` can print and keep them (``SWARMKIT_CHAOS_REPORT``).
FIGURES: dict[str, Any] = {}


@dataclass
class Ledger:
    """What the secrets scan (the suite's last module) must look at."""

    secrets: set[str] = field(default_factory=set)
    cluster_secrets: set[str] = field(default_factory=set)  # those stored as Secrets
    namespaces: list[str] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # runner stdout of runner-level tests
    #: The Jaeger every chaos Workspace traces to (content captured, uncapped): the scan
    #: reads every span it received.
    jaeger: Any = None


LEDGER = Ledger()


def make_secret(kube: Kube, namespace: str, name: str = "chaos-keys") -> str:
    """A Secret with a fresh random value (never read by the replay agents: the planted
    kind of tests/support/planted.py), remembered for the final scan."""
    value = planted.never_read()
    kube.core.create_namespaced_secret(
        namespace, {"metadata": {"name": name}, "stringData": {"token": value}}
    )
    LEDGER.secrets.add(value)
    LEDGER.cluster_secrets.add(value)
    return value


def size(reduced: int, full: int) -> int:
    return full if FULL else reduced


def rng(salt: str) -> random.Random:
    return random.Random(f"{SEED}:{salt}")


def record(key: str, value: Any) -> None:
    FIGURES[key] = value
    # The machine is shared: the 1/5/15-minute load when each figure was taken says how
    # much of a wall-clock time was waiting for a core (the docs print it beside them).
    FIGURES.setdefault("loadavg", {})[key] = [round(x, 2) for x in os.getloadavg()]
    print(f"[chaos] {key}: {json.dumps(value)}")
    path = os.environ.get("SWARMKIT_CHAOS_REPORT")
    if path:
        Path(path).write_text(json.dumps({"seed": SEED, "full": FULL, **FIGURES}, indent=1))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChaosOperator(OperatorProcess):
    """The operator process (``python -m swarmkit_operator``) with its metrics port open."""

    def __init__(
        self,
        kubeconfig: Path,
        config: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.metrics_port = free_port()
        super().__init__(
            kubeconfig,
            config,
            env={
                "SWARMKIT_METRICS_PORT": str(self.metrics_port),
                "SWARMKIT_GC_GRACE_SECONDS": "1",
                "SWARMKIT_LOG_FORMAT": "plain",
                **(env or {}),
            },
        )

    def start(self) -> None:
        super().start()
        if self.log_path not in LEDGER.logs:
            LEDGER.logs.append(self.log_path)

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())

    def api_requests(self) -> dict[str, float]:
        """``swarmkit_api_requests_total`` by label set (this process only)."""
        out = {}
        for line in self.metrics().splitlines():
            if line.startswith("swarmkit_api_requests_total{"):
                labels, value = line.rsplit(" ", 1)
                out[labels.removeprefix("swarmkit_api_requests_total")] = float(value)
        return out

    def request_rate(self, seconds: float) -> tuple[float, dict[str, float]]:
        """API requests per second over the next ``seconds``, and the requests by label.

        The leader election's Lease renewals (a GET and a PUT per retry period) are a
        heartbeat, not work: they are left out."""
        before = self.api_requests()
        time.sleep(seconds)
        after = self.api_requests()
        delta = {
            k: v - before.get(k, 0.0)
            for k, v in after.items()
            if v - before.get(k, 0.0) and 'resource="leases"' not in k
        }
        return sum(delta.values()) / seconds, delta

    def crashes(self) -> list[str]:
        """Log lines of unhandled errors: a traceback the operator did not turn into status."""
        return [
            line
            for line in self.log().splitlines()
            if "Traceback (most recent call last)" in line or "Unhandled" in line
        ]


# --- manifests ---------------------------------------------------------------------------


def obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def workspace(secret: str | None = None) -> dict[str, Any]:
    providers: list[dict[str, Any]] = [{"name": "replay", "type": "replay"}]
    if secret:
        # Referenced, never used by the replay agents: the Job still gets it as env.
        providers.append(
            {
                "name": "vault",
                "type": "openai",
                "baseUrl": "http://127.0.0.1:9/v1",
                "defaultModel": "m",
                "apiKey": {"name": secret, "key": "token"},
            }
        )
    spec: dict[str, Any] = {
        "modelProviders": providers,
        "runtime": {"jobTtlSecondsAfterFinished": 3600, "defaultTimeoutSeconds": 120},
    }
    if LEDGER.jaeger is not None:
        # Traced with content on at the largest cap: the most a span could ever carry.
        spec["tracing"] = {
            "endpoint": LEDGER.jaeger.otlp_http_endpoint,
            "captureContent": True,
            "maxContentChars": MAX_CONTENT_CHARS,
        }
    return obj("Workspace", "default", spec)


def skill(name: str, text: str = "") -> dict[str, Any]:
    return obj(
        "Skill",
        name,
        {
            "description": f"Use when {name} comes up.",
            "category": "capability",
            "instructions": f"# {name}\n\n{text or 'Do step one, then step two.'}\n",
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    )


def agent(name: str, skills: list[str], answer: str = "") -> dict[str, Any]:
    return obj(
        "Agent",
        name,
        {
            "workspaceRef": {"name": "default"},
            "model": {"provider": "replay"},
            "systemPrompt": f"You are {name}.",
            "skills": skills,
            "replay": [{"text": answer or f"done by {name}"}],
        },
    )


def topology(name: str, members: list[str]) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [
        {"name": "root", "agentRef": {"name": members[0]}, "role": "root"}
    ]
    nodes += [
        {"name": f"w{i}", "agentRef": {"name": m}, "role": "worker", "parent": "root"}
        for i, m in enumerate(members[1:])
    ]
    return obj("Topology", name, {"workspaceRef": {"name": "default"}, "agents": nodes})


def run(name: str, agent_name: str) -> dict[str, Any]:
    return obj(
        "Run", name, {"agentRef": {"name": agent_name}, "input": "go", "timeoutSeconds": 120}
    )


@dataclass(frozen=True)
class Expect:
    """The condition an object's input deserves once everything converged."""

    type: str
    status: str
    reason: str | None = None


READY = Expect("Ready", "True")


@dataclass
class World:
    """A generated set of objects and what each one deserves."""

    docs: list[dict[str, Any]] = field(default_factory=list)
    expect: dict[tuple[str, str], list[Expect]] = field(default_factory=dict)
    run_output: dict[str, str] = field(default_factory=dict)

    def add(self, doc: dict[str, Any], *expect: Expect) -> None:
        self.docs.append(doc)
        self.expect[(doc["kind"], doc["metadata"]["name"])] = list(expect or (READY,))


def world(objects: int, runs: int, seed_salt: str) -> World:
    """``objects`` Skills/Agents/Topologies (6:3:1) with a few deliberately broken ones,
    plus ``runs`` Runs of single agents. The order is shuffled (seeded): dependents often
    arrive before what they depend on."""
    r = rng(seed_salt)
    w = World()
    n_skills = max(4, objects * 6 // 10)
    n_agents = max(3, objects * 3 // 10)
    n_topos = max(1, objects - n_skills - n_agents)
    skills = [f"s-{i:04d}" for i in range(n_skills)]
    for s in skills:
        w.add(skill(s))
    for a in range(n_agents):
        name = f"a-{a:04d}"
        grants = r.sample(skills, k=min(len(skills), r.randint(1, 5)))
        if a % 17 == 5:  # a grant that never appears: Ready, but SkillsResolved=False
            w.add(
                agent(name, [*grants, "never-there"]),
                READY,
                Expect("SkillsResolved", "False", "SkillNotFound"),
            )
        else:
            w.add(agent(name, grants))
    agents = [f"a-{a:04d}" for a in range(n_agents)]
    for t in range(n_topos):
        name = f"t-{t:03d}"
        if t % 7 == 3:  # two topologies calling each other through agent skills: a cycle
            twin = f"{name}-twin"
            for me, other in ((name, twin), (twin, name)):
                w.add(
                    obj(
                        "Skill",
                        f"call-{other}",
                        {
                            "description": f"Use to hand work to {other}.",
                            "category": "capability",
                            "implementation": {"type": "agent", "topology": other},
                            "provenance": {"authoredBy": "human", "version": "1.0.0"},
                        },
                    )
                )
                w.add(agent(f"caller-{me}", [f"call-{other}"]))
                w.add(topology(me, [f"caller-{me}"]), Expect("Accepted", "False", "Cycle"))
        else:
            w.add(topology(name, r.sample(agents, k=min(len(agents), r.randint(1, 4)))))
    for i in range(runs):
        target = agents[r.randrange(len(agents))]
        doc = run(f"r-{i:03d}", target)
        w.docs.append(doc)
        w.run_output[doc["metadata"]["name"]] = f"done by {target}"
    r.shuffle(w.docs)
    return w


# --- API helpers ---------------------------------------------------------------------------


def create(kube: Kube, namespace: str, doc: dict[str, Any]) -> None:
    from kubernetes.client.exceptions import ApiException

    body = json.loads(json.dumps(doc))
    body["metadata"]["namespace"] = namespace
    try:
        kube.custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[doc["kind"]], body
        )
    except ApiException as exc:
        if exc.status != 409:
            raise


def list_kind(kube: Kube, namespace: str, kind: str) -> list[dict[str, Any]]:
    items = kube.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURALS[kind])
    return list(items["items"])


def condition(o: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (o.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return None


def holds(o: dict[str, Any], e: Expect) -> bool:
    c = condition(o, e.type)
    gen = o["metadata"].get("generation")
    return (
        c is not None
        and c["status"] == e.status
        and (e.reason is None or c.get("reason") == e.reason)
        and c.get("observedGeneration") == gen
    )


def unmet(kube: Kube, namespace: str, w: World) -> list[str]:
    """What is not (yet) as the input deserves: objects' conditions and Runs' outcomes."""
    problems = []
    live: dict[tuple[str, str], dict[str, Any]] = {}
    for kind in ("Workspace", "Skill", "Agent", "Topology", "Run"):
        for o in list_kind(kube, namespace, kind):
            live[(kind, o["metadata"]["name"])] = o
    for key, expects in w.expect.items():
        o = live.get(key)
        if o is None:
            problems.append(f"{key}: missing")
            continue
        for e in expects:
            if not holds(o, e):
                problems.append(f"{key}: want {e}, have {condition(o, e.type)}")
    for name, output in w.run_output.items():
        o = live.get(("Run", name))
        c = condition(o or {}, "Succeeded")
        if c is None or c["status"] != "True":
            problems.append(f"Run {name}: {c}")
        elif (o or {}).get("status", {}).get("output") != output:
            have = (o or {}).get("status", {}).get("output")
            problems.append(f"Run {name}: output {have!r} ({c.get('message')})")
    return problems


def converge(kube: Kube, namespace: str, w: World, timeout: float) -> float:
    """Wait until everything is as its input deserves; return the seconds it took."""
    start = time.monotonic()
    last: list[list[str]] = [[]]

    def done() -> bool:
        last[0] = unmet(kube, namespace, w)
        return not last[0]

    wait_for(
        done,
        timeout,
        interval=1.0,
        message=lambda: f"{len(last[0])} not converged: " + "\n".join(last[0][:30]),
    )
    return time.monotonic() - start


def leftovers(kube: Kube, namespace: str) -> list[str]:
    """Orphaned or duplicated ConfigMaps, Jobs, pods and finalizers (empty when clean).

    * every rendered ConfigMap is some object's current render, a render an Agent resolves,
      or pinned by an unfinished Run;
    * every Run bundle ConfigMap and every Job belongs to a live Run; a Run has exactly
      ``1 + jobRecreations`` Jobs, named after it, and one pod per Job;
    * no pod keeps the ``swarmkit.dev/run-outcome`` finalizer once its Run finished;
    * no swarmkit object carries a finalizer (the operator never adds one).
    """
    problems: list[str] = []
    objects = {
        kind: list_kind(kube, namespace, kind)
        for kind in ("Workspace", "Skill", "Agent", "Topology", "Run")
    }
    keep: set[str] = set()
    for kind, items in objects.items():
        for o in items:
            if o["metadata"].get("finalizers"):
                problems.append(f"{kind} {o['metadata']['name']}: finalizers {o['metadata']}")
            st = o.get("status") or {}
            keep.add(str(st.get("renderedConfigMap") or ""))
            keep.update(
                str(r.get("renderedConfigMap") or "") for r in st.get("resolvedSkills") or ()
            )
    runs = {r["metadata"]["uid"]: r for r in objects["Run"]}
    cms = kube.core.list_namespaced_config_map(namespace).items
    for cm in cms:
        labels = cm.metadata.labels or {}
        if labels.get("swarmkit.dev/run"):
            owners = [o.uid for o in cm.metadata.owner_references or ()]
            if not any(u in runs for u in owners):
                problems.append(f"bundle ConfigMap {cm.metadata.name} has no live Run")
            if labels.get("swarmkit.dev/run-finished") != "true":
                keep.update(
                    p.strip()
                    for p in (cm.metadata.annotations or {})
                    .get("swarmkit.dev/pinned-configmaps", "")
                    .split(",")
                )
    for cm in cms:
        labels = cm.metadata.labels or {}
        if labels.get("swarmkit.dev/component") and cm.metadata.name not in keep:
            problems.append(f"orphaned rendered ConfigMap {cm.metadata.name}")
    jobs = kube.batch.list_namespaced_job(namespace).items
    per_run: dict[str, list[str]] = {}
    for j in jobs:
        owners = [o.uid for o in j.metadata.owner_references or ()]
        owner = next((u for u in owners if u in runs), None)
        if owner is None:
            problems.append(f"Job {j.metadata.name} has no live Run")
            continue
        per_run.setdefault(owner, []).append(j.metadata.name)
    for uid, r in runs.items():
        name = r["metadata"]["name"]
        st = r.get("status") or {}
        names = per_run.get(uid, [])
        want = 1 + int(st.get("jobRecreations") or 0)
        if len(names) != want:
            problems.append(f"Run {name}: {len(names)} Jobs {names}, want {want}")
        if any(not re.fullmatch(rf"run-{re.escape(name)}-[a-z0-9]{{5}}(-r\d+)?", n) for n in names):
            problems.append(f"Run {name}: Job names {names}")
    pods = kube.core.list_namespaced_pod(namespace).items
    per_job: dict[str, int] = {}
    for p in pods:
        job = (p.metadata.labels or {}).get("job-name", "")
        per_job[job] = per_job.get(job, 0) + 1
        if "swarmkit.dev/run-outcome" in (p.metadata.finalizers or []):
            problems.append(f"pod {p.metadata.name} still has the run-outcome finalizer")
    problems += [f"Job {j}: {n} pods" for j, n in per_job.items() if n != 1]
    return problems


def wait_clean(kube: Kube, namespace: str, timeout: float = 60) -> None:
    last: list[list[str]] = [[]]

    def clean() -> bool:
        last[0] = leftovers(kube, namespace)
        return not last[0]

    wait_for(clean, timeout, interval=1.0, message=lambda: "\n".join(last[0][:30]))


def apply_all(kube: Kube, namespace: str, docs: Iterable[dict[str, Any]]) -> None:
    for d in docs:
        create(kube, namespace, d)
