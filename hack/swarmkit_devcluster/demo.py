"""``make demo``: the examples applied to the local cluster, one Run, its conditions and output.

Called by ``python -m swarmkit_devcluster demo`` after ``make operator-up`` (cluster up, CRDs
installed, operator running). Steps, each shown as it happens:

1. ``kubectl apply`` every example except the Run (Workspace, Skills, Agents, Topology) into
   the ``default`` namespace (``--namespace`` to change) and wait until the Topology is Ready.
2. Model: the examples use the runner's ``replay`` provider (the scripted turns in each Agent's
   ``spec.replay``), so no API key is needed. With ``ANTHROPIC_API_KEY`` set (model
   ``$ANTHROPIC_MODEL``, default ``claude-sonnet-4-5``), or an OpenAI-compatible
   ``OPENAI_BASE_URL`` (key ``$OPENAI_API_KEY`` if set, model ``$OPENAI_MODEL``, default
   ``gpt-4o-mini``), the key goes into the Secret ``swarmkit-demo-model`` and the Workspace gets
   a provider the Agents then use instead (the key is referenced, never copied or printed).
3. ``kubectl create`` the example Run under a fresh name (``review-demo-<time>``), follow its
   ``Succeeded`` condition (Pending → Running → Succeeded/Failed), then print ``kubectl get
   runs`` and the Run's conditions and output as a user would see them.
4. Wait until the skill library rolled the Run up into the Skills' status (usage, load
   rate), print it, and end with the URL of the operator's read-only web view.

The cluster stays up; the last lines say how to use kubectl against it and how to stop it.
``make demo`` asks for the real node as root (``REAL_NODE=0``: the process node). With it, the
demo namespace is annotated so that its pods (the Run's) run there, in the runtime image under
containerd + runc; the Run's lines name the node and the image.
"""

from __future__ import annotations

import base64
import copy
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import yaml

from swarmkit_devcluster.cluster import ClusterError, LocalCluster
from swarmkit_devcluster.kubeapi import ApiError, KubeClient
from swarmkit_devcluster.paths import repo_root

GV = "swarmkit.dev/v1alpha1"
SECRET = "swarmkit-demo-model"
SECRET_KEY = "api-key"


def _custom(ns: str, plural: str, name: str | None = None) -> str:
    base = f"/apis/swarmkit.dev/v1alpha1/namespaces/{ns}/{plural}"
    return f"{base}/{name}" if name else base


def _condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return None


