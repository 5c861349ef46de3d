"""A Workspace credential the Run never reads, and one it does, never come out in clear.

Real control plane, process node, operator process and runner process; a real Jaeger with
content capture on (uncapped), so every prompt, answer, tool argument and tool result is on a
span. Both values are planted in the Run's input, in the tool arguments and in the model's
answer (the replay provider scripts it), as they are and base64-encoded; the read one also
comes back in a tool result (an HTTP tool that echoes its ``Authorization`` header). Neither
appears, in clear or base64, in the Run's status, the pod's log (the audit stream), the
Events, the mailbox message the ``mailbox_send`` effect made, or any exported span.

The bash call of the same Run looks for them where issue 46 found them: in every ancestor's
``/proc/<pid>/environ`` and ``mem``, once in the real runtime image (the process node's image
mode: uid 65532, no capabilities, as in a cluster) and once as a host command. In the image
the runner is sealed (non-dumpable): both are refused for every ancestor, while a child of
the bash call (the same uid, not sealed) is readable, the control. A host-command pod runs
as the node's user (root here, with ``CAP_SYS_PTRACE``, which no restricted pod has): there
the test can only show that no readable environment block holds a value.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.imagebuild import image_status
from swarmkit_devcluster.jaeger import Jaeger
from swarmkit_devcluster.testing import Kube
from tests.support.http_server import HttpRequest, RecordingHttpServer
from tests.support.mcp_servers import HOST_RUNTIME_IMAGE
from tests.support.planted import hits, never_read, read_by_run

from .review_support import parked_review
from .runs_support import (
    GROUP,
    PLURALS,
    REPO,
    RUNTIME,
    VERSION,
    OperatorProcess,
    agent_with,
    apply,
    apply_examples,
    create,
    debug,
    finished,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)

STATUS = image_status(REPO)
#: Planted values: the chaos suite's secret scan plants and looks for the same kind.
NEVER_READ = never_read()
READ = read_by_run()
PLANTED = (NEVER_READ, READ)

#: Walks from the bash call up to PID 1: for each ancestor, whether its environment block and
#: its memory can be opened, and how many SWARMKIT_SECRET_* values in it look like ours.
ANCESTORS = r"""probe() {
  comm=$(cat /proc/$1/comm 2>/dev/null)
  if env=$(tr '\0' '\n' < /proc/$1/environ 2>/dev/null); then
    r=read; n=$(printf '%s\n' "$env" | grep -c '^SWARMKIT_SECRET_[A-Z0-9_]*=sk-')
  else r=denied; n=0; fi
  if (exec 3< /proc/$1/mem) 2>/dev/null; then m=open; else m=denied; fi
  echo "$2=$1 comm=$comm environ=$r secrets=$n mem=$m"
}
sleep 60 & probe $! control; kill $!
p=$PPID
while :; do
  probe $p ancestor
  [ "$p" -le 1 ] && break
  read -r _ _ _ p _ < /proc/$p/stat
