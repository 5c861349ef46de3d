"""Harness nodes: a coding harness CLI (Claude Code, Codex, Gemini CLI) as a Topology node.

One table, :data:`HARNESSES`, says per harness kind which npm package at which pinned
version the images install, which model wire format it speaks (its model calls go to the
runner's model proxy, which forwards them to the Workspace provider unchanged: the provider
must speak that format) and which capabilities its conformance test
(``tests/unit/harness/test_<kind>_conformance.py``, the real pinned CLI) has shown. The
operator refuses at admission a harness node whose provider speaks another format or that
needs a capability the table does not list; the runner builds the harness's command line
from the same table (``swarmkit_runner.harness``). ``hack/harness-clis/package.json`` and
its lockfile install exactly these versions (a unit test fails when they differ).

This module imports nothing but pydantic and this package: the operator (admission) and
the runner (execution) both read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, get_args

from pydantic import Field

from .base import ApiModel
from .common import Effects, PermissionTier

if TYPE_CHECKING:
    from .agent import AgentSpec
    from .model_provider import ModelProvider

HarnessKind = Literal["claude-code", "codex", "gemini-cli"]
HARNESS_KINDS: Final[tuple[str, ...]] = get_args(HarnessKind)

WireFormat = Literal[
    "anthropic-messages",
    "openai-chat-completions",
    "openai-responses",
    "gemini-generate-content",
    "bedrock-converse",
    "replay",
]

#: The wire formats each model provider type speaks (what the model proxy forwards to).
PROVIDER_WIRE_FORMATS: Final[dict[str, tuple[WireFormat, ...]]] = {
    "anthropic": ("anthropic-messages",),
    "openai": ("openai-chat-completions", "openai-responses"),
    "azure-openai": ("openai-chat-completions",),
    "gemini": ("gemini-generate-content",),
    "bedrock": ("bedrock-converse",),
    "replay": ("replay",),
}
#: The wire formats the runner's model proxy forwards (``swarmkit_runner.harness.proxy``
#: has one dialect per entry): a harness speaking another cannot run yet.
PROXIED_WIRE_FORMATS: Final[tuple[WireFormat, ...]] = (
    "anthropic-messages",
    "openai-responses",
    "gemini-generate-content",
)

Capability = Literal[
    "final-answer",  # its events carry the final answer (always needed)
    "usage",  # its events carry token usage (cross-checked with the proxy's meter)
    "mcp-tools",  # it calls the in-pod gateway's MCP tools and reports the calls
    "skills",  # it reads the granted skills laid out where it looks for them
    "tool-hook",  # its pre-tool-use hook asks the runner before a built-in tool runs
    "native-file-read",  # built-in file reading (Agent nativeTools.fileIo)
    "native-file-write",  # built-in file edits (Agent nativeTools.fileIo)
    "native-shell",  # built-in shell (Agent nativeTools.bash)
    "native-web",  # built-in web search/fetch (Agent nativeTools.webSearch)
]
CAPABILITIES: Final[tuple[str, ...]] = get_args(Capability)

NativeClass = Literal["file-read", "file-write", "shell", "web"]
#: The effects of a harness built-in tool per class, as its hook asks the runner's decision
#: point: the tier of ``harness.builtinToolsPermission`` applies to them as to any tool's
#: (``readonly`` allows only ``read``). A shell can do anything: its effects are unknown.
NATIVE_EFFECTS: Final[dict[str, Effects]] = {
    "file-read": "read",
    "file-write": "write",
    "shell": "unknown",
    "web": "read",
}


@dataclass(frozen=True)
class HarnessInfo:
    """What the platform knows about one harness kind (one row of :data:`HARNESSES`)."""

    kind: str
    #: The npm package the images install, and its pinned version (exact, never a range).
    npm_package: str
    version: str
    #: The executable the package installs (``node_modules/.bin/<bin>``).
    bin: str
    #: The model wire format it speaks (the provider must speak it too).
    wire_format: WireFormat
    #: What its conformance test has shown; anything else is refused at admission.
    capabilities: frozenset[str]
    #: MiB of writable address space its conformance run needs (None: not measured). Only
    #: a data rlimit counts it (the process node's memory limit without a cgroup): a cgroup
    #: counts resident pages, far fewer (Claude Code: ~220 MiB resident, ~650 MiB mapped).
    data_mib: int | None = None


#: Every harness kind. A capability enters a row only with a conformance test proving it.
HARNESSES: Final[dict[str, HarnessInfo]] = {
    "claude-code": HarnessInfo(
        kind="claude-code",
        npm_package="@anthropic-ai/claude-code",
        version="2.1.332",
        bin="claude",
        wire_format="anthropic-messages",
        capabilities=frozenset(
            {
                "final-answer",
                "usage",
                "mcp-tools",
                # tests/unit/harness/test_builtin_hooks.py: its PreToolUse command hook asks
                # before Read/Edit/Write/Bash, and its deny holds under --permission-mode dontAsk.
                "tool-hook",
                "native-file-read",
                "native-file-write",
                "native-shell",
            }
        ),
        # Bun reserves writable arenas it never touches: its MCP round trip dies under
        # RLIMIT_DATA=640Mi (an abort at start below ~560Mi) and completes at 670Mi.
        data_mib=768,
    ),
    "codex": HarnessInfo(
        kind="codex",
        npm_package="@openai/codex",
        version="0.169.1",
        bin="codex",
        wire_format="openai-responses",
        capabilities=frozenset(
            {
                "final-answer",
                "usage",
                "mcp-tools",
                # tests/unit/harness/test_builtin_hooks.py: its PreToolUse hook asks before
                # exec_command (as Bash) and apply_patch. It has no read-only file tool (it
                # reads through its shell): no native-file-read, so fileIo is refused.
                "tool-hook",
                "native-shell",
                "native-file-write",
            }
        ),
        # A Rust binary giving its threads 16 MiB stacks, so what it maps moves with
        # how many of its blocking-pool threads are alive at once, that is with the machine's
        # load: a round trip's peak was 126-320 MiB idle, up to 433 at load 5 and 581 at load
        # 8 (bench/bench_harness_data.py, docs/concepts/harness-nodes.md).
        data_mib=640,
    ),
    "gemini-cli": HarnessInfo(
        kind="gemini-cli",
        npm_package="@google/gemini-cli",
        version="0.61.0",
        bin="gemini",
        wire_format="gemini-generate-content",
        capabilities=frozenset(
            {
                "final-answer",
                "usage",
                "mcp-tools",
                # tests/unit/harness/test_gemini_cli_builtins.py: its BeforeTool hook asks
                # before its file tools, and its --policy file denies a use the hook did not
                # allow (a hook that fails, times out or answers nonsense). Its shell and web
                # tools are not shown there: no native-shell, no native-web.
                "tool-hook",
                "native-file-read",
                "native-file-write",
            }
        ),
        # Node.js: the MCP round trip completes under RLIMIT_DATA=286Mi and V8 aborts at
        # 270Mi (bench/bench_harness_data.py, test_data_limits.py).
        data_mib=384,
    ),
}


class HarnessSpec(ApiModel):
    """Run this node's agent as a coding harness instead of the runner's own agent loop."""

    kind: HarnessKind = Field(
        description="claude-code (Anthropic Messages API), codex (OpenAI Responses API) or "
        "gemini-cli (Gemini API); the Agent's model provider must speak that wire format."
    )
    requires: list[Capability] = Field(
        default_factory=list,
        max_length=len(CAPABILITIES),
        description="Capabilities this node relies on beyond what the Agent implies (its "
        "tools, skills and nativeTools imply mcp-tools; builtinTools the native-* ones and "
        "tool-hook); each must have been shown by the harness's conformance test, or the "
        "node is refused.",
    )
    builtin_tools: bool = Field(
        default=False,
        description="Switch on the harness's own built-in tools for the Agent's nativeTools "
        "(fileIo: read/edit files, bash: shell, webSearch: web), each use asked of the runner "
        "through the harness's pre-tool-use hook. Off (the default): every built-in is off and "
        "the Agent's nativeTools reach the harness as the runner's own governed tools through "
        "the MCP gateway.",
    )
    builtin_tools_permission: PermissionTier = Field(
        default="cautious",
        description="The permission tier of every built-in tool use the hook asks about: "
        "open or cautious allow it (audited as tool.call), readonly allows only reads (file "
        "reading; an edit is refused, audited as tool.refused; a shell is refused at "
        "admission), strict asks a person per use (the Run parks for a Review).",
    )
    timeout_seconds: int | None = Field(
        default=None,
        ge=10,
        le=86400,
        description="How long the harness may run before it is killed (the node ends "
        "HarnessTimedOut); default: the Run's timeout.",
    )


def required_capabilities(agent: AgentSpec, spec: HarnessSpec) -> list[str]:
    """What a harness needs to run ``agent`` as the node asks (sorted, no duplicates)."""
    needed: set[str] = {"final-answer", "usage", *spec.requires}
    native = agent.native_tools
    served_natively = native is not None and (native.bash or native.file_io or native.web_search)
    # Skills reach every harness through the gateway (skill tools, load_skill and
    # read_skill_file); ``skills`` (reading the laid-out .claude/skills natively) is asked
    # for with ``requires``.
    if agent.tools or agent.skills or agent.flow_data_access or served_natively:
        needed.add("mcp-tools")
    if spec.builtin_tools:
        classes = native_classes(agent)
        needed |= {f"native-{c}" for c in classes}
        if classes:
            needed.add("tool-hook")
    return sorted(needed)


def native_classes(agent: AgentSpec) -> list[str]:
    """The built-in tool classes the Agent's ``nativeTools`` switch on (file edits need
    file reading: an edit has to see the file)."""
    native = agent.native_tools
    if native is None:
        return []
    classes: list[str] = []
    if native.file_io:
        classes += ["file-read", "file-write"]
    if native.bash:
        classes.append("shell")
    if native.web_search:
        classes.append("web")
    return classes


def builtin_tier_problem(spec: HarnessSpec, agent: AgentSpec, field: str) -> str | None:
    """Why the node's tier forbids a built-in class it switches on outright (a readonly tier
    and a shell: every use would be refused), or None. A class with some read uses (file
    I/O) is admitted: its writes are refused call by call, each audited."""
    if not spec.builtin_tools or spec.builtin_tools_permission != "readonly":
        return None
    # A write class comes with its read class (fileIo); a class of unknown effects has no
    # use a readonly tier allows.
    never = [c for c in native_classes(agent) if NATIVE_EFFECTS[c] == "unknown"]
    if not never:
        return None
    return (
        f"{field}.builtinToolsPermission: readonly allows only reads, and the Agent's "
        f"nativeTools switch on {', '.join(never)} (effects "
        f"{', '.join(NATIVE_EFFECTS[c] for c in never)}) as built-in tools: every use would "
        "be refused; switch it off in the Agent, set builtinTools: false (the runner's "
        "governed tool instead) or choose another tier"
    )


def agent_provider(agent: AgentSpec, providers: list[ModelProvider]) -> ModelProvider | None:
    """The provider the agent's model calls go to (named, else the Workspace's first)."""
    wanted = agent.model.provider if agent.model else None
    if wanted is None:
        return providers[0] if providers else None
    return next((p for p in providers if p.name == wanted), None)


def harness_problem(
    spec: HarnessSpec, agent: AgentSpec, provider: ModelProvider | None, field: str
) -> str | None:
    """Why this harness node cannot run (one sentence naming ``field``), or None."""
    info = HARNESSES.get(spec.kind)
    if info is None:
        return (
            f"{field}.kind: harness {spec.kind} has no conformance test for its pinned CLI "
            f"yet; supported: {', '.join(sorted(HARNESSES))}"
        )
    if info.wire_format not in PROXIED_WIRE_FORMATS:
        return (
            f"{field}.kind: {spec.kind} speaks {info.wire_format}, which the runner's model "
            f"proxy does not forward yet (it forwards {', '.join(PROXIED_WIRE_FORMATS)})"
        )
    if provider is not None:
        speaks = PROVIDER_WIRE_FORMATS.get(provider.type, ())
        if info.wire_format not in speaks:
            return (
                f"{field}.kind: {spec.kind} needs a model provider speaking {info.wire_format}; "
                f"provider {provider.name} is of type {provider.type} ({', '.join(speaks)})"
            )
    tier_problem = builtin_tier_problem(spec, agent, field)
    if tier_problem is not None:
        return tier_problem
    missing = [c for c in required_capabilities(agent, spec) if c not in info.capabilities]
    if missing:
        return (
            f"{field}: {spec.kind} {info.version} has not shown {', '.join(missing)} in its "
            "conformance test; the node cannot rely on it"
        )
    return None


__all__ = [
    "CAPABILITIES",
    "HARNESSES",
    "HARNESS_KINDS",
    "NATIVE_EFFECTS",
    "PROVIDER_WIRE_FORMATS",
    "PROXIED_WIRE_FORMATS",
    "Capability",
    "HarnessInfo",
    "HarnessKind",
    "HarnessSpec",
    "NativeClass",
    "WireFormat",
    "agent_provider",
    "builtin_tier_problem",
    "harness_problem",
    "native_classes",
    "required_capabilities",
]
