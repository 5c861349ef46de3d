"""A Claude Code harness node end to end: operator, Job, runtime image, the real CLI.

The Topology's root node is ``harness: {kind: claude-code}``; the Run's pod (the one
workload pipeline's Job, the runtime image ``make images`` built with the pinned CLI) runs
the runner, its model proxy, the in-pod gateway and ``claude`` against the scripted model
server on the host (Anthropic Messages, streamed). A granted tool's result reaches the
Run's output; a strict tool parks the Run for a Review a person decides (both ways); the
provider key is nowhere but between the proxy and the model server; usage is counted once.
Codex and Gemini CLI run the same Run through the proxy's Responses / Gemini dialects. A
512Mi pod on the process node (a data rlimit there) ends HarnessFailed saying so. Claude
Code's own Write (``builtinTools``) is asked of the runner through its PreToolUse hook:
denied under a readonly tier, run under cautious, a Review under strict; Codex's shell
(``exec_command``) likewise through its own PreToolUse hook, run in its sandbox inside the
pod; Gemini CLI's ``write_file`` (then a ``read_file`` of it, showing whether the file is
there) through its BeforeTool hook and the per-Run allow value its ``--policy`` requires,
which appears in no log, status or model request. Also admission: a harness whose provider
speaks another wire format is refused.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, wait_for
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call
from tests.unit.harness.test_claude_code_conformance import tool_results

from .review_support import (
    bind_people,
    decide,
    parked_review,
    review_admission,  # noqa: F401  (fixture)
    review_of,
)
from .runs_support import (
    OperatorProcess,
    apply,
    apply_examples,
    create,
    doc,
    finished,
    get,
    reason_is,
    run_manifest,
    succeeded,
    wait_ready,
    wait_run,
)

KEY = "sk-ant-e2e-provider-key-only-the-proxy-holds-91c2"
SAID = "release notes are ready"


def answer_with_tool(suffix: str) -> Any:
    def reply(request: RecordedRequest) -> Reply:
        if request.wire == "anthropic":
            results = tool_results(request)
        else:
            results = [r[0] for r in request.tool_results()]
        if results:
            return text(f"The tool said: {results[0]}")
        name = next((n for n in request.tool_names if n.endswith(suffix)), None)
        if name is None and "tool_search" in request.tool_names:  # Codex defers MCP tools
            return tool_call("tool_search", query=suffix)
        return tool_call(name) if name else text("ok")

    return reply


#: Per harness: where the provider key reaches the model server (from the proxy only).
KEY_HEADERS: dict[str, tuple[str, str]] = {
    "claude-code": ("x-api-key", KEY),
    "codex": ("authorization", f"Bearer {KEY}"),
    "gemini-cli": ("x-goog-api-key", KEY),
}
#: Per harness: the provider type it needs, that provider's base URL on the scripted model
#: server, and the Agent's model.
KINDS: dict[str, tuple[str, str, str]] = {
    "claude-code": ("anthropic", "url", "claude-sonnet-4-5"),
    "codex": ("openai", "openai_base_url", "gpt-5.5"),
    "gemini-cli": ("gemini", "url", "gemini-2.5-flash"),
}


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(api_key=KEY) as server:
        yield server


def command_skill(name: str, **implementation: Any) -> dict[str, Any]:
    return doc(
        "Skill",
        name,
        {
            "description": f"Use to {name} the release.",
            "category": "capability",
            "implementation": {"type": "command", "pack": "rel", "command": name, **implementation},
            "provenance": {"authoredBy": "human", "version": "1.0.0"},
        },
    )


#: The Run pods' memory limit: Claude Code maps ~650 MiB of writable memory (~220 MiB
#: resident); the process node enforces a limit as RLIMIT_DATA, which counts all of it.
HARNESS_MEMORY = "1Gi"


def setup(
    kube: Kube,
    ns: str,
    model: ScriptedModelServer,
    provider_type: str | None = None,
    memory: str = HARNESS_MEMORY,
    kind: str = "claude-code",
    native: dict[str, bool] | None = None,
    harness: dict[str, Any] | None = None,
) -> None:
    own_type, base, model_name = KINDS[kind]
    kube.core.create_namespaced_secret(
        ns,
        {
            "metadata": {"name": "anthropic"},
            "data": {"apiKey": base64.b64encode(KEY.encode()).decode()},
        },
    )
    commands = [
        {
            "name": "notes",
            "description": "Print the release notes status.",
            "argv": ["python", "-c", f"print({SAID!r})"],
            "effects": "read",
        },
        {
            "name": "ship",
            "description": "Ship the release.",
            "argv": ["python", "-c", "print('shipped v1.2')"],
            "effects": "write",
        },
    ]

    def edit(d: dict[str, Any]) -> dict[str, Any]:
        if d["kind"] == "Workspace":
            d["spec"]["modelProviders"] = [
                *d["spec"].get("modelProviders", []),
                {
                    "name": "claude",
                    "type": provider_type or own_type,
                    "baseUrl": getattr(model, base),
                    "apiKey": {"name": "anthropic", "key": "apiKey"},
                },
            ]
            packs = d["spec"].get("commandPacks", [])
            d["spec"]["commandPacks"] = [
                *packs,
                {"id": "rel", "requires": ["python"], "commands": commands},
            ]
            d["spec"]["runtime"]["resources"]["limits"]["memory"] = memory
        return d

    apply_examples(kube, ns, edit=edit)
    apply(kube, ns, command_skill("notes"))
    apply(kube, ns, command_skill("ship", permission="strict"))
    apply(
        kube,
        ns,
        doc(
            "Agent",
            "coder",
            {
                "workspaceRef": {"name": "default"},
                "model": {"provider": "claude", "name": model_name, "maxTokens": 4096},
                "systemPrompt": "You prepare releases.",
                "skills": ["notes", "ship"],
                **({"nativeTools": native} if native else {}),
            },
        ),
    )
    wait_ready(kube, ns, "Agent", "coder")
    apply(
        kube,
        ns,
        doc(
            "Topology",
            "release",
            {
                "workspaceRef": {"name": "default"},
                "agents": [
                    {
                        "name": "coder",
                        "role": "root",
                        "agentRef": {"name": "coder"},
                        "harness": {"kind": kind, "timeoutSeconds": 300, **(harness or {})},
                    }
                ],
            },
        ),
    )


def pod_log(cluster: LocalCluster, ns: str, name: str, kind: str = "job") -> str:
    return cluster.kubectl("-n", ns, "logs", f"{kind}/{name}", check=False).stdout


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_harness_run_succeeds_with_the_tools_result_and_no_credential_anywhere(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    kind: str,
) -> None:
    # Each harness through its own dialect of the model proxy (Messages, Responses, Gemini).
    ns = namespace
    setup(kube, ns, model, kind=kind)
    model.default = answer_with_tool("notes")
    wait_ready(kube, ns, "Topology", "release")
    create(kube, ns, run_manifest("notes-1", "release", input="Check the notes.", timeout=300))
    run = wait_run(kube, ns, "notes-1", finished, operator=operator, timeout=300)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", json.dumps(run.get("status"))
    status = run["status"]
    # The scripted model answers with the tool's result (the command skill's JSON).
    assert status["output"].startswith("The tool said: ") and SAID in status["output"]
    answered = [r for r in model.requests if not r.problems]
    assert model.refused == [] and answered
    assert status["usage"]["outputTokens"] == 5 * len(answered)
    assert status["usage"]["inputTokens"] == 10 * len(answered)
    header, value = KEY_HEADERS[kind]
    assert {r.headers.get(header) for r in model.requests} == {value}
    log = pod_log(cluster, ns, status["jobName"])
    events = [json.loads(x) for x in log.splitlines() if x.startswith("{")]
    assert [e for e in events if e["event"] == "harness.event"]
    [start] = [e for e in events if e["event"] == "harness.start"]
    assert start["harness"] == kind
    [call] = [e for e in events if e["event"] == "tool.call" and e.get("skill") == "notes"]
    assert call["outcome"] == "ok"
    for where in (log, json.dumps(run)):
        assert KEY not in where


@pytest.mark.usefixtures("review_admission")
@pytest.mark.parametrize("verdict", ["approve", "reject"])
def test_a_strict_call_parks_for_a_review_decided_both_ways(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    verdict: str,
) -> None:
    ns = namespace
    setup(kube, ns, model)
    bind_people(cluster, ns)
    model.default = answer_with_tool("ship")
    wait_ready(kube, ns, "Topology", "release")
    create(kube, ns, run_manifest("ship-1", "release", input="Ship it.", timeout=300))
    wait_run(kube, ns, "ship-1", reason_is("AwaitingReview"), operator=operator, timeout=300)
    review = parked_review(kube, ns, "ship-1")
    assert review["spec"]["request"]["kind"] == "approval"
    done = decide(
        cluster,
        ns,
        review["metadata"]["name"],
        "alice",
        verdict,
        text=None if verdict == "approve" else "not during the freeze",
    )
    assert done.returncode == 0, done.stderr
    run = wait_run(kube, ns, "ship-1", finished, operator=operator, timeout=300)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", json.dumps(run.get("status"))
    expected = "shipped v1.2" if verdict == "approve" else "not during the freeze"
    assert expected in run["status"]["output"]


def test_a_provider_of_another_wire_format_is_refused_at_admission(
    kube: Kube, namespace: str, operator: OperatorProcess, model: ScriptedModelServer
) -> None:
    ns = namespace
    setup(kube, ns, model, provider_type="openai")

    def refused() -> dict[str, Any] | None:
        body = get(kube, ns, "Topology", "release") or {}
        for c in (body.get("status") or {}).get("conditions") or ():
            if c["type"] == "Accepted" and c["status"] == "False":
                return dict(c)
        return None

    cond = wait_for(refused, 60, message="the Topology to be refused")
    assert cond["reason"] == "HarnessUnsupported"
    assert "spec.agents[0].harness.kind" in cond["message"] and "type openai" in cond["message"]


def test_a_pod_memory_limit_below_what_the_cli_maps_fails_saying_so(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
) -> None:
    # The example Workspace's 512Mi: on the process node an RLIMIT_DATA, which the CLI's
    # reserved arenas exceed. The Run says so and what to change, never a Bun panic.
    ns = namespace
    if cluster.real_node:
        pytest.skip("a cgroup memory limit counts resident pages only")
    setup(kube, ns, model, memory="512Mi")
    model.default = answer_with_tool("notes")
    wait_ready(kube, ns, "Topology", "release")
    create(kube, ns, run_manifest("small-1", "release", input="Check the notes.", timeout=300))
    run = wait_run(kube, ns, "small-1", finished, operator=operator, timeout=300)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "HarnessFailed", json.dumps(run.get("status"))
    assert "data rlimit of 512 MiB" in cond["message"], cond["message"]
    assert "spec.runtime.resources.limits.memory" in cond["message"]
    assert model.requests == []


def write_in_its_work_dir(request: RecordedRequest) -> Reply:
    """Ask for Claude Code's Write of ``notes.txt`` in its working directory (named in the
    context it sends), then answer with what the tool said."""
    results = tool_results(request)
    if results:
        return text(f"Write said: {results[0]}")
    found = re.search(r"Primary working directory: (/[^\s\\]+)", json.dumps(request.body))
    if found is None or "Write" not in request.tool_names:
        return text("no Write offered")
    return tool_call("Write", file_path=f"{found.group(1)}/notes.txt", content=SAID)


def pod_events(cluster: LocalCluster, ns: str, run: dict[str, Any]) -> list[dict[str, Any]]:
    log = pod_log(cluster, ns, run["status"]["jobName"])
    return [json.loads(x) for x in log.splitlines() if x.startswith("{")]


@pytest.mark.usefixtures("review_admission")
@pytest.mark.parametrize("tier", ["readonly", "cautious", "strict"])
def test_a_built_in_write_is_decided_by_the_nodes_tier(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    tier: str,
) -> None:
    ns = namespace
    harness = {"builtinTools": True, "builtinToolsPermission": tier}
    setup(kube, ns, model, native={"fileIo": True}, harness=harness)
    bind_people(cluster, ns)
    model.default = write_in_its_work_dir
    wait_ready(kube, ns, "Topology", "release")
    create(kube, ns, run_manifest("write-1", "release", input="Write the notes.", timeout=300))
    if tier == "strict":
        wait_run(kube, ns, "write-1", reason_is("AwaitingReview"), operator=operator, timeout=300)
        review = parked_review(kube, ns, "write-1")
        assert review["spec"]["request"]["kind"] == "approval"
        assert "Write" in json.dumps(review["spec"]["request"])
        done = decide(cluster, ns, review["metadata"]["name"], "alice", "approve")
        assert done.returncode == 0, done.stderr
    run = wait_run(kube, ns, "write-1", finished, operator=operator, timeout=300)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", json.dumps(run.get("status"))
    output = run["status"]["output"]
    events = pod_events(cluster, ns, run)
    writes = [e for e in events if e.get("tool") == "Write" and e["event"].startswith("tool.")]
    if tier == "readonly":
        assert "ReadOnlyTier" in output or "readonly" in output, output
        [refused] = writes
        assert (refused["event"], refused["reason"]) == ("tool.refused", "ReadOnlyTier")
    else:
        assert "created successfully" in output, output
        [call] = writes
        assert (call["event"], call["outcome"], call["tier"]) == ("tool.call", "ok", tier)
        assert (call["kind"], call["effects"]) == ("native", "write")


#: Codex's shell writes a file in its work directory and prints it back.
CODEX_SHELL = "echo shell-wrote > from-shell.txt && cat from-shell.txt"


def codex_shell_then_answer(request: RecordedRequest) -> Reply:
    """Ask for Codex's ``exec_command`` once, then answer with what it said."""
    results = [r[0] for r in request.tool_results()]
    if results:
        return text(f"Codex said: {results[0]}")
    if "exec_command" not in request.tool_names:
        return text("no shell offered")
    return tool_call("exec_command", cmd=CODEX_SHELL)


