"""Gemini CLI (``@google/gemini-cli``) as a harness: ``gemini -p --output-format stream-json``.

How the Agent's grants become Gemini CLI's controls:

* model: ``GOOGLE_GEMINI_BASE_URL`` is the in-pod model proxy and ``GEMINI_API_KEY`` the
  per-Run token (sent as ``x-goog-api-key``; the proxy swaps it for the provider key);
  ``--model`` is the Agent's model, so no call goes to a model the Agent did not name (its
  calls are ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``);
* tools: ``settings.json`` in its HOME names one MCP server, the in-pod gateway over
  streamable HTTP with its bearer, ``trust: true`` (no confirmation prompt: the gateway itself
  enforces grants, tiers and reviews on every call); its tools reach the model as
  ``mcp_<server>_<tool>``; ``--allowed-mcp-server-names`` admits only that server;
* built-in tools: ``tools.exclude`` names every built-in the Agent does not switch on
  (``tools.core`` cannot be used, it hides MCP tools as well); ``--approval-mode default``
  in headless mode never waits for a person (a tool that would ask is refused). With
  built-ins switched on (``harness.builtinTools``), each granted one is asked of the
  runner's decision point (:mod:`.hooks`) by the ``BeforeTool`` command hook
  (``hook_command``, matching exactly the granted built-ins), and a ``--policy`` file lets
  it run only when its arguments carry the per-Run allow value (:func:`allow_value`) that
  only the hook adds, after the decision point allowed the use
  (:func:`.hook_cli.for_gemini`); the same built-in without it is denied. The CLI treats a
  hook that times out, is killed or prints nonsense as no decision (it would run the tool):
  here that use lacks the value, so the policy denies it (fail closed);
* offline: no usage statistics, telemetry, auto-update or update nag; the workspace is
  trusted for the session (``--skip-trust``) so headless mode runs.

Its stream-json events (``init``, ``message``, ``tool_use``, ``tool_result``, ``error``,
``result``) map to a :class:`~.base.HarnessOutcome` in :meth:`GeminiCli.parse_events`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Final

from swarmkit_api.harness import HARNESSES, HarnessInfo

from .base import (
    BASE_PATH,
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
from .hook_cli import ALLOW_KEY

#: The stream-json event types (packages/core/src/output/types.ts).
EVENTS: Final = frozenset({"init", "message", "tool_use", "tool_result", "error", "result"})
#: Gemini CLI's built-in tools by native grant (names as its tool registry has them).
NATIVE_TOOLS: Final = NativeToolNames(
    file_read=("read_file", "read_many_files", "list_directory", "glob", "grep_search"),
    file_write=("write_file", "replace"),
    shell=("run_shell_command",),
    web=("google_web_search", "web_fetch"),
)
#: Built-ins that are never a harness node's: memory, planning, topics, sub-agents, asking.
OTHER_TOOLS: Final = (
    "save_memory",
    "write_todos",
    "update_topic",
    "enter_plan_mode",
    "exit_plan_mode",
    "invoke_agent",
    "ask_user",
    "activate_skill",
)
#: Milliseconds Gemini CLI waits for one MCP tool call (a call waiting for a Review).
MCP_TOOL_TIMEOUT_MS: Final = 3_600_000
#: Milliseconds it waits for the BeforeTool hook (the decision point answers at once: a use
#: that needs a person parks the Run and stops the harness; a hook past this is no allow).
HOOK_TIMEOUT_MS: Final = 600_000
#: Policy priorities (user tier, above the CLI's defaults): an allowed use, the rest.
ALLOWED_PRIORITY: Final = 500
DENIED_PRIORITY: Final = 100


def allow_value(inv: HarnessInvocation) -> str:
    """The per-Run value a built-in's arguments must carry for the policy to let it run
    (derived from the hook's bearer, which the model never sees)."""
    return hmac.new(inv.hook_token.encode(), b"gemini-cli allow", hashlib.sha256).hexdigest()


def policy(inv: HarnessInvocation) -> str:
    """The ``--policy`` TOML: each granted built-in allowed only with :func:`allow_value`
    in its arguments, denied otherwise."""
    pattern = json.dumps(f'"{ALLOW_KEY}":"{allow_value(inv)}"')
    rules = []
    for tool in NATIVE_TOOLS.granted(inv.native):
        name = json.dumps(tool)
        rules.append(
            f"[[rule]]\ntoolName = {name}\nargsPattern = {pattern}\n"
            f'decision = "allow"\npriority = {ALLOWED_PRIORITY}\n'
        )
        rules.append(
            f'[[rule]]\ntoolName = {name}\ndecision = "deny"\npriority = {DENIED_PRIORITY}\n'
        )
    return "\n".join(rules)


@dataclass(frozen=True)
class GeminiCli(Harness):
    """Gemini CLI's controls and events (see the module docstring)."""

    info: HarnessInfo = HARNESSES["gemini-cli"]
    native_names: ClassVar[NativeToolNames | None] = NATIVE_TOOLS

    def settings_path(self, inv: HarnessInvocation) -> Path:
        return inv.home_dir / ".gemini" / "settings.json"

    def policy_path(self, inv: HarnessInvocation) -> Path:
        return inv.home_dir / ".gemini" / "swarmkit-policy.toml"

    @staticmethod
    def hooked(inv: HarnessInvocation) -> bool:
        """Whether built-ins are on, each use asked through the BeforeTool hook."""
        return bool(inv.hook_command) and inv.native.any

    def argv(self, executable: Path, inv: HarnessInvocation) -> list[str]:
        policy_args = ["--policy", str(self.policy_path(inv))] if self.hooked(inv) else []
        return [
            str(executable),
            "--prompt",
            inv.prompt,
            "--output-format",
            "stream-json",
            "--model",
            inv.model,
            "--approval-mode",
            "default",
            "--allowed-mcp-server-names",
            inv.mcp_server_name,
            "--skip-trust",
            *policy_args,
        ]

    def env(self, inv: HarnessInvocation) -> dict[str, str]:
        return {
            "HOME": str(inv.home_dir),
            "PATH": BASE_PATH,
            "TMPDIR": str(inv.home_dir / "tmp"),
            "GOOGLE_GEMINI_BASE_URL": inv.model_proxy_url.rstrip("/"),
            "GEMINI_API_KEY": inv.model_token,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "NO_COLOR": "1",
            "CI": "1",
            **hook_env(inv),
        }

    def files(self, inv: HarnessInvocation) -> dict[Path, str]:
        allowed = NATIVE_TOOLS.granted(inv.native)
        every = (*NATIVE_TOOLS.every, *OTHER_TOOLS)
        settings: dict[str, Any] = {
            "mcpServers": {
                inv.mcp_server_name: {
                    "httpUrl": inv.mcp_url,
                    "headers": {"Authorization": f"Bearer {inv.mcp_token}"},
                    "trust": True,
                    "timeout": MCP_TOOL_TIMEOUT_MS,
                }
            },
            "mcp": {"allowed": [inv.mcp_server_name]},
            # ``tools.core`` would restrict MCP tools too (an empty list hides them all):
            # the built-ins not granted are excluded by name instead.
            "tools": {"exclude": [t for t in every if t not in allowed]},
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }
        files = {}
        if self.hooked(inv):
            hook = {
                "type": "command",
                "command": shlex.join(inv.hook_command),
                "timeout": HOOK_TIMEOUT_MS,
                "env": {"SWARMKIT_HOOK_ALLOW": allow_value(inv)},
            }
            matcher = "^(" + "|".join(allowed) + ")$"
            settings["hooks"] = {"BeforeTool": [{"matcher": matcher, "hooks": [hook]}]}
            settings["hooksConfig"] = {"enabled": True}
            files[self.policy_path(inv)] = policy(inv)
        files[self.settings_path(inv)] = json.dumps(settings, indent=2)
        if inv.system_prompt:  # GEMINI.md in the work dir is its project context file
            files[inv.work_dir / "GEMINI.md"] = inv.system_prompt + "\n"
        return files

    def parse_events(self, lines: Iterable[str]) -> HarnessOutcome:
        return _Reader().read(lines)


class _Reader:
    """Folds Gemini CLI's stream-json events into an outcome."""

    def __init__(self) -> None:
        self.calls: dict[str, HarnessToolCall] = {}
        self.unmapped: list[str] = []
        self.text: list[str] = []
        self.session = ""
        self.errors: list[str] = []
        self.result: dict[str, Any] | None = None
        self.turns = 0

    def read(self, lines: Iterable[str]) -> HarnessOutcome:
        for event in json_lines(lines):
            self._event(event)
        outcome = HarnessOutcome(
            final_text="".join(self.text).strip(),
            tool_calls=tuple(self.calls.values()),
            session_id=self.session,
            unmapped=tuple(self.unmapped),
            finished=self.result is not None,
            extra={"errors": self.errors} if self.errors else {},
        )
        if self.result is None:
            return _failed(outcome, "Gemini CLI ended without a result event")
        stats = self.result.get("stats") if isinstance(self.result.get("stats"), dict) else {}
        cached = int((stats or {}).get("cached") or 0)
        outcome = replace(
            outcome,
            usage=HarnessUsage(
                input_tokens=int((stats or {}).get("input_tokens") or 0) - cached,
                output_tokens=int((stats or {}).get("output_tokens") or 0),
                cache_read_tokens=cached,
            ),
            turns=self.turns,
        )
        if self.result.get("status") != "success":
            error = self.result.get("error") if isinstance(self.result.get("error"), dict) else {}
            detail = str((error or {}).get("message") or "; ".join(self.errors) or "no detail")
            return _failed(outcome, f"Gemini CLI ended with an error: {detail}")
        return outcome

    def _event(self, event: dict[str, Any]) -> None:
        kind = str(event.get("type", ""))
        if kind not in EVENTS:
            self.unmapped.append(kind)
        elif kind == "init":
            self.session = str(event.get("session_id") or "")
        elif kind == "message" and event.get("role") == "assistant":
            if not event.get("delta") or not self.text:
                self.turns += 1
            self.text.append(str(event.get("content") or ""))
        elif kind == "tool_use":
            self.text = []  # the final answer is what it says after its last tool call
            name = str(event.get("tool_name") or "")
            args = event.get("parameters") if isinstance(event.get("parameters"), dict) else {}
            call_id = str(event.get("tool_id") or "")
            server = _mcp_server(name)
            self.calls[call_id] = HarnessToolCall(call_id, name, args or {}, server=server)
        elif kind == "tool_result":
            self._result(event)
        elif kind == "error":
            self.errors.append(
                f"{event.get('severity', 'error')}: {event.get('message', '')}"[:500]
            )
        elif kind == "result":
            self.result = event

    def _result(self, event: dict[str, Any]) -> None:
        call = self.calls.get(str(event.get("tool_id") or ""))
        if call is None:
            self.unmapped.append("tool_result/unknown-tool_id")
            return
        failed = event.get("status") != "success"
        error = event.get("error") if isinstance(event.get("error"), dict) else {}
        output = (
            str((error or {}).get("message") or "") if failed else str(event.get("output") or "")
        )
        self.calls[call.call_id] = replace(call, result=output, is_error=failed)


def _mcp_server(name: str) -> str | None:
    """``mcp_<server>_<tool>`` → server (None for a built-in tool; the gateway's server
    name, ``swarmkit``, has no ``_``)."""
    if not name.startswith("mcp_"):
        return None
    rest = name[len("mcp_") :]
    server, _, _ = rest.partition("_")
    return server or None


def _failed(outcome: HarnessOutcome, message: str) -> HarnessOutcome:
    return replace(outcome, error_reason=REASON_HARNESS_FAILED, error_message=message[:1000])


__all__ = ["NATIVE_TOOLS", "GeminiCli", "allow_value", "policy"]
