"""Granted skills: progressive disclosure and the skill executor registry.

* Level 1: one catalog line per granted skill (``name: description``) in the system prompt.
* Level 2: ``load_skill(name)`` returns the SKILL.md body and the list of bundled files.
* Level 3: ``read_skill_file(skill_name, path)`` returns one bundled file; absolute paths,
  ``..``, and symlinks that leave the skill's directory are refused (``PathNotAllowed``).

The two synthetic tools exist only when at least one granted skill is present. A grant of a
skill the bundle does not carry is a startup warning and stays inert.

Skills with an ``implementation`` are also offered as tools named after the skill. What a
call does is decided by the executor registered for the implementation type
(:func:`register_executor`); this module registers ``mcp_tool``, :mod:`.executors` the
others. How a call is governed (tiers, scopes, constraints, decision outputs) is
:mod:`.pipeline`.

The components of a granted ``composed`` skill travel in the bundle (and in the agent's
resolved grants) but are not granted on their own: they are offered, listed and loadable
only when the agent grants them by name too.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from swarmkit_api.bundle import BundleAgent, BundleSkill, RunBundle
from swarmkit_api.common import Effects

from .catalog import ToolEntry
from .context import RunContext
from .errors import ToolError
from .permissions import Layer, mcp_layer

#: Largest file read_skill_file returns.
MAX_SKILL_FILE_BYTES = 1024 * 1024

LOAD_SKILL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "The skill's name."}},
    "required": ["name"],
    "additionalProperties": False,
}
READ_SKILL_FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "skill_name": {"type": "string", "description": "The skill's name."},
        "path": {
            "type": "string",
            "description": "A bundled file's path as listed by load_skill.",
        },
    },
    "required": ["skill_name", "path"],
    "additionalProperties": False,
}


def component_only(bundle: RunBundle, agent: BundleAgent) -> set[str]:
    """Skills the agent holds only as components of a granted composed skill."""
    names = agent.skills or list(agent.spec.skills)
    components: set[str] = set()
    stack = [n for n in names if n in agent.spec.skills]
    seen: set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        skill = bundle.skills.get(name)
        impl = skill.spec.implementation if skill is not None else None
        if impl is not None and impl.type == "composed":
            for component in impl.composes or ():
                components.add(component)
                stack.append(component)
    return {c for c in components if c not in agent.spec.skills}


def granted_skills(ctx: RunContext, agent: BundleAgent) -> list[BundleSkill]:
    """The agent's granted skills that the bundle carries (unknown grants warn, inert)."""
    names = agent.skills or [s for s in agent.spec.skills if not s.startswith("pack:")]
    hidden = component_only(ctx.bundle, agent) if agent.skills else set()
    found: list[BundleSkill] = []
    for name in names:
        if name in hidden:
            continue
        skill = ctx.bundle.skills.get(name)
        if skill is None:
            ctx.warn_once(
                f"skill:{agent.name}:{name}",
                f"agent {agent.name} grants skill {name!r}, which is not in the bundle; "
                "the grant stays inert",
                agent=agent.name,
                skill=name,
            )
            continue
        found.append(skill)
    return found


def _one_line(text: str) -> str:
    return " ".join(text.split())


def catalog_section(skills: list[BundleSkill]) -> str:
    """Level 1: the system-prompt section listing the granted skills."""
    if not skills:
        return ""
    lines = [
        "## Skills",
        "You have these skills (name: when to use it). Before using one, call load_skill "
        "with its name to read its full instructions; read_skill_file reads a file it lists.",
    ]
    lines.extend(f"- {s.name}: {_one_line(s.spec.description)}" for s in skills)
    return "\n".join(lines)


def system_prompt(base: str, skills: list[BundleSkill]) -> str:
    """The agent's system prompt with the level-1 skill catalog appended."""
    section = catalog_section(skills)
    if not section:
        return base
    return f"{base.rstrip()}\n\n{section}" if base.strip() else section


def _strip_front_matter(text: str) -> str:
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end != -1:
            return text[end + 4 :].lstrip("\n")
    return text


