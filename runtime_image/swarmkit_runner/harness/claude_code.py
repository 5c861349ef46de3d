"""Claude Code (``@anthropic-ai/claude-code``) as a harness: ``claude -p``, stream-json events.

How the Agent's grants become Claude Code's controls:

* model: ``ANTHROPIC_BASE_URL`` is the in-pod model proxy, ``ANTHROPIC_API_KEY`` the per-Run
  token (the proxy swaps it for the provider key); ``ANTHROPIC_MODEL`` and the small/fast model
  are both the Agent's model, so no call goes to a model the Agent did not name;
* tools: ``--mcp-config`` names only the in-pod gateway and ``--strict-mcp-config`` ignores
  every other MCP source; its tools are pre-allowed (``--allowedTools mcp__swarmkit``) because
  the gateway itself enforces grants, tiers and reviews on every call;
* built-in tools: ``--tools`` lists only the ones the Agent's ``nativeTools`` switch on
  (``fileIo`` → Read, Glob, Grep, Edit, Write; ``bash`` → Bash; ``webSearch`` → WebSearch,
  WebFetch); ``""`` switches every built-in off, AskUserQuestion included (a harness node has
  nobody to ask: a question ends it ``HarnessAskedQuestion``);
* ``--permission-mode dontAsk --permission-prompts none`` never waits for a person at a
  terminal: what is not allowed is denied. With built-ins switched on, none of them is in
  ``--allowedTools``: the ``PreToolUse`` command hook (``--settings``, matching exactly the
  granted built-ins) runs ``hook_command`` before each use, which asks the runner's
  decision point (:mod:`.hooks`) and answers ``allow`` or ``deny``; a use the hook did not
  allow is denied by ``dontAsk`` (fail closed);
* offline: no auto-update, telemetry, error reporting or other non-essential traffic.

Its stream-json events (``system``/``init``, ``assistant``, ``user``, ``result``, …) map to a
:class:`~.base.HarnessOutcome` in :meth:`ClaudeCode.parse_events`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Final

from swarmkit_api.harness import HARNESSES, HarnessInfo

from .base import (
    BASE_PATH,
    REASON_HARNESS_ASKED_QUESTION,
    REASON_HARNESS_FAILED,
    Harness,
    HarnessInvocation,
    HarnessOutcome,
    HarnessToolCall,
    HarnessUsage,
    NativeToolNames,
    hook_env,
    json_lines,
)

#: Built-in tools per native grant.
NATIVE_TOOLS: Final = NativeToolNames(
    file_read=("Read", "Glob", "Grep"),
    file_write=("Edit", "Write", "NotebookEdit"),
    shell=("Bash",),
    web=("WebSearch", "WebFetch"),
)
#: The tool Claude Code uses to ask its user a question.
QUESTION_TOOL: Final = "AskUserQuestion"
#: Event types that carry nothing the outcome needs (known, deliberately ignored).
IGNORED_EVENTS: Final = frozenset(
    {
        "system/init",
        "system/status",
        "system/compact_boundary",
        "system/hook_started",
        "system/hook_progress",
        "system/hook_response",
        "system/api_retry",
        "system/task_started",
        "system/task_progress",
        "system/task_notification",
        "system/files_persisted",
        "stream_event",
        "rate_limit_event",
        "tool_progress",
        "tool_use_summary",
        "auth_status",
        "prompt_suggestion",
    }
)
#: Seconds Claude Code waits for its PreToolUse hook (the decision point answers at once:
#: a use that needs a person parks the Run and stops the harness).
HOOK_TIMEOUT_S: Final = 600
#: Seconds Claude Code waits for one MCP tool call (a call waiting for a Review may be long).
MCP_TOOL_TIMEOUT_MS: Final = 3_600_000


def _text_of(content: Any) -> str:
    """A tool result's text (a string or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _mcp_server(name: str) -> str | None:
    """``mcp__<server>__<tool>`` → server (None for a built-in tool)."""
    if not name.startswith("mcp__"):
        return None
    return name[len("mcp__") :].split("__", 1)[0]