@pytest.mark.usefixtures("review_admission")
@pytest.mark.parametrize("tier", ["cautious", "strict"])
def test_a_codex_shell_call_in_the_pod_is_decided_by_the_nodes_tier(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    tier: str,
) -> None:
    # Codex's shell (its exec_command, "Bash" to its hook) in the runtime image: the
    # PreToolUse hook asks the runner, whose node tier decides (strict: a Review first);
    # allowed, the shell runs in Codex's workspace-write sandbox inside the pod. (A readonly
    # tier with the shell switched on is refused at admission: every use would be refused.)
    ns = namespace
    harness = {"builtinTools": True, "builtinToolsPermission": tier}
    setup(kube, ns, model, kind="codex", native={"bash": True}, harness=harness)
    bind_people(cluster, ns)
    model.default = codex_shell_then_answer
    wait_ready(kube, ns, "Topology", "release")
    create(kube, ns, run_manifest("shell-1", "release", input="Write the notes.", timeout=300))
    if tier == "strict":
        wait_run(kube, ns, "shell-1", reason_is("AwaitingReview"), operator=operator, timeout=300)
        review = parked_review(kube, ns, "shell-1")
        assert review["spec"]["request"]["kind"] == "approval"
        assert CODEX_SHELL in json.dumps(review["spec"]["request"])
        ran = [r for q in model.requests for r, _error in q.tool_results() if "shell-wrote" in r]
        assert ran == [], "the shell waits for the decision"
        done = decide(cluster, ns, review["metadata"]["name"], "alice", "approve")
        assert done.returncode == 0, done.stderr
    run = wait_run(kube, ns, "shell-1", finished, operator=operator, timeout=300)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", json.dumps(run.get("status"))
    assert "Codex said: " in run["status"]["output"] and "shell-wrote" in run["status"]["output"]
    events = pod_events(cluster, ns, run)
    [call] = [e for e in events if e.get("tool") == "Bash" and e["event"].startswith("tool.")]
    assert (call["event"], call["outcome"], call["tier"]) == ("tool.call", "ok", tier)
    assert call["kind"] == "native"


