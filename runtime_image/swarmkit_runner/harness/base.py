"""The interface every harness plugs into: how to start it, and what its events mean.

A harness node runs a coding harness CLI (Claude Code, Codex, Gemini CLI) as a subprocess of
the runner, in the Run's pod (:mod:`.node` drives it). The runner gives it a
:class:`HarnessInvocation`: its prompt, a writable work dir and HOME (``emptyDir``), the
granted skills laid out where it looks for them, the in-pod governed MCP gateway (URL and a
per-Run bearer) and the in-pod model proxy (URL and a per-Run token: the harness never holds
the provider key), which native tools the Agent allows, and the command its pre-tool-use
hook runs to ask the runner's decision point. A :class:`Harness` turns that into argv, env
and the config files it reads, and maps the JSON lines it prints into a
:class:`HarnessOutcome` (final answer, tool calls, usage, or the reason it failed).

What a harness *is* (npm package, pinned version, wire format, the capabilities its
conformance test showed) is :data:`swarmkit_api.harness.HARNESSES`; one module per kind here
(``claude_code.py``, ``codex.py``, ``gemini_cli.py``) subclasses :class:`Harness` and is
registered in :mod:`swarmkit_runner.harness` (``HARNESS_MODULES``). Each has a conformance
test (``tests/unit/harness/test_<kind>_conformance.py``) that runs the pinned CLI against
the scripted model server and fails when its events no longer map (:attr:`unmapped`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from swarmkit_api.conditions import (
    REASON_HARNESS_ASKED_QUESTION,
    REASON_HARNESS_FAILED,
    REASON_HARNESS_TIMED_OUT,
)
from swarmkit_api.harness import HarnessInfo

#: The PATH a harness gets (its own bin directory is put first by :mod:`.node`).
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class NativeGrant:
    """Which of the harness's built-in tools the Agent's ``nativeTools`` switch on.

    Everything else is switched off with the harness's own flags; what is on still asks the
    runner's decision point through the harness's pre-tool-use hook before each use.
    """

    file_read: bool = False
    file_write: bool = False
    shell: bool = False
    web: bool = False

    @property
    def any(self) -> bool:
        return self.file_read or self.file_write or self.shell or self.web

    @classmethod
    def of(cls, classes: Iterable[str]) -> NativeGrant:
        """The grant of these classes (:func:`swarmkit_api.harness.native_classes`)."""
        on = set(classes)
        return cls("file-read" in on, "file-write" in on, "shell" in on, "web" in on)


@dataclass(frozen=True)
class NativeToolNames:
    """A harness's own names for its built-in tools, per native grant (file writing implies
    file reading: an edit needs to see the file)."""

    file_read: tuple[str, ...]
    file_write: tuple[str, ...]
    shell: tuple[str, ...]
    web: tuple[str, ...]

    def granted(self, native: NativeGrant) -> list[str]:
        """The built-in tools ``native`` switches on (an empty list: none at all)."""
        tools: list[str] = []
        if native.file_read or native.file_write:
            tools += self.file_read
        if native.file_write:
            tools += self.file_write
        if native.shell:
            tools += self.shell
        if native.web:
            tools += self.web
        return tools

    @property
    def every(self) -> tuple[str, ...]:
        return (*self.file_read, *self.file_write, *self.shell, *self.web)

    def class_of(self, tool: str) -> str | None:
        """The class (``file-read``, ``file-write``, ``shell``, ``web``) of built-in ``tool``,
        or None when it is none of them (the decision point refuses it)."""
        for name, tools in (
            ("file-read", self.file_read),
            ("file-write", self.file_write),
            ("shell", self.shell),
            ("web", self.web),
        ):
            if tool in tools:
                return name
        return None


@dataclass(frozen=True)
class HarnessInvocation:
    """Everything the runner hands a harness for one node (paths exist and are writable)."""

    prompt: str
    system_prompt: str
    model: str
    #: The harness's cwd (an ``emptyDir``); the only place it may write besides ``home_dir``.
    work_dir: Path
    #: Its HOME: settings, caches, session files (an ``emptyDir``; never the image's).
    home_dir: Path
    #: Where the granted skills were laid out for it (``<work>/.claude/skills``), or None.
    skills_dir: Path | None
    #: The in-pod governed MCP gateway (``http://127.0.0.1:<port>/mcp``) and its bearer.
    mcp_url: str
    mcp_token: str
    #: The in-pod model proxy's base URL and the per-Run token it accepts.
    model_proxy_url: str
    model_token: str
    native: NativeGrant = NativeGrant()
    #: argv of the pre-tool-use hook (reads the hook JSON on stdin, prints the decision),
    #: and the decision point it asks (``http://127.0.0.1:<port>/hook``) with its bearer.
    hook_command: tuple[str, ...] = ()
    hook_url: str = ""
    hook_token: str = ""
    #: Model turns the harness may take (the Agent's maxSteps, capped by governance).
    max_turns: int = 50
    #: The name the gateway has in the harness's MCP config (tools appear as
    #: ``mcp__<server>__<tool>`` in Claude Code).
    mcp_server_name: str = "swarmkit"


@dataclass(frozen=True)
class HarnessToolCall:
    """One tool call the harness reported (built-in or MCP), with its result when seen."""

    call_id: str
    name: str
    arguments: Mapping[str, Any]
    result: str = ""
    is_error: bool = False
    #: The MCP server it went to (None for a built-in tool).
    server: str | None = None


@dataclass(frozen=True)
class HarnessUsage:
    """Token usage as the harness reports it (the model proxy's meter is what is charged)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class HarnessOutcome:
    """What one harness process did, mapped from its event lines."""

    final_text: str = ""
    tool_calls: tuple[HarnessToolCall, ...] = ()
    usage: HarnessUsage = HarnessUsage()
    #: None on success, else one of the ``REASON_HARNESS_*`` constants.
    error_reason: str | None = None
    error_message: str = ""
    session_id: str = ""
    #: Model turns the harness counted.
    turns: int = 0
    #: Event types (``type`` or ``type/subtype``) the mapping did not know. The conformance
    #: test fails on any: a new CLI version whose events changed must not pass silently.
    unmapped: tuple[str, ...] = ()
    #: Whether the events reached their final (result) event.
    finished: bool = False
    #: A question the harness asked a person (an interactive prompt), if it did.
    question: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def json_lines(lines: Iterable[str]) -> Iterable[dict[str, Any]]:
    """The JSON objects among ``lines`` (a harness may print other diagnostics)."""
    for line in lines:
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


#: The env vars the hook command reads the decision point's URL and bearer from.
HOOK_URL_ENV = "SWARMKIT_HOOK_URL"
HOOK_TOKEN_ENV = "SWARMKIT_HOOK_TOKEN"


def hook_env(inv: HarnessInvocation) -> dict[str, str]:
    """What a harness's environment adds for its hook command (nothing without one)."""
    if not inv.hook_command or not inv.native.any:
        return {}
    return {HOOK_URL_ENV: inv.hook_url, HOOK_TOKEN_ENV: inv.hook_token}


class Harness(ABC):
    """One harness kind: how to start it and how to read its events (stateless)."""

    #: Its row of :data:`swarmkit_api.harness.HARNESSES`.
    info: HarnessInfo
    #: Its own names for its built-in tools (None: it has no hook wired, so none is ever
    #: switched on; admission refuses ``builtinTools`` by its capabilities first).
    native_names: ClassVar[NativeToolNames | None] = None

    def executable(self, install_dir: Path) -> Path:
        """The CLI inside an npm install (``<dir>/node_modules/.bin/<bin>``)."""
        return install_dir / "node_modules" / ".bin" / self.info.bin

    @abstractmethod
    def argv(self, executable: Path, inv: HarnessInvocation) -> list[str]:
        """The full command line: non-interactive, machine-readable events on stdout."""

    @abstractmethod
    def env(self, inv: HarnessInvocation) -> dict[str, str]:
        """Its whole environment (nothing of the runner's is inherited): HOME, the model
        proxy URL and token, and switches that keep it offline (no telemetry, no updates)."""

    @abstractmethod
    def files(self, inv: HarnessInvocation) -> dict[Path, str]:
        """Config files to write before it starts (MCP config, settings with the hook)."""

    @abstractmethod
    def parse_events(self, lines: Iterable[str]) -> HarnessOutcome:
        """Map its stdout lines to an outcome (pure; unknown event types in ``unmapped``)."""


__all__ = [
    "BASE_PATH",
    "REASON_HARNESS_ASKED_QUESTION",
    "REASON_HARNESS_FAILED",
    "REASON_HARNESS_TIMED_OUT",
    "Harness",
    "HarnessInvocation",
    "HarnessOutcome",
    "HarnessToolCall",
    "HarnessUsage",
    "NativeGrant",
    "NativeToolNames",
    "hook_env",
    "json_lines",
]
