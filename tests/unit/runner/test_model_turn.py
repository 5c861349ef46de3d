"""The ``model.call`` audit lines of both model-turn paths, as written, byte for byte.

The agent loop (:mod:`swarmkit_runner.loop`) and ``llm_prompt`` skills (:mod:`swarmkit_runner.llm`)
take their turns through one :func:`swarmkit_runner.model_calls.model_turn`. These lines were
recorded from the two separate implementations before they were folded into it: a tool that
parses the audit stream (and the chain hashes over the exact text) sees the same lines. Only the
values that change from run to run (the chain's ``prev``, ``ts``, ``duration_ms``) are masked.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.bundles import agent, bundle, openai_provider, skill, write_bundle
from tests.support.model_server import Reply, ScriptedModelServer, error, text, tool_call
from tests.support.runner import RunOutput, run_in_process

RUN = "00000000-0000-4000-8000-000000000001"
HEAD = (
    f'{{"prev":"P","ts": "T", "event": "model.call", "run_id": "{RUN}", "correlation_id": "{RUN}"'
)
ERROR = (
    '"outcome": "error", "error": "model provider m: HTTP 400: {\\"error\\": {\\"type\\": '
    '\\"rate_limit_error\\", \\"message\\": \\"slow down\\"}}"}'
)
USAGE = '"attempts": 1, "input_tokens": 10, "output_tokens": 5'
AGENT = '"agent": "dev", "provider": "m", "model": "agent-model"'
SKILL = '"agent": "dev", "skill": "summarize", "provider": "m", "model": "small-model"'


def model_call_lines(out: RunOutput) -> list[str]:
    """The run's ``model.call`` lines with the per-run values masked."""
    lines = [line for line in out.stdout.splitlines() if '"event": "model.call"' in line]
    masked = []
    for line in lines:
        line = re.sub(r'^\{"prev":"[0-9a-f]+"', '{"prev":"P"', line)
        line = re.sub(r'"ts": "[^"]+"', '"ts": "T"', line)
        masked.append(re.sub(r'"duration_ms": [0-9.]+', '"duration_ms": D', line))
    return masked


async def test_agent_and_skill_turns_audit_the_same_lines_as_before(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        tool_call("summarize", input="a"),
        Reply(text="half a summ", truncate=True),  # the skill's turn, cut: Truncated
        tool_call("summarize", input="b"),
        error(400),  # the skill's turn fails: a tool error, not the run's
        text("done"),
    )
    b = bundle(
        agents=[agent("dev", provider="m", model="agent-model", skills=["summarize"])],
        skills=[
            skill(
                "summarize",
                implementation={"type": "llm_prompt", "prompt": "Sum.", "model": "small-model"},
            )
        ],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Succeeded", out.result
    assert model_call_lines(out) == [
        f'{HEAD}, {AGENT}, "step": 1, "duration_ms": D, "tool_calls": 1, "outcome": "ok", '
        f'{USAGE}, "stop_reason": "tool_calls"}}',
        f'{HEAD}, {SKILL}, "duration_ms": D, "outcome": "Truncated", '
        f'{USAGE}, "stop_reason": "length"}}',
        f'{HEAD}, {AGENT}, "step": 2, "duration_ms": D, "tool_calls": 1, "outcome": "ok", '
        f'{USAGE}, "stop_reason": "tool_calls"}}',
        f'{HEAD}, {SKILL}, "duration_ms": D, {ERROR}',
        f'{HEAD}, {AGENT}, "step": 3, "duration_ms": D, "tool_calls": 0, "outcome": "ok", '
        f'{USAGE}, "stop_reason": "stop"}}',
    ]
    # Both paths count against the one run budget: 3 agent turns + 2 skill turns, the
    # failed one not counted.
    assert out.result["steps"] == 4


async def test_a_failed_agent_turn_audits_the_same_line_as_before(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(error(400))
    b = bundle(
        agents=[agent("dev", provider="m", model="agent-model")],
        providers=[openai_provider("m", model_server.openai_base_url)],
    )
    out = await run_in_process(b, write_bundle(b, tmp_path))

    assert out.outcome == "Failed", out.result
    assert model_call_lines(out) == [f'{HEAD}, {AGENT}, "duration_ms": D, {ERROR}']