def load_examples(directory: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def model_override(environ: dict[str, str] | os._Environ[str]) -> tuple[dict[str, Any], str] | None:
    """The provider to add for a real model, and the API key to store, from the environment."""
    if environ.get("ANTHROPIC_API_KEY"):
        provider = {
            "name": "claude",
            "type": "anthropic",
            "apiKey": {"name": SECRET, "key": SECRET_KEY},
            "defaultModel": environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5"),
        }
        if environ.get("ANTHROPIC_BASE_URL"):
            provider["baseUrl"] = environ["ANTHROPIC_BASE_URL"]
        return provider, environ["ANTHROPIC_API_KEY"]
    if environ.get("OPENAI_BASE_URL"):
        provider = {
            "name": "openai",
            "type": "openai",
            "baseUrl": environ["OPENAI_BASE_URL"],
            "defaultModel": environ.get("OPENAI_MODEL", "gpt-4o-mini"),
        }
        key = environ.get("OPENAI_API_KEY", "")
        if key:
            provider["apiKey"] = {"name": SECRET, "key": SECRET_KEY}
        return provider, key
    return None


def with_model(docs: list[dict[str, Any]], provider: dict[str, Any]) -> list[dict[str, Any]]:
    """The examples with ``provider`` added to the Workspace and used by every Agent."""
    out = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        if doc["kind"] == "Workspace":
            doc["spec"]["modelProviders"] = [provider, *doc["spec"].get("modelProviders", [])]
        if doc["kind"] == "Agent":
            doc["spec"]["model"] = {**doc["spec"].get("model", {}), "provider": provider["name"]}
        out.append(doc)
    return out


class Demo:
    def __init__(self, cluster: LocalCluster, namespace: str, out: TextIO) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.out = out
        self.client: KubeClient = cluster.client()
        self.t0 = time.monotonic()

    def say(self, msg: str) -> None:
        print(msg, file=self.out, flush=True)

    def step(self, msg: str) -> None:
        self.say(f"\n==> {msg}")

    def kubectl(self, *args: str, input: str | None = None) -> str:
        res = self.cluster.kubectl(*args, input=input)
        return res.stdout

    def wait(
        self, what: str, probe: Callable[[], tuple[bool, str]], timeout: float, every: float = 0.5
    ) -> str:
        """Poll ``probe`` (done, status line); print each new status line with the elapsed time."""
        start = time.monotonic()
        last = ""
        while True:
            try:
                done, line = probe()
            except ApiError as exc:
                done, line = False, f"({exc.status} {exc.reason})"
            if line != last:
                self.say(f"   [{time.monotonic() - start:5.1f}s] {what}: {line}")
                last = line
            if done:
                return line
            if time.monotonic() - start > timeout:
                raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what} ({line})")
            time.sleep(every)

    def ensure_namespace(self) -> None:
        try:
            self.client.get(f"/api/v1/namespaces/{self.ns}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            self.client.create("/api/v1/namespaces", {"metadata": {"name": self.ns}})
        if self.cluster.state.get("real_node"):
            from swarmkit_devcluster.realnode import NODE_NAME, namespace_annotations

            meta = {"metadata": {"annotations": namespace_annotations()}}
            self.client.merge_patch(f"/api/v1/namespaces/{self.ns}", meta)
            self.step(f"real node: the Run's pod goes to {NODE_NAME} (containerd + runc)")
        elif os.environ.get("REAL_NODE") == "1":
            # `make demo` asked for the real node, but the cluster was already up without it
            # (a plain `make cluster-up` before): say so rather than pretend.
            self.step(
                "process node: the cluster was started without the real node; "
                "`make cluster-down` then `make demo` runs the Run on it"
            )

    def store_key(self, key: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": self.ns},
            "type": "Opaque",
            "data": {SECRET_KEY: base64.b64encode(key.encode()).decode()},
        }
        path = f"/api/v1/namespaces/{self.ns}/secrets"
        try:
            self.client.create(path, body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            self.client.replace(f"{path}/{SECRET}", body)

    def topology_ready(self, name: str) -> tuple[bool, str]:
        topo = self.client.get(_custom(self.ns, "topologies", name))
        cond = _condition(topo, "Ready")
        if cond is None:
            return False, "not reconciled yet"
        line = f"Ready={cond['status']} ({cond.get('reason', '')})"
        if cond["status"] != "True" and cond.get("message"):
            line += f": {cond['message']}"
        return cond["status"] == "True", line

    def run_progress(self, name: str) -> tuple[bool, str]:
        run = self.client.get(_custom(self.ns, "runs", name))
        cond = _condition(run, "Succeeded")
        if cond is None:
            return False, "created, not picked up yet"
        line = f"Succeeded={cond['status']} {cond.get('reason', '')}: {cond.get('message', '')}"
        return cond["status"] in ("True", "False"), line

    def skill_usage(self, name: str) -> tuple[bool, str]:
        skill = self.client.get(_custom(self.ns, "skills", name))
        usage = (skill.get("status") or {}).get("usage") or {}
        loaded = int(usage.get("runsLoaded") or 0)
        line = f"runs {usage.get('runsGranted', 0)}, loaded in {loaded}"
        if usage.get("loadRate") is not None:
            line += f", load rate {float(usage['loadRate']):.0%}"
        return loaded > 0, line

    def run(self, timeout: float) -> int:
        examples_dir = repo_root() / "examples"
        docs = load_examples(examples_dir)
        runs = [d for d in docs if d["kind"] == "Run"]
        # An EvalRun starts Runs of its own: the demo runs one Run, and shows no evaluation.
        config = [d for d in docs if d["kind"] not in ("Run", "EvalRun")]
        if not runs:
            raise ClusterError(f"no Run in {examples_dir}")
        topologies = [d["metadata"]["name"] for d in config if d["kind"] == "Topology"]

        state = "running" if self.cluster.operator_running() else "NOT running"
        self.step(f"cluster {self.cluster.server}; operator {state}")
        if not self.cluster.operator_running():
            self.say("   starting the operator (make operator-up) ...")
            self.cluster.start_operator()
        self.ensure_namespace()

        override = model_override(os.environ)
        if override is not None:
            provider, key = override
            self.step(
                f"using a real model: provider {provider['name']} ({provider['type']}, "
                f"model {provider['defaultModel']})"
            )
            if key:
                self.store_key(key)
                self.say(
                    f"   API key stored in Secret {self.ns}/{SECRET} (referenced, never copied)"
                )
            config = with_model(config, provider)
        else:
            self.step(
                "model: the runner's built-in replay provider (scripted turns; no API key needed)"
            )
            self.say(
                "   set ANTHROPIC_API_KEY, or OPENAI_BASE_URL (+ OPENAI_API_KEY), "
                "to use a real model"
            )

        jaeger = dict(self.cluster.state.get("jaeger") or {})
        if jaeger.get("otlp"):  # TRACING=1: the Workspace's Runs send their traces there
            self.step(f"tracing: the Workspace's Runs export to Jaeger at {jaeger['otlp']}")
            for doc in config:
                if doc["kind"] == "Workspace":
                    doc.setdefault("spec", {})["tracing"] = {"endpoint": jaeger["otlp"]}
        self.step(f"kubectl apply -f examples/ (everything but the Run) -n {self.ns}")
        manifest = yaml.safe_dump_all(config, sort_keys=False)
        for line in self.kubectl("apply", "-n", self.ns, "-f", "-", input=manifest).splitlines():
            self.say(f"   {line}")
        for name in topologies:
            self.wait(f"topology/{name}", lambda n=name: self.topology_ready(n), timeout)  # type: ignore[misc]

        run_doc = copy.deepcopy(runs[0])
        base = run_doc["metadata"]["name"]
        name = f"{base}-{time.strftime('%H%M%S')}"
        run_doc["metadata"] = {"name": name}
        self.step(f"kubectl create run {name} (spec from examples/40-run.yaml)")
        for line in self.kubectl(
            "create", "-n", self.ns, "-f", "-", input=yaml.safe_dump(run_doc)
        ).splitlines():
            self.say(f"   {line}")
        final = self.wait(f"run/{name}", lambda: self.run_progress(name), timeout)

        self.step(f"kubectl get runs -n {self.ns}")
        for line in self.kubectl("get", "runs", "-n", self.ns).splitlines():
            self.say(f"   {line}")
        run = self.client.get(_custom(self.ns, "runs", name))
        status = run.get("status") or {}
        self.step(f"run {name}")
        for cond in status.get("conditions") or ():
            self.say(
                f"   condition {cond['type']}={cond['status']}  reason={cond.get('reason')}  "
                f"message={cond.get('message', '')!r}"
            )
        for key in ("jobName", "podName", "startTime", "completionTime", "bundleConfigMap"):
            if status.get(key):
                self.say(f"   {key}: {status[key]}")
        if status.get("podName"):
            pod = self.client.get(f"/api/v1/namespaces/{self.ns}/pods/{status['podName']}")
            image = pod["spec"]["containers"][0]["image"]
            self.say(f"   pod ran on node {pod['spec'].get('nodeName')}, image {image}")
        pinned = status.get("pinned") or {}
        if pinned:
            agents = ", ".join(f"{a}@{v}" for a, v in sorted((pinned.get("agents") or {}).items()))
            skills = len(pinned.get("skills") or {})
            self.say(
                f"   pinned: topology {pinned.get('topology')}; agents {agents}; {skills} skill(s)"
            )
        usage = status.get("usage") or {}
        self.say(
            f"   steps {status.get('steps', 0)}, tool calls {status.get('toolCalls', 0)}, tokens "
            f"{usage.get('inputTokens', 0)} in / {usage.get('outputTokens', 0)} out"
        )
        for agent in status.get("skills") or ():
            files = ", ".join(f"{f['skill']}/{f['path']}" for f in agent.get("filesRead") or ())
            self.say(
                f"   skills used by {agent['agent']}: loaded {', '.join(agent['loaded']) or '-'}"
                f"; files read {files or '-'}"
            )

        if jaeger.get("query") and status.get("traceId"):
            self.say(f"   trace: {status['traceId']}")
            self.say(f"   trace (Jaeger API): {jaeger['query']}/api/traces/{status['traceId']}")
            self.say(f"   trace (Jaeger UI):  {jaeger['query']}/trace/{status['traceId']}")
        self.step("output")
        output = status.get("output") or "(none)"
        for line in output.splitlines() or [output]:
            self.say(f"   {line}")
        if status.get("outputTruncated"):
            self.say("   (truncated)")

        loaded = sorted({s for a in status.get("skills") or () for s in a.get("loaded") or ()})
        if loaded:
            self.step("skill library: usage rolled up into each Skill's status")
            self.wait(
                f"skill/{loaded[0]} usage",
                lambda: self.skill_usage(loaded[0]),
                timeout,
            )
            for line in self.kubectl(
                "get", "skills", "-n", self.ns, "-o",
                "custom-columns=SKILL:.metadata.name,GRANTED-BY:.status.grantedBy.count,"
                "RUNS:.status.usage.runsGranted,LOADED:.status.usage.runsLoaded,"
                "LOAD-RATE:.status.usage.loadRate",
            ).splitlines():  # fmt: skip
                self.say(f"   {line}")

        self.step(f"done in {time.monotonic() - self.t0:.1f}s; the cluster stays up")
        self.say(f"   export KUBECONFIG={self.cluster.kubeconfig}")
        self.say(f'   export PATH="{self.cluster.bin_dir}:$PATH"')
        self.say(f"   kubectl get skills,agents,topologies,runs -n {self.ns}")
        self.say(f"   kubectl describe run {name} -n {self.ns}")
        self.say(f"   kubectl create -f examples/40-run.yaml -n {self.ns}   # another run")
        self.say("   make cluster-down   # stop the operator, the control plane and the node")
        url = self.cluster.web_view_url()
        if url:
            self.step("the skill library, agents and runs in your browser (read-only)")
            self.say(f"   {url}/skills")
        return 0 if final.startswith("Succeeded=True") else 1


def run_demo(
    cluster: LocalCluster,
    *,
    namespace: str = "default",
    timeout: float = 240.0,
    out: TextIO = sys.stdout,
) -> int:
    """The demo against a running cluster (see the module docstring); 0 if the Run succeeded."""
    if not cluster.is_running():
        raise ClusterError(f"no running cluster in {cluster.state_dir}; run `make cluster-up`")
    return Demo(cluster, namespace, out).run(timeout)


__all__ = ["load_examples", "model_override", "run_demo", "with_model"]