done"""


pytestmark = pytest.mark.operator_settings(tracing=True)


def _workspace(echo_url: str, jaeger: Jaeger, image: str) -> Any:
    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        if doc["kind"] != "Workspace":
            return doc
        spec = doc["spec"]
        spec["runtime"]["image"] = image
        spec["credentials"] = [
            {"name": "partner-api", "secretKeyRef": {"name": "partner-api", "key": "token"}}
        ]
        spec["tools"] = [
            {
                "name": "echo_auth",
                "description": "Echo the request.",
                "http": {"method": "POST", "url": echo_url},
                "credentials": {"secretKeyRef": {"name": "echo-api", "key": "token"}},
            }
        ]
        spec["mailboxes"] = [{"name": "ops", "description": "on-call humans"}]
        spec["tracing"] = {
            "endpoint": jaeger.otlp_http_endpoint,
            "captureContent": True,
            "maxContentChars": 65536,
        }
        return doc

    return edit


def _replay() -> list[dict[str, Any]]:
    both = f"{NEVER_READ} and {READ}"
    b64 = " ".join(base64.b64encode(f"user:{v}".encode()).decode() for v in PLANTED)
    return [
        {
            "toolCalls": [
                {"name": "echo_auth", "arguments": {"note": both}},
                {"name": "bash", "arguments": {"command": f": {both} {b64}\n{ANCESTORS}"}},
                {"name": "mailbox_send", "arguments": {"to": "ops", "message": f"{both} {b64}"}},
            ]
        },
        {"text": f"the tokens are {both}; encoded: {b64}"},
    ]


def _texts(kube: Kube, ns: str, cluster: LocalCluster, jaeger: Jaeger) -> dict[str, str]:
    """Every place a value could come out, by name. What the test itself wrote (the Agent's
    scripted answers, the Run's input) and its copies (the Agent's rendered ConfigMap, the
    Run's bundle) are not ways out; every status, the objects the runner's effects made,
    every Event, every other ConfigMap (checkpoints, outboxes), the pod logs and the spans
    are."""
    out: dict[str, str] = {}
    for plural in PLURALS.values():
        for o in kube.custom.list_namespaced_custom_object(GROUP, VERSION, ns, plural)["items"]:
            out[f"{plural}/{o['metadata']['name']} status"] = json.dumps(o.get("status"))
    for plural in ("mailboxmessages", "reviews"):  # made whole by the operator from the run
        for o in kube.custom.list_namespaced_custom_object(GROUP, VERSION, ns, plural)["items"]:
            out[f"{plural}/{o['metadata']['name']}"] = json.dumps(o)
    for e in kube.core.list_namespaced_event(ns).items:
        out[f"event/{e.metadata.name}"] = f"{e.reason} {e.message}"
    for cm in kube.core.list_namespaced_config_map(ns).items:
        name = cm.metadata.name
        if not name.startswith("agent-") and not name.endswith("-bundle"):
            out[f"configmap/{name}"] = json.dumps(cm.data)
    for log in sorted(cluster.pods_dir.glob(f"{ns}_*/*.log")):
        out[f"log {log.name}"] = log.read_text(errors="replace")
    for service in jaeger.services():
        for t in jaeger.traces_of(service):
            out[f"trace {service} {t.get('traceID')}"] = json.dumps(t)
    return out


@pytest.mark.parametrize("image", [HOST_RUNTIME_IMAGE, RUNTIME], ids=["host-command", "image"])
def test_credentials_never_come_out_and_bash_cannot_read_them_from_an_ancestor(
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    jaeger: Jaeger,
    cluster: LocalCluster,
    image: str,
) -> None:
    if image == RUNTIME and STATUS.get(RUNTIME) != "ok":
        pytest.skip(f"runtime image {STATUS.get(RUNTIME)}: `make images` builds it")
    ns = namespace

    def echo(request: HttpRequest) -> tuple[int, Any]:
        return 200, {"headers": request.headers, "body": request.body}

    with RecordingHttpServer(echo) as server:
        for name, value in (("partner-api", NEVER_READ), ("echo-api", READ)):
            kube.core.create_namespaced_secret(
                ns, {"metadata": {"name": name}, "stringData": {"token": value}}
            )
        apply_examples(kube, ns, edit=_workspace(server.url + "/echo", jaeger, image))
        tools = ["echo_auth", "mailbox_send"]
        apply(kube, ns, agent_with("leaky", _replay(), bash=True, tools=tools))
        wait_ready(kube, ns, "Agent", "leaky")
        create(kube, ns, run_manifest("r1", agent="leaky", input=f"the token is {NEVER_READ}"))
        run = wait_run(kube, ns, "r1", finished, timeout=150, operator=operator)
        # the read credential really was read and sent (the control)
        assert any(READ in str(r.headers) for r in server.requests), server.requests
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", debug(kube, ns, operator)
    assert "[REDACTED]" in run["status"]["output"]
    assert len(run["status"].get("effects") or []) == 1, run["status"]
    texts = _texts(kube, ns, cluster, jaeger)
    assert any(k.startswith("trace ") for k in texts), "no trace exported: nothing was checked"
    assert any(k.startswith("mailboxmessages/") for k in texts), sorted(texts)
    leaks = {k: hits(v, PLANTED) for k, v in texts.items() if hits(v, PLANTED)}
    assert leaks == {}, leaks

    log = "\n".join(v for k, v in texts.items() if k.startswith("log "))
    found = re.findall(r"(control|ancestor)=\d+ comm=\S* environ=\w+ secrets=\d+ mem=\w+", log)
    lines = re.findall(r"(?:control|ancestor)=\d+ comm=\S* environ=\w+ secrets=\d+ mem=\w+", log)
    assert len(lines) >= 3 and found[0] == "control", log[-3000:]
    # the control: a process of the same uid that is not sealed (bash's own child) is readable
    assert lines[0].endswith("environ=read secrets=0 mem=open"), lines
    assert all("secrets=0" in ln for ln in lines), lines  # no readable block holds a value
    if image == RUNTIME:  # uid 65532 without capabilities: every ancestor is out of reach
        # bash's parent (the sandbox launcher, non-dumpable too), the sealed runner, the node
        assert all(ln.endswith("environ=denied secrets=0 mem=denied") for ln in lines[1:]), lines
        assert "comm=tini" not in " ".join(lines), lines


def test_a_parked_runs_review_and_checkpoint_carry_no_credential(
    kube: Kube, namespace: str, operator: OperatorProcess, jaeger: Jaeger, cluster: LocalCluster
) -> None:
    ns = namespace
    both = f"{NEVER_READ} and {READ}"
    b64 = " ".join(base64.b64encode(f"user:{v}".encode()).decode() for v in PLANTED)
    ask = {"title": f"May I send {both}?", "details": f"encoded: {b64}"}
    replay = [
        {"toolCalls": [{"name": "echo_auth", "arguments": {"note": both}}]},
        {"toolCalls": [{"name": "human_task_request", "arguments": ask}]},
        {"text": f"done with {both}"},
    ]
    with RecordingHttpServer(lambda r: (200, {"headers": r.headers})) as server:
        for name, value in (("partner-api", NEVER_READ), ("echo-api", READ)):
            kube.core.create_namespaced_secret(
                ns, {"metadata": {"name": name}, "stringData": {"token": value}}
            )
        apply_examples(kube, ns, edit=_workspace(server.url + "/echo", jaeger, HOST_RUNTIME_IMAGE))
        tools = ["echo_auth", "human_task_request"]
        agent = agent_with("asker", replay, tools=tools, permissions=["human_task_request"])
        apply(kube, ns, agent)
        wait_ready(kube, ns, "Agent", "asker")
        create(kube, ns, run_manifest("r2", agent="asker", input=f"the token is {NEVER_READ}"))
        review = parked_review(kube, ns, "r2")
        assert any(READ in str(r.headers) for r in server.requests), server.requests
    assert "[REDACTED]" in json.dumps(review["spec"]), review["spec"]
    texts = _texts(kube, ns, cluster, jaeger)
    assert any("-ckpt-" in k for k in texts), sorted(texts)  # the checkpoint was scanned
    leaks = {k: hits(v, PLANTED) for k, v in texts.items() if hits(v, PLANTED)}
    assert leaks == {}, leaks