@dataclass(frozen=True)
class ClaudeCode(Harness):
    """Claude Code's controls and events (see the module docstring)."""

    info: HarnessInfo = HARNESSES["claude-code"]
    native_names: ClassVar[NativeToolNames | None] = NATIVE_TOOLS

    def settings_path(self, inv: HarnessInvocation) -> Path:
        return inv.home_dir / "swarmkit-settings.json"

    def mcp_config_path(self, inv: HarnessInvocation) -> Path:
        return inv.home_dir / "swarmkit-mcp.json"

    def argv(self, executable: Path, inv: HarnessInvocation) -> list[str]:
        argv = [
            str(executable),
            "--print",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            inv.model,
            "--max-turns",
            str(inv.max_turns),
            "--mcp-config",
            str(self.mcp_config_path(inv)),
            "--strict-mcp-config",
            "--settings",
            str(self.settings_path(inv)),
            "--permission-mode",
            "dontAsk",
            "--permission-prompts",
            "none",
            "--tools",
            ",".join(NATIVE_TOOLS.granted(inv.native)),
            "--allowedTools",
            f"mcp__{inv.mcp_server_name}",
            "--no-session-persistence",
        ]
        if inv.system_prompt:
            argv += ["--append-system-prompt", inv.system_prompt]
        return [*argv, "--", inv.prompt]

    def env(self, inv: HarnessInvocation) -> dict[str, str]:
        return {
            "HOME": str(inv.home_dir),
            "CLAUDE_CONFIG_DIR": str(inv.home_dir / ".claude"),
            "PATH": BASE_PATH,
            "TMPDIR": str(inv.home_dir / "tmp"),
            "ANTHROPIC_BASE_URL": inv.model_proxy_url,
            "ANTHROPIC_API_KEY": inv.model_token,
            "ANTHROPIC_MODEL": inv.model,
            "ANTHROPIC_SMALL_FAST_MODEL": inv.model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": inv.model,
            "CLAUDE_CODE_SUBAGENT_MODEL": inv.model,
            "MCP_TOOL_TIMEOUT": str(MCP_TOOL_TIMEOUT_MS),
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_BUG_COMMAND": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
            "IS_SANDBOX": "1",
            "CI": "1",
            **hook_env(inv),
        }

    def files(self, inv: HarnessInvocation) -> dict[Path, str]:
        mcp = {
            "mcpServers": {
                inv.mcp_server_name: {
                    "type": "http",
                    "url": inv.mcp_url,
                    "headers": {"Authorization": f"Bearer {inv.mcp_token}"},
                }
            }
        }
        settings: dict[str, Any] = {
            "permissions": {"defaultMode": "dontAsk"},
            "includeCoAuthoredBy": False,
            "cleanupPeriodDays": 1,
        }
        if inv.hook_command and inv.native.any:
            settings["hooks"] = {
                "PreToolUse": [
                    {
                        "matcher": "|".join(NATIVE_TOOLS.granted(inv.native)),
                        "hooks": [
                            {
                                "type": "command",
                                "command": shlex.join(inv.hook_command),
                                "timeout": HOOK_TIMEOUT_S,
                            }
                        ],
                    }
                ]
            }
        return {
            self.mcp_config_path(inv): json.dumps(mcp, indent=2),
            self.settings_path(inv): json.dumps(settings, indent=2),
        }

    def parse_events(self, lines: Iterable[str]) -> HarnessOutcome:
        return _Reader().read(lines)


class _Reader:
    """Folds Claude Code's stream-json events into an outcome."""

    def __init__(self) -> None:
        self.calls: dict[str, HarnessToolCall] = {}
        self.order: list[str] = []
        self.unmapped: list[str] = []
        self.last_text = ""
        self.question: str | None = None

    def read(self, lines: Iterable[str]) -> HarnessOutcome:
        result: dict[str, Any] | None = None
        session = ""
        for event in json_lines(lines):
            kind = str(event.get("type", ""))
            subtype = event.get("subtype")
            key = f"{kind}/{subtype}" if subtype else kind
            session = str(event.get("session_id") or session)
            if kind == "assistant":
                self._assistant(event.get("message") or {})
            elif kind == "user":
                self._user(event.get("message") or {})
            elif kind == "result":
                result = event
            elif key not in IGNORED_EVENTS and kind not in IGNORED_EVENTS:
                self.unmapped.append(key)
        calls = tuple(self.calls[i] for i in self.order)
        if result is None:
            return HarnessOutcome(
                tool_calls=calls,
                error_reason=REASON_HARNESS_FAILED,
                error_message="Claude Code ended without a result event",
                session_id=session,
                unmapped=tuple(self.unmapped),
                question=self.question,
            )
        usage = result.get("usage") or {}
        outcome = HarnessOutcome(
            final_text=str(result.get("result") or ""),
            tool_calls=calls,
            usage=HarnessUsage(
                input_tokens=int(usage.get("input_tokens") or 0),
                output_tokens=int(usage.get("output_tokens") or 0),
                cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
                cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0),
            ),
            session_id=session,
            turns=int(result.get("num_turns") or 0),
            unmapped=tuple(self.unmapped),
            finished=True,
            question=self.question,
            extra={"permission_denials": result.get("permission_denials") or []},
        )
        if self.question is not None:
            return _failed(outcome, REASON_HARNESS_ASKED_QUESTION, f"it asked: {self.question}")
        if result.get("subtype") != "success" or result.get("is_error"):
            errors = result.get("errors") or []
            detail = "; ".join(str(e) for e in errors) or str(result.get("result") or "")
            how = "with an error" if result.get("subtype") == "success" else result.get("subtype")
            return _failed(
                outcome, REASON_HARNESS_FAILED, f"Claude Code ended {how}: {detail}".rstrip(": ")
            )
        return outcome

    def _assistant(self, message: dict[str, Any]) -> None:
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                self.last_text = str(block.get("text", ""))
            elif block.get("type") == "tool_use":
                name = str(block.get("name", ""))
                call_id = str(block.get("id", ""))
                raw = block.get("input")
                args: dict[str, Any] = raw if isinstance(raw, dict) else {}
                if name == QUESTION_TOOL:
                    self.question = json.dumps(args)[:1000]
                self.calls[call_id] = HarnessToolCall(call_id, name, args, server=_mcp_server(name))
                self.order.append(call_id)

    def _user(self, message: dict[str, Any]) -> None:
        content = message.get("content")
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call = self.calls.get(str(block.get("tool_use_id", "")))
            if call is None:
                continue
            self.calls[call.call_id] = HarnessToolCall(
                call.call_id,
                call.name,
                call.arguments,
                result=_text_of(block.get("content")),
                is_error=bool(block.get("is_error")),
                server=call.server,
            )


def _failed(outcome: HarnessOutcome, reason: str, message: str) -> HarnessOutcome:
    return replace(outcome, error_reason=reason, error_message=message[:1000])


__all__ = ["NATIVE_TOOLS", "ClaudeCode"]
