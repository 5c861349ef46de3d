"""``run_skill_script(skill_name, path, args)``: run an approved, pinned skill script.

Offered only when script execution is allowed for the run and the agent has at least one
granted skill with an approved script. Before *every* run the file's sha256 is recomputed
and compared with the pin in the bundle; a mismatch is refused (``ScriptHashMismatch``) and
audited. The verified bytes are copied into a fresh directory under the scratch dir and that
copy is executed (so nothing can be swapped between check and run), with argv passed
literally, an empty environment, CPU/memory/output limits and the process group killed on
timeout (see :mod:`.sandbox`).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from swarmkit_api.bundle import BundleAgent, BundleSkill, ScriptPin

from .catalog import ToolEntry
from .context import RunContext
from .errors import ToolError
from .sandbox import Limits, SandboxResult, run_contained
from .skills import SkillFiles

DEFAULT_LIMITS = Limits()

RUN_SKILL_SCRIPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "skill_name": {"type": "string", "description": "The skill's name."},
        "path": {"type": "string", "description": "The approved script's path in the skill."},
        "args": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Arguments, passed literally as argv (never through a shell).",
        },
    },
    "required": ["skill_name", "path"],
    "additionalProperties": False,
}


def approved_scripts(
    ctx: RunContext, skills: list[BundleSkill]
) -> dict[tuple[str, str], ScriptPin]:
    """(skill, path) → pin of every approved script of ``skills`` (empty if execution is off)."""
    governance = ctx.bundle.governance
    if not ctx.bundle.allow_script_execution or not governance.allow_script_execution:
        return {}

    def denied(skill: str, path: str) -> bool:
        return any(
            d.skill == skill and (d.path is None or d.path == path)
            for d in governance.denied_scripts
        )

    return {
        (s.name, p.path): p
        for s in skills
        for p in s.scripts
        if p.approved and not denied(s.name, p.path)
    }


def interpreter_argv(script: Path, content: bytes) -> list[str]:
    """argv prefix that runs ``script``: its shebang (``env`` resolved here) or by suffix."""
    first = content.split(b"\n", 1)[0]
    if first.startswith(b"#!"):
        tokens = shlex.split(first[2:].decode("utf-8", errors="replace"))
        if not tokens:
            raise ToolError("empty shebang line", "ScriptNotRunnable")
        if Path(tokens[0]).name == "env":
            rest = [t for t in tokens[1:] if t != "-S"]
            if not rest:
                raise ToolError("shebang '#!/usr/bin/env' names no program", "ScriptNotRunnable")
            found = shutil.which(rest[0])
            if found is None:
                raise ToolError(f"interpreter {rest[0]!r} is not installed", "ScriptNotRunnable")
            return [found, *rest[1:], str(script)]
        if not Path(tokens[0]).exists():
            raise ToolError(f"interpreter {tokens[0]!r} is not installed", "ScriptNotRunnable")
        return [*tokens, str(script)]
    if script.suffix == ".py":
        return [sys.executable, str(script)]
    if script.suffix == ".sh":
        return ["/bin/sh", str(script)]
    return [str(script)]


def script_tool(
    ctx: RunContext,
    agent: BundleAgent,
    skills: list[BundleSkill],
    approved: dict[tuple[str, str], ScriptPin],
) -> ToolEntry | None:
    """The ``run_skill_script`` tool, or None when the agent has nothing runnable."""
    if not approved:
        return None
    scripts = _Scripts(ctx, agent, {s.name: s for s in skills}, approved)
    return ToolEntry(
        "run_skill_script",
        "Run an approved script bundled with a granted skill. args are passed literally.",
        RUN_SKILL_SCRIPT_SCHEMA,
        "synthetic",
        scripts.run_skill_script,
    )


@dataclass(frozen=True)
class _Verified:
    """A script that passed every check: granted, approved, and the bytes match the pin."""

    skill: BundleSkill
    path: str
    content: bytes
    sha256: str


@dataclass(frozen=True)
class _Scripts:
    """The approved scripts one agent may run, and the steps of one run:
    :meth:`verified` (refusals audited), :meth:`contained`, then the answer."""

    ctx: RunContext
    agent: BundleAgent
    by_name: dict[str, BundleSkill]
    approved: dict[tuple[str, str], ScriptPin]

    async def run_skill_script(self, args: dict[str, Any]) -> str:
        ctx, agent = self.ctx, self.agent
        skill_name = str(args.get("skill_name", ""))
        path = str(args.get("path", ""))
        raw_args = args.get("args") or []
        if not isinstance(raw_args, list):
            raise ToolError("args must be a list of strings", "InvalidArguments")
        argv_args = [a if isinstance(a, str) else json.dumps(a) for a in raw_args]
        script = self.verified(skill_name, path)
        limits = _limits(script.skill)
        result = await _contained(ctx, script, argv_args, limits)
        ctx.audit.emit(
            "script.run",
            agent=agent.name,
            skill=skill_name,
            path=path,
            sha256=script.sha256,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            truncated=result.truncated,
            duration_ms=result.duration_ms,
            outcome="ok" if result.ok else ("timeout" if result.timed_out else "error"),
        )
        ctx.shared.usage.script_run(
            agent.name, skill_name, path, None if result.timed_out else result.exit_code
        )
        if result.timed_out:
            raise ToolError(
                f"{skill_name}/{path} was killed (with its process group) after "
                f"{limits.timeout_seconds:g}s",
                "ScriptTimedOut",
            )
        payload = json.dumps(
            {
                "exit_code": result.exit_code,
                "stdout": result.stdout,
                "stderr": result.stderr,
                "output_truncated": result.truncated,
            },
            ensure_ascii=False,
        )
        if result.exit_code != 0 and not result.truncated:
            raise ToolError(payload, "ScriptFailed")
        return payload

    def verified(self, skill_name: str, path: str) -> _Verified:
        """The script, read and checked against its pin before *every* run."""
        skill = self.by_name.get(skill_name)
        if skill is None:
            raise self.refuse(
                skill_name, path, "SkillNotGranted", f"skill {skill_name!r} is not granted"
            )
        pin = self.approved.get((skill_name, path))
        if pin is None:
            raise self.refuse(
                skill_name,
                path,
                "ScriptNotApproved",
                f"{skill_name}/{path} is not an approved script",
            )
        content = SkillFiles(self.ctx, skill).read_bytes(path)
        actual = hashlib.sha256(content).hexdigest()
        if actual != pin.sha256.lower():
            raise self.refuse(
                skill_name,
                path,
                "ScriptHashMismatch",
                f"{skill_name}/{path} does not match its pinned sha256 (pinned "
                f"{pin.sha256[:12]}…, found {actual[:12]}…); refusing to run it",
                pinned_sha256=pin.sha256,
                actual_sha256=actual,
            )
        return _Verified(skill, path, content, actual)

    def refuse(self, skill: str, path: str, code: str, message: str, **extra: Any) -> ToolError:
        self.ctx.audit.emit(
            "script.refused",
            agent=self.agent.name,
            skill=skill,
            path=path,
            outcome="refused",
            reason=code,
            message=message,
            **extra,
        )
        return ToolError(message, code)


def _limits(skill: BundleSkill) -> Limits:
    """The defaults, with the skill's own timeout; writes confined to the work directory."""
    constraints = skill.spec.constraints
    timeout = (
        float(constraints.timeout_seconds)
        if constraints is not None and constraints.timeout_seconds
        else DEFAULT_LIMITS.timeout_seconds
    )
    return Limits(
        timeout_seconds=timeout,
        cpu_seconds=DEFAULT_LIMITS.cpu_seconds,
        memory_bytes=DEFAULT_LIMITS.memory_bytes,
        max_output_bytes=DEFAULT_LIMITS.max_output_bytes,
        max_file_bytes=DEFAULT_LIMITS.max_file_bytes,
        confine_writes=True,
    )


async def _contained(
    ctx: RunContext, script: _Verified, argv_args: list[str], limits: Limits
) -> SandboxResult:
    """Run a copy of the verified bytes (nothing can be swapped between check and run) in a
    fresh work directory; both are removed afterwards."""
    run_id = uuid.uuid4().hex[:12]
    bin_dir = ctx.paths.scratch / "script-bin" / run_id
    work = ctx.paths.scratch / "script-runs" / run_id
    bin_dir.mkdir(parents=True)
    work.mkdir(parents=True)
    copy = bin_dir / PurePosixPath(script.path).name
    copy.write_bytes(script.content)
    copy.chmod(0o500)
    try:
        argv = [*interpreter_argv(copy, script.content), *argv_args]
        return await run_contained(argv, work, {}, limits)
    finally:
        shutil.rmtree(bin_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
