"""A harness node end to end in the runner: the real Claude Code CLI under governance.

``python -m swarmkit_runner run`` (a real process, as in the Job) on a Topology whose root
node is ``harness: {kind: claude-code}``: the runner starts its model proxy and the in-pod
MCP gateway, lays out the skills and runs the pinned ``claude`` against the scripted model
server (Anthropic Messages, streamed). What a user would notice is asserted: the outcome,
the output, the audit, the usage, where the credential is (only between proxy and model).
"""

from __future__ import annotations

import functools
import resource
import sys
from pathlib import Path
from typing import Any

from swarmkit_api.bundle import BundleTopology, secret_env_name
from swarmkit_api.topology import TopologySpec
from swarmkit_devcluster.harness_clis import ensure_harness_clis
from tests.support.bundles import (
    agent,
    anthropic_provider,
    bundle,
    secret_ref,
    skill,
    stdio_server,
    write_bundle,
)
from tests.support.mcp_servers import stdio_command
from tests.support.model_server import RecordedRequest, Reply, ScriptedModelServer, text, tool_call
from tests.support.runner import RunOutput, run_subprocess

from .test_claude_code_conformance import tool_results

PROVIDER_KEY = "sk-ant-provider-key-never-leaves-the-proxy-7f3a"
KEY_REF = secret_ref("anthropic", "apiKey")
#: Seconds one runner process may take (the CLI's own start is ~1-3 s; the machine is shared).
RUN_TIMEOUT = 240.0


@functools.cache
def harness_dir() -> Path:
    return ensure_harness_clis()


def offered(request: RecordedRequest, suffix: str) -> str | None:
    return next((n for n in request.tool_names if n.endswith(suffix)), None)


def calls(tool_suffix: str, **arguments: Any) -> Any:
    """A scripted model: call the offered tool ending in ``tool_suffix``, then answer with
    what it returned (error or not)."""

    def reply(request: RecordedRequest) -> Reply:
        results = tool_results(request)
        if results:
            return text(f"The tool said: {results[0]}")
        name = offered(request, tool_suffix)
        return tool_call(name, **arguments) if name else text("ok")

    return reply


def harness_topology(**harness: Any) -> BundleTopology:
    spec = TopologySpec.model_validate(
        {
            "workspaceRef": {"name": "default"},
            "agents": [
                {
                    "name": "coder",
                    "agentRef": {"name": "coder"},
                    "role": "root",
                    "harness": {"kind": "claude-code", **harness},
                },
            ],
        }
    )
    return BundleTopology(name="coding", version="v1", spec=spec)


def run(b: Any, tmp: Path, args: list[str] | None = None) -> RunOutput:
    env = {secret_env_name(KEY_REF): PROVIDER_KEY, "SWARMKIT_HARNESS_DIR": str(harness_dir())}
    layout = write_bundle(b, tmp)
    return run_subprocess(layout, env=env, timeout=RUN_TIMEOUT, args=args)


def echo_bundle(server: ScriptedModelServer, **harness: Any) -> Any:
    return bundle(
        agents=[agent("coder", provider="m", tools=["t.echo"], model="claude-sonnet-4-5")],
        providers=[anthropic_provider("m", server.url, api_key=KEY_REF)],
        mcp_servers=[stdio_server("t", stdio_command("t"))],
        topology=harness_topology(**harness),
        input="Call the echo tool with the text harness-ping and tell me what it said.",
        timeout_seconds=180,
    )


def test_a_harness_node_calls_a_granted_tool_and_succeeds(tmp_path: Path) -> None:
    with ScriptedModelServer(
        default=calls("echo", text="harness-ping"), api_key=PROVIDER_KEY
    ) as server:
        out = run(echo_bundle(server), tmp_path)
    assert out.outcome == "Succeeded", (out.result, out.stderr[-3000:])
    assert "The tool said: harness-ping" in out.result["output"]
    # The call went through the governed gateway: one audited tool.call of the granted tool.
    [call] = out.tool_calls("t.echo")
    assert call["outcome"] == "ok"
    [start] = out.events("harness.start")
    assert start["tools"] == ["t.echo"] and start["version"] == "2.1.332"
    assert out.events("harness.event"), "the transcript is kept in the audit stream"
    # Usage counted once: exactly what the model server answered, through the proxy.
    answered = [r for r in server.requests if not r.problems]
    assert server.refused == []
    usage = out.result["usage"]
    assert usage["outputTokens"] == 5 * len(answered)
    assert usage["inputTokens"] == 10 * len(answered)
    assert len(out.events("model.call")) == len(answered)
    # The credential reached the model server (from the proxy) and nothing else.
    assert {r.headers.get("x-api-key") for r in server.requests} == {PROVIDER_KEY}
    for where in (out.stdout, out.stderr, str(out.result)):
        assert PROVIDER_KEY not in where
    assert PROVIDER_KEY not in "".join(
        p.read_text(errors="replace") for p in (tmp_path / "scratch").rglob("*") if p.is_file()
    )


def test_a_tool_outside_the_grants_is_invisible_and_refused(tmp_path: Path) -> None:
    with ScriptedModelServer(default=calls("t_add", a=1, b=2), api_key=PROVIDER_KEY) as server:
        script = calls("t_add", a=1, b=2)

        def forced(request: RecordedRequest) -> Reply:
            # Call t.add even though it is not offered (as a confused model would).
            if not tool_results(request) and offered(request, "echo"):
                return tool_call("mcp__swarmkit__t_add", a=1, b=2)
            return script(request)

        server.default = forced
        out = run(echo_bundle(server), tmp_path)
    names = {n for r in server.requests for n in r.tool_names}
    assert not [n for n in names if n.endswith("add")], names
    assert out.tool_calls("t.add") == []
    assert out.outcome == "Succeeded", (out.result, out.stderr[-2000:])
    assert "The tool said:" in out.result["output"]