class SkillFiles:
    """Safe access to one skill's mounted files."""

    def __init__(self, ctx: RunContext, skill: BundleSkill) -> None:
        self.skill = skill
        self.root = ctx.paths.skill_dir(skill.name, skill.directory)

    @property
    def bundled(self) -> list[str]:
        return [f.path for f in self.skill.spec.files]

    def instructions(self) -> str:
        if self.skill.spec.instructions.strip():
            return self.skill.spec.instructions
        try:
            return _strip_front_matter((self.root / "SKILL.md").read_text(encoding="utf-8"))
        except OSError:
            return ""

    def resolve(self, path: str) -> Path:
        """The real path of bundled file ``path``; refuses anything leaving the skill."""
        if not path or path.startswith("/") or "\\" in path or "\x00" in path:
            raise ToolError(f"{path!r} is not a relative path inside the skill", "PathNotAllowed")
        parts = PurePosixPath(path).parts
        if any(p in ("..", ".") for p in parts) or PurePosixPath(path).as_posix() != path:
            raise ToolError(f"{path!r} leaves or is not normalized", "PathNotAllowed")
        if path not in self.bundled:
            raise ToolError(f"skill {self.skill.name} has no bundled file {path!r}", "FileNotFound")
        try:
            real_root = self.root.resolve(strict=True)
        except OSError:
            raise ToolError(
                f"skill {self.skill.name}'s files are not mounted", "FileNotFound"
            ) from None
        candidate = real_root / path
        real = Path(os.path.realpath(candidate))
        if not real.is_relative_to(real_root):
            raise ToolError(f"{path!r} resolves outside the skill directory", "PathNotAllowed")
        return real

    def read_bytes(self, path: str) -> bytes:
        """The content of bundled file ``path`` (the mounted file, else the inline content)."""
        real = self.resolve(path)
        try:
            if real.is_file():
                with real.open("rb") as fh:
                    data = fh.read(MAX_SKILL_FILE_BYTES + 1)
                if len(data) > MAX_SKILL_FILE_BYTES:
                    raise ToolError(f"{path!r} is larger than 1 MiB", "FileTooLarge")
                return data
        except OSError as exc:
            raise ToolError(f"{path!r}: {exc.strerror or exc}", "FileUnreadable") from None
        for f in self.skill.spec.files:
            if f.path == path and f.content:  # the operator leaves "" for mounted files
                return f.content.encode()
        raise ToolError(f"skill {self.skill.name}: {path!r} is not mounted", "FileNotFound")


def _granted(skills: list[BundleSkill], name: Any) -> BundleSkill:
    for skill in skills:
        if skill.name == name:
            return skill
    raise ToolError(f"skill {name!r} is not granted to this agent", "SkillNotGranted")


def disclosure_tools(
    ctx: RunContext, agent: BundleAgent, skills: list[BundleSkill], approved: set[tuple[str, str]]
) -> list[ToolEntry]:
    """``load_skill`` and ``read_skill_file`` (only when a skill is granted)."""
    if not skills:
        return []

    async def load_skill(args: dict[str, Any]) -> str:
        skill = _granted(skills, args.get("name"))
        files = SkillFiles(ctx, skill)
        lines = [f"# {skill.spec.display_name or skill.name}", "", files.instructions().rstrip()]
        if skill.spec.files:
            lines += ["", "Bundled files (read one with read_skill_file):"]
            for f in skill.spec.files:
                note = ""
                if (skill.name, f.path) in approved:
                    note = " (approved script: run_skill_script)"
                elif f.is_script:
                    note = " (script; not approved to run)"
                lines.append(f"- {f.path}{note}")
        ctx.audit.emit("skill.load", agent=agent.name, skill=skill.name, outcome="ok")
        ctx.shared.usage.loaded(agent.name, skill.name)
        return "\n".join(lines)

    async def read_skill_file(args: dict[str, Any]) -> str:
        skill = _granted(skills, args.get("skill_name"))
        path = str(args.get("path", ""))
        try:
            data = SkillFiles(ctx, skill).read_bytes(path)
        except ToolError as exc:
            ctx.audit.emit(
                "skill.file_read",
                agent=agent.name,
                skill=skill.name,
                path=path,
                outcome="refused",
                error=str(exc),
            )
            raise
        ctx.audit.emit(
            "skill.file_read",
            agent=agent.name,
            skill=skill.name,
            path=path,
            outcome="ok",
            bytes=len(data),
        )
        ctx.shared.usage.file_read(agent.name, skill.name, path)
        return data.decode("utf-8", errors="replace")

    return [
        ToolEntry(
            "load_skill",
            "Load a granted skill's full instructions (SKILL.md) and its list of bundled files.",
            LOAD_SKILL_SCHEMA,
            "synthetic",
            load_skill,
        ),
        ToolEntry(
            "read_skill_file",
            "Read one bundled file of a granted skill, by the path load_skill listed.",
            READ_SKILL_FILE_SCHEMA,
            "synthetic",
            read_skill_file,
        ),
    ]


