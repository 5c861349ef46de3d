"""Isolation proven by the kernel (issue 38 item 5, issue 46 item 3), on the real node.

The operator runs as on any cluster; the test namespace is annotated the way an administrator
pins a tenant to nodes (PodNodeSelector, PodTolerationRestriction), so every pod the operator
creates in it (the Run's Job pod, the served Topology's Deployment pod) runs in the runtime
image under containerd + runc on ``realnode``, where kube-router enforces NetworkPolicies and
CoreDNS answers the cluster's names. The namespace enforces Pod Security ``restricted``.

The probes are a skill script and a bash call: child processes of the runner with their own
sockets, which the runner's egress guard (it wraps only the runner's own HTTP clients) never
sees. So what blocks them is the Run's NetworkPolicy in the kernel, nothing of ours.
Marked ``real_node``: a cluster without the real node fails them (test_real_node.py's fixture).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from swarmkit_api.bundle import secret_env_name
from swarmkit_api.common import SecretKeyRef
from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.realnode import NODE_NAME, namespace_annotations
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.planted import NEVER_READ_PREFIX, never_read

from .runs_support import (
    RUNTIME,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    doc,
    finished,
    get,
    run_manifest,
    sha256_hex,
    succeeded,
    wait_ready,
    wait_run,
)
from .test_real_node import pod_on_real_node, require_image, running_ip
from .test_runs_scrubbing import ANCESTORS

#: Connects to each ``host:port`` argument; the exit code's bits say what went wrong:
#: 1 the declared server was not reached, 2 the undeclared one was, 4 the served Topology
#: was (this Run's policy does not admit it), 8 its DNS name did not resolve.
PROBE = """import socket, sys
def reach(target):
    host, port = target.rsplit(":", 1)
    try:
        addr = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0][4][0]
    except OSError as exc:
        print(target, "UNRESOLVED", exc)
        return None
    try:
        with socket.create_connection((addr, int(port)), timeout=4):
            print(target, addr, "CONNECTED")
            return True
    except OSError as exc:
        print(target, addr, "BLOCKED", type(exc).__name__)
        return False
declared, undeclared, served = sys.argv[1:4]
code = 0 if reach(declared) is True else 1
code |= 0 if reach(undeclared) is False else 2
served_reached = reach(served)
code |= 8 if served_reached is None else (4 if served_reached else 0)
sys.exit(code)
"""
SERVER = "while true; do echo hello | nc -l -p 8080 && echo CONNECTED; done"
TOKEN = "outsiders-may-call-0042"


_ALLOWED = [{"skill": "prober", "path": "scripts/probe.py", "sha256": sha256_hex(PROBE)}]
pytestmark = [
    pytest.mark.real_node,
    pytest.mark.operator_settings(
        config={"security": {"skills": {"allowScriptExecution": True, "allowed": _ALLOWED}}}
    ),
]


@pytest.fixture
def on_real_node(real_node: str, cluster: LocalCluster, kube: Kube, namespace: str) -> str:
    """The test namespace (Pod Security ``restricted``), every pod of it on the real node."""
    require_image(cluster, RUNTIME)
    labels = kube.core.read_namespace(namespace).metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    kube.core.patch_namespace(namespace, {"metadata": {"annotations": namespace_annotations()}})
    return namespace


def _connections(kube: Kube, ns: str, pod: str) -> int:
    return kube.core.read_namespaced_pod_log(pod, ns).count("CONNECTED")


def _reads(cluster: LocalCluster, ns: str, pod: str, cmd: str) -> str:
    res = cluster.kubectl("exec", "-n", ns, pod, "--", "sh", "-c", cmd, check=False)
    return res.stdout


def _served_topology(kube: Kube, ns: str) -> str:
    """The ``oracle`` Topology served (replay model); returns its Service's DNS name."""
    kube.core.create_namespaced_secret(
        ns, {"metadata": {"name": "serve-tokens"}, "stringData": {"outsider": TOKEN}}
    )
    apply(kube, ns, agent_with("oracle-agent", [{"text": "42"}]))
    topology = doc(
        "Topology",
        "oracle",
        {
            "workspaceRef": {"name": "default"},
            "description": "Answers.",
            "agents": [{"name": "root", "agentRef": {"name": "oracle-agent"}, "role": "root"}],
            "serve": {
                "replicas": 1,
                "auth": {"bearerTokens": [{"name": "serve-tokens", "key": "outsider"}]},
            },
        },
    )
    apply(kube, ns, topology)
    return f"serve-oracle.{ns}.svc"


