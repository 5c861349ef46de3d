"""Codex (``@openai/codex``) as a harness: ``codex exec --json``, the OpenAI Responses API.

How the Agent's grants become Codex's controls (every setting is a ``-c key=value`` override
on the command line, which wins over config files; ``--ignore-user-config`` skips
``$CODEX_HOME/config.toml`` and ``--ignore-rules`` the execpolicy rules):

* model: a ``model_providers.swarmkit`` entry whose ``base_url`` is the in-pod model proxy
  (``wire_api = "responses"``) and whose key is read from ``SWARMKIT_MODEL_TOKEN`` (the
  per-Run token; the proxy swaps it for the provider key); ``model`` is the Agent's model;
* tools: one MCP server, the in-pod gateway over streamable HTTP with its bearer in
  ``SWARMKIT_MCP_TOKEN``; ``required`` makes Codex wait for it before the first turn, and
  ``default_tools_approval_mode = "approve"`` lets its calls through without a person at a
  terminal because the gateway itself enforces grants, tiers and reviews on every call.
  Codex 0.169 defers MCP tools: the model finds them with its ``tool_search`` tool and calls
  them as ``mcp__<server>.<tool>``;
* built-in tools: all off (``features.shell_tool``, ``unified_exec``, ``view_image``,
  ``web_search``, multi-agent, goals), ``--sandbox read-only`` and
  ``approval_policy = "never"``: Codex never waits for an approval. With built-ins switched
  on (``bash``: its shell), ``features.shell_tool`` and ``features.hooks`` are on, the
  sandbox is ``workspace-write``, and ``$CODEX_HOME/hooks.json`` holds a ``PreToolUse``
  command hook matching every built-in (``Bash`` is its ``exec_command``, and
  ``apply_patch``, which 0.169.1 offers whatever the config says): each use asks the
  runner's decision point (:mod:`.hooks`). ``--dangerously-bypass-hook-trust`` runs that
  hook, the runner's own, without a persisted trust record (unreviewed hooks are skipped);
* offline: no plugins sync (on, it runs ``git ls-remote`` against github.com at start-up),
  no analytics or feedback upload, no update check, no session files (``--ephemeral``).

Its JSONL events (``thread.*``, ``turn.*``, ``item.*``, ``error``) map to a
:class:`~.base.HarnessOutcome` in :meth:`Codex.parse_events`; an event or item type not in
:data:`EVENTS` / :data:`ITEMS` is reported in ``unmapped``.
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

#: The env vars Codex reads the per-Run tokens from (named in its config, never on argv).
MODEL_TOKEN_ENV: Final = "SWARMKIT_MODEL_TOKEN"
MCP_TOKEN_ENV: Final = "SWARMKIT_MCP_TOKEN"
#: The provider id the model proxy has in Codex's config.
PROVIDER_ID: Final = "swarmkit"
#: Seconds Codex waits for one MCP tool call (a call waiting for a Review may be long).
MCP_TOOL_TIMEOUT_S: Final = 3600
#: Codex's built-in tools as its PreToolUse hook names them: ``exec_command`` is ``Bash``,
#: ``apply_patch`` itself. It has no tool that only reads (it reads through its shell), so it
#: shows no ``native-file-read`` and admission refuses ``fileIo`` as a built-in for it.
NATIVE_TOOLS: Final = NativeToolNames(
    file_read=(), file_write=("apply_patch",), shell=("Bash",), web=()
)
#: The hooks file it reads from ``CODEX_HOME`` (``--ignore-user-config`` skips only
#: ``config.toml``).
HOOKS_FILE: Final = "hooks.json"
#: Seconds Codex waits for the hook (the decision point answers at once; see hooks.py).
HOOK_TIMEOUT_S: Final = 600
#: Top-level event types of ``codex exec --json`` (exec_events.rs).
EVENTS: Final = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "item.plan.delta",
        "request_user_input",
        "error",
    }
)
#: Thread item types it reports (``item.type``).
ITEMS: Final = frozenset(
    {
        "agent_message",
        "plan",
        "reasoning",
        "command_execution",
        "file_change",
        "mcp_tool_call",
        "collab_tool_call",
        "web_search",
        "todo_list",
        "error",
    }
)
#: Features switched off: built-in tools and anything that reaches the network on its own.
FEATURES_OFF: Final = (
    "shell_tool",
    "unified_exec",
    "view_image",
    "multi_agent",
    "goals",
    "plugins",
    "apps",
    "memories",
    "image_generation",
    "browser_use",
    "computer_use",
    "tool_suggest",
    "skill_mcp_dependency_install",
)


def _toml(value: object) -> str:
    """A TOML value for ``-c`` (JSON strings, arrays and booleans are valid TOML)."""
    return json.dumps(value)


@dataclass(frozen=True)
class Codex(Harness):
    """Codex's controls and events (see the module docstring)."""

    info: HarnessInfo = HARNESSES["codex"]
    native_names: ClassVar[NativeToolNames | None] = NATIVE_TOOLS

    @staticmethod
    def hooked(inv: HarnessInvocation) -> bool:
        """Whether built-ins are on, each use asked through the PreToolUse hook."""
        return bool(inv.hook_command) and inv.native.any

    def overrides(self, inv: HarnessInvocation) -> list[tuple[str, object]]:
        """The ``-c`` overrides (key, value) in the order they are passed."""
        server = f"mcp_servers.{inv.mcp_server_name}"
        provider = f"model_providers.{PROVIDER_ID}"
        settings: list[tuple[str, object]] = [
            ("model", inv.model),
            ("model_provider", PROVIDER_ID),
            (f"{provider}.name", "SwarmKit model proxy"),
            (f"{provider}.base_url", f"{inv.model_proxy_url.rstrip('/')}/v1"),
            (f"{provider}.env_key", MODEL_TOKEN_ENV),
            (f"{provider}.wire_api", "responses"),
            (f"{server}.url", inv.mcp_url),
            (f"{server}.bearer_token_env_var", MCP_TOKEN_ENV),
            (f"{server}.required", True),
            (f"{server}.default_tools_approval_mode", "approve"),
            (f"{server}.tool_timeout_sec", MCP_TOOL_TIMEOUT_S),
            ("approval_policy", "never"),
            ("web_search", "disabled"),
            ("check_for_update_on_startup", False),
            ("analytics.enabled", False),
            ("feedback.enabled", False),
        ]
        shell = self.hooked(inv) and inv.native.shell
        settings += [(f"features.{name}", shell and name == "shell_tool") for name in FEATURES_OFF]
        if self.hooked(inv):
            settings.append(("features.hooks", True))
        if inv.system_prompt:
            settings.append(("developer_instructions", inv.system_prompt))
        return settings

    def argv(self, executable: Path, inv: HarnessInvocation) -> list[str]:
        argv = [
            str(executable),
            "exec",
            "--json",
            "--ephemeral",
            "--skip-git-repo-check",
            "--ignore-user-config",
            "--ignore-rules",
            "--sandbox",
            self.sandbox(inv),
            "--cd",
            str(inv.work_dir),
        ]
        if self.hooked(inv):
            # The one hook is the runner's own (written by files() into CODEX_HOME, an
            # emptyDir): there is no person to review it at start-up.
            argv.append("--dangerously-bypass-hook-trust")
        for key, value in self.overrides(inv):
            argv += ["-c", f"{key}={_toml(value)}"]
        return [*argv, "--", inv.prompt]

    def sandbox(self, inv: HarnessInvocation) -> str:
        """``workspace-write`` (its cwd and TMPDIR, no network) once an allowed shell or
        patch may write; otherwise ``read-only``."""
        writes = self.hooked(inv) and (inv.native.shell or inv.native.file_write)
        return "workspace-write" if writes else "read-only"

    def env(self, inv: HarnessInvocation) -> dict[str, str]:
        return {
            "HOME": str(inv.home_dir),
            "CODEX_HOME": str(inv.home_dir / ".codex"),
            "PATH": BASE_PATH,
            "TMPDIR": str(inv.home_dir / "tmp"),
            MODEL_TOKEN_ENV: inv.model_token,
            MCP_TOKEN_ENV: inv.mcp_token,
            "NO_COLOR": "1",
            **hook_env(inv),
        }

    def files(self, inv: HarnessInvocation) -> dict[Path, str]:
        # CODEX_HOME must exist; its config.toml is not read (--ignore-user-config).
        home = inv.home_dir / ".codex"
        files = {home / "README": "config comes from the command line\n"}
        if self.hooked(inv):
            # Every built-in is matched, granted or not (apply_patch is offered whatever the
            # config says): one not switched on is refused by the decision point.
            hook = {
                "type": "command",
                "command": shlex.join(inv.hook_command),
                "timeout": HOOK_TIMEOUT_S,
            }
            matcher = "^(" + "|".join(NATIVE_TOOLS.every) + ")$"
            hooks = {"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [hook]}]}}
            files[home / HOOKS_FILE] = json.dumps(hooks, indent=2)
        return files

    def parse_events(self, lines: Iterable[str]) -> HarnessOutcome:
        return _Reader().read(lines)


class _Reader:
    """Folds ``codex exec --json`` events into an outcome."""

    def __init__(self) -> None:
        self.calls: dict[str, HarnessToolCall] = {}
        self.unmapped: list[str] = []
        self.final_text = ""
        self.usage = HarnessUsage()
        self.turns = 0
        self.session = ""
        self.failure = ""
        self.question: str | None = None
        self.warnings: list[str] = []
        self.completed = False

    def read(self, lines: Iterable[str]) -> HarnessOutcome:
        for event in json_lines(lines):
            self._event(event)
        outcome = HarnessOutcome(
            final_text=self.final_text,
            tool_calls=tuple(self.calls.values()),
            usage=self.usage,
            session_id=self.session,
            turns=self.turns,
            unmapped=tuple(self.unmapped),
            finished=self.completed,
            question=self.question,
            extra={"warnings": self.warnings} if self.warnings else {},
        )
        if self.question is not None:
            return _failed(outcome, REASON_HARNESS_ASKED_QUESTION, f"it asked: {self.question}")
        if self.failure:
            return _failed(outcome, REASON_HARNESS_FAILED, f"Codex failed: {self.failure}")
        if not self.completed:
            return _failed(outcome, REASON_HARNESS_FAILED, "Codex ended without turn.completed")
        return outcome

    def _event(self, event: dict[str, Any]) -> None:
        kind = str(event.get("type", ""))
        if kind not in EVENTS:
            self.unmapped.append(kind)
        elif kind == "thread.started":
            self.session = str(event.get("thread_id") or "")
        elif kind == "turn.completed":
            self.completed = True
            self.turns += 1
            self._usage(event.get("usage") or {})
        elif kind in ("turn.failed", "error"):
            error = event.get("error") if kind == "turn.failed" else event
            message = str((error or {}).get("message") or "") if isinstance(error, dict) else ""
            self.failure = self.failure or message or kind
        elif kind == "request_user_input":
            self.question = json.dumps(event.get("questions") or [])[:1000]
        elif kind.startswith("item.") and kind != "item.plan.delta":
            item = event.get("item")
            if isinstance(item, dict):
                self._item(item, kind == "item.completed")

    def _usage(self, usage: dict[str, Any]) -> None:
        """One turn's usage (Codex's ``input_tokens`` include the cached ones)."""
        cached = int(usage.get("cached_input_tokens") or 0)
        self.usage = HarnessUsage(
            input_tokens=self.usage.input_tokens + int(usage.get("input_tokens") or 0) - cached,
            output_tokens=self.usage.output_tokens + int(usage.get("output_tokens") or 0),
            cache_read_tokens=self.usage.cache_read_tokens + cached,
            cache_write_tokens=self.usage.cache_write_tokens
            + int(usage.get("cache_write_input_tokens") or 0),
        )

    def _item(self, item: dict[str, Any], done: bool) -> None:
        kind = str(item.get("type", ""))
        if kind not in ITEMS:
            self.unmapped.append(f"item/{kind}")
        elif kind == "agent_message" and done:
            self.final_text = str(item.get("text") or "")
        elif kind == "error":
            self.warnings.append(str(item.get("message") or "")[:500])
        elif kind in ("mcp_tool_call", "command_execution", "web_search", "file_change"):
            call = _call(item)
            self.calls[call.call_id] = call


def _call(item: dict[str, Any]) -> HarnessToolCall:
    """A tool-like item as a call (an MCP tool call with its result or error)."""
    call_id = str(item.get("id", ""))
    kind = str(item.get("type", ""))
    if kind != "mcp_tool_call":
        args = {k: v for k, v in item.items() if k not in ("id", "type", "status")}
        failed = item.get("status") in ("failed", "declined")
        output = str(item.get("aggregated_output") or "")
        return HarnessToolCall(call_id, kind, args, result=output, is_error=failed)
    server = str(item.get("server") or "")
    arguments = item.get("arguments") if isinstance(item.get("arguments"), dict) else {}
    error = item.get("error") if isinstance(item.get("error"), dict) else None
    result = item.get("result") if isinstance(item.get("result"), dict) else {}
    text = "".join(
        str(block.get("text", ""))
        for block in (result or {}).get("content") or []
        if isinstance(block, dict) and block.get("type") == "text"
    )
    return HarnessToolCall(
        call_id,
        f"mcp__{server}__{item.get('tool', '')}",
        arguments or {},
        result=str(error.get("message") or "") if error else text,
        is_error=error is not None or item.get("status") == "failed",
        server=server,
    )


def _failed(outcome: HarnessOutcome, reason: str, message: str) -> HarnessOutcome:
    return replace(outcome, error_reason=reason, error_message=message[:1000])


__all__ = ["NATIVE_TOOLS", "Codex"]