# --------------------------------------------------------------------------- executors


class Interim(str):
    """A result that is not the skill's answer yet (e.g. a remote agent's question): it goes
    back to the agent as is, without the decision outputs check."""

    __slots__ = ()


@dataclass(frozen=True)
class SkillTool:
    """How a skill is offered as a tool: its schema and one attempt of the call."""

    description: str
    input_schema: dict[str, Any]
    call: Callable[[dict[str, Any]], Awaitable[str]]
    #: Tiers the call passes through besides the skill's own (e.g. the MCP tool's).
    layers: tuple[Layer, ...] = ()
    #: Effects the Workspace declares for what the skill calls (an MCP tool override, a
    #: pack command); combined with the skill's own declaration, the widest wins.
    effects: Effects | None = None
    #: The effects when neither declares any.
    default_effects: Effects = "unknown"
    #: The executor enforces the decision ``outputs`` itself (re-asking its model).
    validates_output: bool = False
    #: A time limit of the executor's own (e.g. an agent skill's timeoutS).
    timeout_seconds: float | None = None
    #: The executor validates its inputs itself.
    validates_inputs: bool = False


class SkillExecutor(Protocol):
    """Turns a skill with an implementation into a callable tool (None = not offered)."""

    def __call__(
        self, ctx: RunContext, agent: BundleAgent, skill: BundleSkill
    ) -> SkillTool | None: ...


_EXECUTORS: dict[str, SkillExecutor] = {}


def register_executor(implementation_type: str, executor: SkillExecutor) -> None:
    """Register (or replace) the executor for ``implementation_type``."""
    _EXECUTORS[implementation_type] = executor


def executor_for(implementation_type: str) -> SkillExecutor | None:
    return _EXECUTORS.get(implementation_type)


def _schema_without(schema: dict[str, Any], fixed: set[str]) -> dict[str, Any]:
    if not fixed:
        return schema
    out = dict(schema)
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: v for k, v in props.items() if k not in fixed}
    req = out.get("required")
    if isinstance(req, list):
        out["required"] = [r for r in req if r not in fixed]
    return out


def mcp_tool_executor(ctx: RunContext, agent: BundleAgent, skill: BundleSkill) -> SkillTool | None:
    """``mcp_tool``: call ``server``/``tool`` with the fixed arguments merged over the model's."""
    impl = skill.spec.implementation
    assert impl is not None and impl.server and impl.tool
    server, tool = impl.server, impl.tool
    mcp = ctx.mcp
    if mcp is None or server not in mcp.server_ids:
        ctx.warn_once(
            f"mcp-skill:{skill.name}",
            f"skill {skill.name} uses MCP server {server!r}, which the workspace does not "
            "declare; the skill's tool is not offered",
            skill=skill.name,
        )
        return None
    if not mcp.available(server):
        return None  # mcp.unavailable was already audited
    discovered = mcp.tools(server).get(tool)
    if discovered is None:
        ctx.warn_once(
            f"mcp-skill:{skill.name}",
            f"skill {skill.name}: MCP server {server} has no tool {tool!r}; not offered",
            skill=skill.name,
        )
        return None
    fixed = dict(impl.arguments or {})
    schema = (
        skill.spec.inputs.as_dict()
        if skill.spec.inputs is not None
        else _schema_without(discovered.input_schema, set(fixed))
    )

    async def call(args: dict[str, Any]) -> str:
        return await mcp.call(server, tool, {**args, **fixed})

    layer, effects = mcp_layer(mcp.server(server), tool)
    declared = effects if effects != "unknown" else None
    return SkillTool(skill.spec.description, schema, call, layers=(layer,), effects=declared)


register_executor("mcp_tool", mcp_tool_executor)