def _serving(kube: Kube, ns: str) -> bool:
    topo = get(kube, ns, "Topology", "oracle") or {}
    conds = (topo.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Serving" and c["status"] == "True" for c in conds)


def _operator_pods_admitted(kube: Kube, ns: str) -> None:
    """No pod the operator's Jobs and Deployments asked for was refused (Pod Security)."""
    refused = [
        f"{e.involved_object.kind}/{e.involved_object.name}: {e.message}"
        for e in kube.core.list_namespaced_event(ns).items
        if e.reason == "FailedCreate"
    ]
    assert refused == []


def test_the_runs_policy_blocks_an_undeclared_destination_in_the_kernel(
    on_real_node: str, kube: Kube, cluster: LocalCluster, operator: OperatorProcess
) -> None:
    ns = on_real_node
    apply_examples(kube, ns)
    for name in ("declared", "undeclared"):
        kube.core.create_namespaced_pod(ns, pod_on_real_node(name, SERVER))
    kube.core.create_namespaced_pod(ns, pod_on_real_node("outsider", "sleep 3600"))
    declared, undeclared = (running_ip(kube, ns, n) for n in ("declared", "undeclared"))
    running_ip(kube, ns, "outsider")
    served = _served_topology(kube, ns)
    wait_for(lambda: _serving(kube, ns), 120, message=lambda: debug(kube, ns, operator))
    (pod,) = kube.core.list_namespaced_pod(ns, label_selector="swarmkit.dev/serve=oracle").items
    assert pod.spec.node_name == NODE_NAME

    # The controls, from a pod no policy selects: the undeclared server answers, and the served
    # Topology's Service answers by its DNS name (the card is public).
    card = f"printf 'GET /.well-known/agent-card.json HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {served} 80"
    wait_for(lambda: " 200 " in _reads(cluster, ns, "outsider", card).split("\r\n")[0], 60)
    assert _reads(cluster, ns, "outsider", f"nc -w 2 {undeclared} 8080 </dev/null") == "hello\n"
    undeclared_before = _connections(kube, ns, "undeclared")
    assert undeclared_before >= 1

    # The Run declares the first server only (egress.allow) and its script tries all three.
    ws = get(kube, ns, "Workspace", "default")
    assert ws is not None
    egress = {"allow": [{"cidr": f"{declared}/32", "ports": [8080]}]}
    apply(kube, ns, {**ws, "spec": {**ws["spec"], "egress": egress}})
    skill = doc(
        "Skill",
        "prober",
        {
            "description": "Use when connections must be probed.",
            "category": "capability",
            "instructions": "Run scripts/probe.py with host:port arguments.",
            "files": [{"path": "scripts/probe.py", "content": PROBE}],
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    )
    apply(kube, ns, skill)
    targets = [f"{declared}:8080", f"{undeclared}:8080", f"{served}:80"]
    args = {"skill_name": "prober", "path": "scripts/probe.py", "args": targets}
    replay = [
        {"toolCalls": [{"name": "load_skill", "arguments": {"name": "prober"}}]},
        {"toolCalls": [{"name": "run_skill_script", "arguments": args}]},
        {"text": "probed"},
    ]
    apply(kube, ns, agent_with("prober-agent", replay, skills=["prober"]))
    wait_ready(kube, ns, "Agent", "prober-agent")
    wait_ready(kube, ns, "Skill", "prober")
    create(kube, ns, run_manifest("probe", agent="prober-agent", timeout=300))
    run = wait_run(kube, ns, "probe", finished, timeout=180, operator=operator)
    assert (succeeded(run) or {}).get("reason") == "Succeeded", debug(kube, ns, operator)
    run_pod = kube.core.read_namespaced_pod(run["status"]["podName"], ns)
    assert run_pod.spec.node_name == NODE_NAME
    assert run_pod.spec.containers[0].image == RUNTIME

    (usage,) = run["status"]["skills"]
    (script,) = usage["scripts"]
    assert script["runs"] == 1 and script["lastExitCode"] == 0, (script, PROBE)
    # The servers saw it too: the declared one got the Run's connection, the undeclared
    # one nothing beyond the control's.
    assert _connections(kube, ns, "declared") == 1
    assert _connections(kube, ns, "undeclared") == undeclared_before
    _operator_pods_admitted(kube, ns)


def test_a_bash_child_of_the_runner_cannot_read_a_workspace_secret(
    on_real_node: str, kube: Kube, cluster: LocalCluster, operator: OperatorProcess
) -> None:
    """Issue 46 item 3 under runc: in the runtime image, a bash call walks from itself to
    PID 1 and finds every ancestor's ``environ`` and ``mem`` refused (its own child, the
    control, is readable); no file it can read holds the credential's value."""
    ns = on_real_node
    value = never_read()
    kube.core.create_namespaced_secret(
        ns, {"metadata": {"name": "partner-api"}, "stringData": {"token": value}}
    )

    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] == "Workspace":
            doc["spec"]["credentials"] = [
                {"name": "partner-api", "secretKeyRef": {"name": "partner-api", "key": "token"}}
            ]
        return doc

    apply_examples(kube, ns, edit=edit)
    # The image's root is read-only and older than the Secret: only a mount can hold a file
    # written for this Run, so every mount outside /proc and /sys is searched. The prefix is
    # built at run time, so the command (in the bundle, a mounted file) does not hold it.
    head, tail = NEVER_READ_PREFIX[:4], NEVER_READ_PREFIX[4:]
    files = (
        f'p="{head}"; p="${{p}}{tail}"; n=0\n'
        'printf "%s" "$p" > control.txt; echo control-in=$PWD\n'  # the search's control
        "touch /probe 2>/dev/null && echo root=rw || echo root=ro\n"
        "while read -r _ m t _; do\n"
        '  case "$t:$m" in proc:*|sysfs:*|cgroup*|devpts:*|mqueue:*|*:/|*:/proc/*|*:/sys/*) '
        "continue;; esac\n"
        '  n=$((n + $(grep -rlF -D skip -- "$p" "$m" 2>/dev/null | wc -l))); echo "searched=$m"\n'
        "done < /proc/self/mounts\n"
        "echo files-with-value=$n; echo env-secrets=$(env | grep -c '^SWARMKIT_SECRET_')"
    )
    bash = {"name": "bash", "arguments": {"command": f"{ANCESTORS}\n{files}"}}
    apply(kube, ns, agent_with("looker", [{"toolCalls": [bash]}, {"text": "looked"}], bash=True))
    wait_ready(kube, ns, "Agent", "looker")
    create(kube, ns, run_manifest("look", agent="looker", timeout=300))
    run = wait_run(kube, ns, "look", finished, timeout=180, operator=operator)
    assert (succeeded(run) or {}).get("reason") == "Succeeded", debug(kube, ns, operator)
    pod = kube.core.read_namespaced_pod(run["status"]["podName"], ns)
    assert pod.spec.node_name == NODE_NAME and pod.spec.containers[0].image == RUNTIME
    env = [e.name for c in pod.spec.containers for e in c.env or []]
    # the runner has it: the thing to protect
    assert secret_env_name(SecretKeyRef(name="partner-api", key="token")) in env
    log = kube.core.read_namespaced_pod_log(pod.metadata.name, ns)
    assert value not in log
    lines = re.findall(r"(?:control|ancestor)=\d+ comm=\S* environ=\w+ secrets=\d+ mem=\w+", log)
    assert len(lines) >= 3 and lines[0].startswith("control="), log[-3000:]
    assert lines[0].endswith("environ=read secrets=0 mem=open"), lines
    assert all(ln.endswith("environ=denied secrets=0 mem=denied") for ln in lines[1:]), lines
    assert "root=ro" in log and "searched=/etc/swarmkit/bundle" in log, log[-3000:]
    assert "searched=/scratch" in log and "searched=/tmp" in log, log[-3000:]
    # one file holds the prefix: the control the bash call wrote itself; no other
    assert "files-with-value=1" in log and "env-secrets=0" in log, log[-3000:]
    _operator_pods_admitted(kube, ns)