def gemini_results(request: RecordedRequest) -> list[tuple[str, str]]:
    """(tool name, what it said: its output or its error) of every function response in
    the conversation, in order."""
    out = []
    for message in request.messages:
        for part in message["parts"]:
            response = part.get("functionResponse") or {}
            said = response.get("response") or {}
            if response:
                out.append((str(response.get("name")), str(said.get("error", said.get("output")))))
    return out


def gemini_write_then_read_back(request: RecordedRequest) -> Reply:
    """Ask for Gemini CLI's ``write_file`` of ``notes.txt`` in its workspace directory (named
    in the context it sends), then ``read_file`` of it, then answer with what both said: the
    read shows whether the file really is there."""
    found = re.search(r"Workspace Directories:\*\*\\n  - (/[^\s\\]+)", json.dumps(request.body))
    if found is None or "write_file" not in request.tool_names:
        return text("no workspace or no write_file offered")
    target = f"{found.group(1)}/notes.txt"
    results = gemini_results(request)
    if not results:
        return tool_call("write_file", file_path=target, content=SAID)
    if results[-1][0] == "write_file":
        return tool_call("read_file", file_path=target)
    return text(f"write_file said: {results[-2][1]} read_file said: {results[-1][1]}")


@pytest.mark.usefixtures("review_admission")
@pytest.mark.parametrize("tier", ["readonly", "cautious", "strict"])
def test_a_gemini_file_write_in_the_pod_is_decided_by_the_nodes_tier(
    cluster: LocalCluster,
    kube: Kube,
    namespace: str,
    operator: OperatorProcess,
    model: ScriptedModelServer,
    tier: str,
) -> None:
    # Gemini CLI's write_file in the runtime image: its BeforeTool hook asks the runner,
    # whose node tier decides (strict: a Review first, for the read back as well); allowed,
    # the hook adds the per-Run allow value its --policy file requires. The model reads the
    # file back, so the output shows whether it is really there.
    ns = namespace
    harness = {"builtinTools": True, "builtinToolsPermission": tier}
    setup(kube, ns, model, kind="gemini-cli", native={"fileIo": True}, harness=harness)
    bind_people(cluster, ns)
    model.default = gemini_write_then_read_back
    wait_ready(kube, ns, "Topology", "release")
    create(kube, ns, run_manifest("gwrite-1", "release", input="Write the notes.", timeout=300))
    if tier == "strict":  # a Review per use, decided by alice, the Run resumed each time
        for tool in ("write_file", "read_file"):
            review = next_review(kube, ns, "gwrite-1", operator)
            assert review["spec"]["request"]["kind"] == "approval"
            assert tool in json.dumps(review["spec"]["request"]), review["spec"]["request"]
            done = decide(cluster, ns, review["metadata"]["name"], "alice", "approve")
            assert done.returncode == 0, done.stderr
            decided = review_of(kube, ns, review["metadata"]["name"]) or {}
            assert decided["spec"]["decision"]["decidedBy"] == "alice"
    run = wait_run(kube, ns, "gwrite-1", finished, operator=operator, timeout=300)
    cond = succeeded(run)
    assert cond is not None and cond["reason"] == "Succeeded", json.dumps(run.get("status"))
    output = run["status"]["output"]
    logs = [pod_log(cluster, ns, pod["pod"], "pod") for pod in run["status"]["audit"]]
    events = [json.loads(x) for log in logs for x in log.splitlines() if x.startswith("{")]
    uses = [
        e
        for e in events
        if e.get("kind") == "native"
        and e["event"].startswith("tool.")
        and e.get("outcome") != "AwaitingReview"
    ]
    if tier == "readonly":
        assert "Tool execution blocked" in output and "ReadOnlyTier" in output, output
        # The read is allowed and finds nothing: the write never ran.
        assert "read_file said: File not found" in output, output
        write, read = uses
        assert (write["event"], write["tool"], write["reason"]) == (
            "tool.refused",
            "write_file",
            "ReadOnlyTier",
        )
        assert (write["kind"], write["tier"], write["effects"]) == ("native", "readonly", "write")
        assert (read["event"], read["tool"], read["outcome"]) == ("tool.call", "read_file", "ok")
    else:
        assert "write_file said: Successfully created and wrote" in output, output
        assert f"read_file said: {SAID}" in output, output  # the file is there
        assert [(e["event"], e["tool"], e["outcome"], e["tier"], e["effects"]) for e in uses] == [
            ("tool.call", "write_file", "ok", tier, "write"),
            ("tool.call", "read_file", "ok", tier, "read"),
        ]
    if tier == "strict":  # each use parked before it ran, and alice's decision is audited
        asked = [(e["tool"], e["kind"]) for e in events if e["event"] == "review.requested"]
        assert asked == [("write_file", "approval"), ("read_file", "approval")]
        decided = [e["decided_by"] for e in events if e["event"] == "review.decided"]
        assert decided == ["alice", "alice"]
    # The per-Run allow value the hook adds stays between the hook and the CLI's policy.
    for where in (*logs, json.dumps(run)):
        assert "swarmkit_allow" not in where
    assert not [r for r in model.requests if "swarmkit_allow" in json.dumps(r.body)]


def next_review(kube: Kube, ns: str, run: str, operator: OperatorProcess) -> dict[str, Any]:
    """The Review the Run is parked on now (not one already decided)."""

    def parked_anew(body: dict[str, Any]) -> bool:
        items = (body.get("status") or {}).get("reviewItems") or []
        review = review_of(kube, ns, items[0]["review"]) if items else None
        return bool(
            reason_is("AwaitingReview")(body) and review and not review["spec"].get("decision")
        )

    body = wait_run(kube, ns, run, parked_anew, operator=operator, timeout=300)
    found = review_of(kube, ns, body["status"]["reviewItems"][0]["review"])
    assert found is not None
    return found
