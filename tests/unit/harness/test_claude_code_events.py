"""Claude Code's stream-json events → HarnessOutcome (pure; the real CLI's own events are
checked by test_claude_code_conformance.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swarmkit_runner.harness.base import HarnessInvocation, NativeGrant
from swarmkit_runner.harness.claude_code import ClaudeCode

CC = ClaudeCode()


def lines(*events: dict[str, Any]) -> list[str]:
    return ["not json: a diagnostic line", *(json.dumps(e) for e in events)]


INIT = {"type": "system", "subtype": "init", "session_id": "s1", "tools": []}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "message": {"content": list(blocks)}, "session_id": "s1"}


def result(subtype: str = "success", **extra: Any) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": subtype,
        "is_error": subtype != "success",
        "result": "all done",
        "num_turns": 2,
        "session_id": "s1",
        "usage": {
            "input_tokens": 7,
            "output_tokens": 3,
            "cache_read_input_tokens": 4,
            "cache_creation_input_tokens": 1,
        },
        **extra,
    }


def test_a_tool_call_its_result_and_the_final_answer() -> None:
    out = CC.parse_events(
        lines(
            INIT,
            assistant(
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "mcp__swarmkit__t_echo",
                    "input": {"text": "hi"},
                }
            ),
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "hi"}],
                        }
                    ]
                },
            },
            assistant({"type": "text", "text": "all done"}),
            result(),
        )
    )
    assert out.error_reason is None and out.finished and out.unmapped == ()
    assert out.final_text == "all done" and out.turns == 2 and out.session_id == "s1"
    [call] = out.tool_calls
    assert (call.name, call.server, dict(call.arguments), call.result) == (
        "mcp__swarmkit__t_echo",
        "swarmkit",
        {"text": "hi"},
        "hi",
    )
    assert (out.usage.input_tokens, out.usage.output_tokens) == (7, 3)
    assert (out.usage.cache_read_tokens, out.usage.cache_write_tokens) == (4, 1)


def test_an_error_result_is_harness_failed() -> None:
    out = CC.parse_events(lines(INIT, result("error_max_turns", errors=["max turns (5)"])))
    assert out.error_reason == "HarnessFailed" and "error_max_turns" in out.error_message
    assert "max turns (5)" in out.error_message


def test_no_result_event_is_harness_failed() -> None:
    out = CC.parse_events(lines(INIT, assistant({"type": "text", "text": "half"})))
    assert out.error_reason == "HarnessFailed" and not out.finished


def test_a_question_is_harness_asked_question() -> None:
    question = {"questions": [{"question": "Which branch?"}]}
    out = CC.parse_events(
        lines(
            INIT,
            assistant(
                {"type": "tool_use", "id": "q", "name": "AskUserQuestion", "input": question}
            ),
            result(),
        )
    )
    assert out.error_reason == "HarnessAskedQuestion" and "Which branch?" in out.error_message


def test_an_unknown_event_type_is_reported_unmapped() -> None:
    out = CC.parse_events(lines(INIT, {"type": "brand_new_event"}, result()))
    assert out.unmapped == ("brand_new_event",)


def test_built_ins_follow_the_native_grant(tmp_path: Path) -> None:
    base = dict(
        prompt="p",
        system_prompt="",
        model="m",
        work_dir=tmp_path,
        home_dir=tmp_path,
        skills_dir=None,
        mcp_url="u",
        mcp_token="t",
        model_proxy_url="x",
        model_token="k",
    )
    off = CC.argv(Path("claude"), HarnessInvocation(**base))
    assert off[off.index("--tools") + 1] == ""
    shell = CC.argv(Path("claude"), HarnessInvocation(**base, native=NativeGrant(shell=True)))
    assert shell[shell.index("--tools") + 1] == "Bash"
    env = CC.env(HarnessInvocation(**base))
    assert env["ANTHROPIC_API_KEY"] == "k" and env["ANTHROPIC_BASE_URL"] == "x"
    assert not [k for k in env if k.startswith("SWARMKIT_")]
