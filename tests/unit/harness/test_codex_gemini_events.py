"""Codex's and Gemini CLI's event lines map to outcomes (pure; the lines are as the pinned
CLIs printed them in their conformance runs): an unknown event or item type is reported,
never skipped; a failed turn, a question and a missing final event each end the node with
their own reason."""

from __future__ import annotations

import json

from swarmkit_runner.harness.codex import Codex
from swarmkit_runner.harness.gemini_cli import GeminiCli

CODEX_RUN = [
    {"type": "thread.started", "thread_id": "t-1"},
    {"type": "turn.started"},
    {
        "type": "item.completed",
        "item": {
            "id": "item_0",
            "type": "mcp_tool_call",
            "server": "swarmkit",
            "tool": "echo",
            "arguments": {"text": "hi"},
            "result": {"content": [{"type": "text", "text": "hi"}], "structured_content": None},
            "error": None,
            "status": "completed",
        },
    },
    {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "done"}},
    {
        "type": "turn.completed",
        "usage": {"input_tokens": 30, "cached_input_tokens": 10, "output_tokens": 15},
    },
]


def lines(events: list[dict[str, object]]) -> list[str]:
    return ["Reading additional input from stdin...", *(json.dumps(e) for e in events)]


def test_a_codex_run_maps_to_its_answer_call_and_usage() -> None:
    outcome = Codex().parse_events(lines(CODEX_RUN))
    assert outcome.error_reason is None and outcome.finished and outcome.unmapped == ()
    assert outcome.final_text == "done" and outcome.session_id == "t-1"
    (call,) = outcome.tool_calls
    assert (call.name, call.server, call.result, call.is_error) == (
        "mcp__swarmkit__echo",
        "swarmkit",
        "hi",
        False,
    )
    assert (outcome.usage.input_tokens, outcome.usage.cache_read_tokens) == (20, 10)
    assert outcome.usage.output_tokens == 15


def test_codex_unknown_events_failures_and_questions() -> None:
    new = [*CODEX_RUN, {"type": "turn.paused"}, {"type": "item.completed", "item": {"type": "x"}}]
    assert Codex().parse_events(lines(new)).unmapped == ("turn.paused", "item/x")
    failed = [CODEX_RUN[0], {"type": "turn.failed", "error": {"message": "HTTP 400: retired"}}]
    outcome = Codex().parse_events(lines(failed))
    assert outcome.error_reason == "HarnessFailed" and "retired" in outcome.error_message
    question = {"question": "Which branch?"}
    ask = {"type": "request_user_input", "id": "t", "call_id": "c", "questions": [question]}
    asked = [*CODEX_RUN[:2], ask]
    assert Codex().parse_events(lines(asked)).error_reason == "HarnessAskedQuestion"
    assert Codex().parse_events(lines(CODEX_RUN[:3])).error_reason == "HarnessFailed"


GEMINI_RUN = [
    {"type": "init", "session_id": "s-1", "model": "gemini-2.5-flash"},
    {"type": "message", "role": "user", "content": "hi"},
    {"type": "message", "role": "assistant", "content": "Let me call it.", "delta": True},
    {
        "type": "tool_use",
        "tool_name": "mcp_swarmkit_echo",
        "tool_id": "e1",
        "parameters": {"text": "hi"},
    },
    {"type": "tool_result", "tool_id": "e1", "status": "success", "output": "hi"},
    {"type": "message", "role": "assistant", "content": "The tool ", "delta": True},
    {"type": "message", "role": "assistant", "content": "said hi", "delta": True},
    {
        "type": "result",
        "status": "success",
        "stats": {"input_tokens": 30, "output_tokens": 15, "cached": 4, "tool_calls": 1},
    },
]


def test_a_gemini_run_maps_to_its_answer_call_and_usage() -> None:
    outcome = GeminiCli().parse_events(lines(GEMINI_RUN))
    assert outcome.error_reason is None and outcome.finished and outcome.unmapped == ()
    assert outcome.final_text == "The tool said hi" and outcome.session_id == "s-1"
    (call,) = outcome.tool_calls
    assert (call.name, call.server, call.result) == ("mcp_swarmkit_echo", "swarmkit", "hi")
    assert (outcome.usage.input_tokens, outcome.usage.cache_read_tokens) == (26, 4)


def test_gemini_unknown_events_and_failures() -> None:
    new = [*GEMINI_RUN[:-1], {"type": "thought", "content": "hmm"}, GEMINI_RUN[-1]]
    assert GeminiCli().parse_events(lines(new)).unmapped == ("thought",)
    error = {"type": "FatalAuthenticationError", "message": "bad key"}
    failed = [*GEMINI_RUN[:2], {"type": "result", "status": "error", "error": error}]
    outcome = GeminiCli().parse_events(lines(failed))
    assert outcome.error_reason == "HarnessFailed" and "bad key" in outcome.error_message
    assert GeminiCli().parse_events(lines(GEMINI_RUN[:-1])).error_reason == "HarnessFailed"