def strict_bundle(server: ScriptedModelServer, marker: Path) -> Any:
    code = f"open({str(marker)!r}, 'w').write('ran'); print('shipped')"
    pack = {
        "id": "ops",
        "commands": [
            {
                "name": "ship",
                "description": "Ship the release.",
                "argv": [sys.executable, "-c", code],
            }
        ],
    }
    return bundle(
        agents=[agent("coder", provider="m", skills=["ship"], model="claude-sonnet-4-5")],
        skills=[
            skill(
                "ship",
                implementation={
                    "type": "command",
                    "pack": "ops",
                    "command": "ship",
                    "permission": "strict",
                },
            )
        ],
        providers=[anthropic_provider("m", server.url, api_key=KEY_REF)],
        workspace={"commandPacks": [pack]},
        topology=harness_topology(),
        input="Ship the release with the ship tool and report what it printed.",
        timeout_seconds=180,
    )


def park_then_resume(tmp_path: Path, decision: dict[str, Any]) -> tuple[RunOutput, RunOutput, Path]:
    from .resume import resume_args

    marker = tmp_path / "ran"
    with ScriptedModelServer(default=calls("ship"), api_key=PROVIDER_KEY) as server:
        b = strict_bundle(server, marker)
        parked = run(b, tmp_path / "run")
        assert parked.outcome == "AwaitingReview", (parked.result, parked.stderr[-2000:])
        [item] = parked.result["reviewItems"]
        assert item["kind"] == "approval" and "strict" in item["question"]
        assert not marker.exists(), "a strict call must not run before it is approved"
        resumed = run(b, tmp_path / "run", resume_args(parked, tmp_path, decision))
    return parked, resumed, marker


def test_a_strict_tool_call_parks_and_runs_once_approved(tmp_path: Path) -> None:
    _parked, resumed, marker = park_then_resume(
        tmp_path, {"verdict": "approve", "decidedBy": "carol"}
    )
    assert resumed.outcome == "Succeeded", (resumed.result, resumed.stderr[-2000:])
    assert marker.read_text() == "ran"
    assert "shipped" in resumed.result["output"]
    [decided] = resumed.events("review.decided")
    assert (decided["verdict"], decided["decided_by"]) == ("approve", "carol")


def test_a_strict_tool_call_rejected_answers_the_reason(tmp_path: Path) -> None:
    _parked, resumed, marker = park_then_resume(
        tmp_path, {"verdict": "reject", "text": "not during the freeze", "decidedBy": "dave"}
    )
    assert resumed.outcome == "Succeeded", (resumed.result, resumed.stderr[-2000:])
    assert not marker.exists()
    assert "not during the freeze" in resumed.result["output"]


def test_a_hung_harness_ends_harness_timed_out(tmp_path: Path) -> None:
    hang = Reply(text="late", delay=60.0)
    with ScriptedModelServer(default=hang, api_key=PROVIDER_KEY) as server:
        out = run(echo_bundle(server, timeoutSeconds=10), tmp_path)
    assert out.outcome == "HarnessTimedOut", out.result
    assert "10s" in out.result["message"]
    assert out.duration < 60


def test_a_refused_credential_ends_the_run_failed_at_once(tmp_path: Path) -> None:
    # The provider refuses the key (revoked): the CLI would retry for minutes.
    with ScriptedModelServer(default=text("never"), api_key="some-other-key-entirely") as server:
        out = run(echo_bundle(server), tmp_path)
    assert out.outcome == "Failed", out.result
    assert "refused the credential (HTTP 401)" in out.result["message"]
    assert len(server.requests) == 1 and out.duration < 60
    assert PROVIDER_KEY not in out.stdout + out.stderr + str(out.result)


def test_a_harness_that_fails_ends_harness_failed(tmp_path: Path) -> None:
    refused = Reply(
        status=400,
        error_body='{"type": "error", "error": {"type": '
        '"invalid_request_error", "message": "model claude-x is retired"}}',
    )
    with ScriptedModelServer(default=refused, api_key=PROVIDER_KEY) as server:
        out = run(echo_bundle(server), tmp_path)
    assert out.outcome == "HarnessFailed", out.result
    assert "model claude-x is retired" in out.result["message"]


def test_the_runs_limits_hold_before_each_model_call(tmp_path: Path) -> None:
    with ScriptedModelServer(default=calls("echo", text="one"), api_key=PROVIDER_KEY) as server:
        b = echo_bundle(server).model_copy(
            update={
                "governance": echo_bundle(server).governance.model_copy(
                    update={"max_steps_per_run": 1}
                )
            }
        )
        out = run(b, tmp_path)
    assert out.outcome == "LimitExceeded", out.result
    assert "maxStepsPerRun" in out.result["message"]
    # The refused call never reached the model: one answered call, one charged step.
    assert len(server.requests) == 1
    assert out.result["steps"] == 1


def test_a_data_rlimit_below_what_the_harness_maps_ends_it_saying_so(tmp_path: Path) -> None:
    # As on the process node, where a 512Mi pod limit is an RLIMIT_DATA: the runner refuses
    # to start the CLI (which would die of a Bun panic) and says what to change.
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    with ScriptedModelServer(default=calls("echo", text="one"), api_key=PROVIDER_KEY) as server:
        resource.setrlimit(resource.RLIMIT_DATA, (512 * 1024 * 1024, hard))
        try:
            out = run(echo_bundle(server), tmp_path)
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    assert out.outcome == "HarnessFailed", out.result
    assert "data rlimit of 512 MiB" in out.result["message"]
    assert "at least 768Mi" in out.result["message"]
    assert server.requests == []
