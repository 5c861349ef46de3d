"""Command packs: Workspace ``commandPacks`` run as argv templates, never through a shell.

* **Start-up**: every pack the run uses (a ``command`` skill's pack, an agent's
  ``pack:<id>`` grant) must find each binary of its ``requires`` and each command's
  ``argv[0]`` on ``PATH`` (or as an absolute path); otherwise the run ends before anything
  else with outcome ValidationFailed and a message naming the pack, the binary and the
  image. A ``command`` skill naming an unknown pack or command is a bundle error.
* **Inputs** are validated against the command's ``inputs`` schema, then each ``{name}``
  placeholder of the argv template is filled with the input's value (numbers and booleans
  as JSON text; an element that is exactly ``{name}`` and gets a list becomes one argv
  element per item; a placeholder inside literal text takes a scalar only). A value that
  would start an argv element with ``-`` is refused unless the template has a literal
  ``--`` element before it, whether it fills the whole element (``"{x}"``) or begins it
  (``"{x}.py"``, ``"{a}{b}"`` with ``a`` empty, ``"{a}-x"``): no option injection. A template's own
  literal prefix (``"--out={path}"``) is the author's and is kept. A value with a NUL
  character, or a placeholder without a value, is an ``InvalidArguments`` error.
* **Running**: ``argv[0]`` resolved on ``PATH``, exec'd directly (no shell) in the run's
  working directory (``<scratch>/work``, shared with ``bash``/``file_io``) with a minimal
  environment (``PATH``, ``HOME``, ``LANG``; never a secret), the command's
  ``timeoutSeconds`` (process group killed) and ``maxOutputBytes`` (output cut, flagged).
* **Output**: ``text`` (stdout), ``json`` (stdout parsed; invalid JSON is an error) or
  ``lines`` (non-empty stdout lines), returned as
  ``{"exit_code", "output", "stderr", "truncated"}``; a non-zero exit is a
  ``CommandFailed`` tool error with the same payload (except when the output was cut: the
  runner killed it, and the cut output is the answer).
* **Effects**: ``read | write``, undeclared = write. A ``pack:<id>`` grant offers only the
  pack's read commands (``BundleAgent.commands``, checked again here) as tools named
  ``<pack>.<command>`` (tier cautious). A ``command`` skill may run any command of the pack;
  its tier (the skill's ``permission``) and the command's effects decide (readonly tiers
  allow only read commands).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from typing import Any

from swarmkit_api.bundle import BundleAgent, BundleSkill, RunBundle
from swarmkit_api.workspace import CommandPack, PackCommand

from .catalog import EMPTY_OBJECT_SCHEMA, ToolEntry
from .context import RunContext
from .errors import BundleError, InvalidArguments, StartupError, ToolError
from .output import schema_problems
from .permissions import Gate, Layer, guard
from .sandbox import Limits, run_contained
from .skills import SkillTool

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_WHOLE = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
MAX_STDERR_CHARS = 4000


def find_command(bundle: RunBundle, pack_id: str, name: str) -> tuple[CommandPack, PackCommand]:
    pack = next((p for p in bundle.workspace.command_packs if p.id == pack_id), None)
    if pack is None:
        raise KeyError(f"the workspace has no command pack {pack_id!r}")
    command = next((c for c in pack.commands if c.name == name), None)
    if command is None:
        raise KeyError(f"command pack {pack_id} has no command {name!r}")
    return pack, command


def used_packs(bundle: RunBundle) -> dict[str, CommandPack]:
    """Packs the run may use: command skills' packs and agents' pack:<id> grants."""
    wanted: set[str] = set()
    for skill in bundle.skills.values():
        impl = skill.spec.implementation
        if impl is not None and impl.type == "command" and impl.pack:
            wanted.add(impl.pack)
    for agent in bundle.agents.values():
        wanted.update(c.split("/", 1)[0] for c in agent.commands)
    return {p.id: p for p in bundle.workspace.command_packs if p.id in wanted}


def check_bundle_commands(bundle: RunBundle) -> None:
    """Every command skill names a pack and command the workspace declares."""
    for skill in bundle.skills.values():
        impl = skill.spec.implementation
        if impl is None or impl.type != "command":
            continue
        try:
            find_command(bundle, impl.pack or "", impl.command or "")
        except KeyError as exc:
            raise BundleError(f"skill {skill.name}: {exc.args[0]}") from None


def _resolve(binary: str) -> str | None:
    if os.path.isabs(binary):
        return binary if os.access(binary, os.X_OK) else None
    return shutil.which(binary)


def check_command_packs(bundle: RunBundle) -> None:
    """Start-up check of ``requires`` and argv[0] (raises :class:`StartupError`)."""
    for pack in used_packs(bundle).values():
        for binary in pack.requires:
            if _resolve(binary) is None:
                raise StartupError(
                    f"command pack {pack.id} requires {binary!r}, which is not installed in "
                    "the runtime image (not on PATH); add it to the image or remove the pack"
                )
        for command in pack.commands:
            program = command.argv[0]
            if _PLACEHOLDER.search(program):
                raise StartupError(
                    f"command pack {pack.id}: command {command.name}'s argv[0] must be a "
                    "literal program, not a placeholder"
                )
            if _resolve(program) is None:
                raise StartupError(
                    f"command pack {pack.id}: command {command.name} runs {program!r}, which "
                    "is not installed in the runtime image (not on PATH)"
                )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _checked(name: str, text: str, after_dashdash: bool) -> str:
    """``text`` as (the start of) an argv element, or InvalidArguments."""
    if "\x00" in text:
        raise InvalidArguments(f"{name}: a NUL character cannot be passed on a command line")
    if text.startswith("-") and not after_dashdash:
        raise InvalidArguments(
            f"{name}: {text!r} starts with '-' and would be read as an option (the "
            "command's template has no '--' before it)"
        )
    return text


def _fill_part(element: str, args: dict[str, Any], after_dashdash: bool) -> str:
    """One element with placeholders inside literal text: scalars only. The element may
    start with '-' only when the template's own text does (``"--out={path}"``): values,
    even empty ones (``"{a}-x"``), never make an option of it."""
    first: str | None = None

    def sub(match: re.Match[str]) -> str:
        nonlocal first
        name = match.group(1)
        first = first or name
        if name not in args:
            raise InvalidArguments(f"missing input {name!r} for the command line")
        value = args[name]
        if isinstance(value, list | dict):
            raise InvalidArguments(f"{name}: a list or object cannot fill part of {element!r}")
        return _checked(name, _text(value), True)  # the option check is on the element

    filled = _PLACEHOLDER.sub(sub, element)
    if first is not None and not element.startswith("-"):
        _checked(first, filled, after_dashdash)
    return filled


def fill_argv(template: list[str], args: dict[str, Any]) -> list[str]:
    """The argv for ``args`` (see the module doc for the rules)."""
    if _PLACEHOLDER.search(template[0]):
        raise InvalidArguments("argv[0] must be a literal program, not a placeholder")
    argv = [template[0]]
    after_dashdash = False
    for element in template[1:]:
        whole = _WHOLE.match(element)
        if whole is None:
            argv.append(_fill_part(element, args, after_dashdash))
            after_dashdash = after_dashdash or element == "--"
            continue
        name = whole.group(1)
        if name not in args:
            raise InvalidArguments(f"missing input {name!r} for the command line")
        value = args[name]
        for item in value if isinstance(value, list) else [value]:
            argv.append(_checked(name, _text(item), after_dashdash))
    return argv


def _parse(command: PackCommand, stdout: str, truncated: bool) -> Any:
    if command.output == "lines":
        return [line for line in stdout.splitlines() if line.strip()]
    if command.output == "json":
        if truncated:
            raise ToolError(
                f"output of {command.name} exceeded maxOutputBytes "
                f"({command.max_output_bytes}); cannot parse it as JSON",
                "CommandOutputInvalid",
            )
        try:
            return json.loads(stdout)
        except ValueError as exc:
            raise ToolError(
                f"output of {command.name} is not JSON ({exc})", "CommandOutputInvalid"
            ) from None
    return stdout


async def run_command(
    ctx: RunContext,
    agent: BundleAgent,
    pack: CommandPack,
    command: PackCommand,
    args: dict[str, Any],
    skill: str | None = None,
) -> str:
    """Validate ``args``, run the command contained, parse and return its output."""
    if command.inputs is not None:
        problems = schema_problems(command.inputs.as_dict(), args)
        if problems:
            raise InvalidArguments("; ".join(problems))
    argv = fill_argv(command.argv, args)
    program = _resolve(argv[0])
    if program is None:
        raise ToolError(f"{argv[0]!r} is not installed", "CommandNotFound")
    argv[0] = program
    work = ctx.work_dir
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(work),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }
    limits = Limits(
        timeout_seconds=float(command.timeout_seconds),
        cpu_seconds=command.timeout_seconds + 1,
        max_output_bytes=command.max_output_bytes,
    )
    started = time.monotonic()
    result = await run_contained(argv, work, env, limits)
    effects = command.effects or "write"
    ctx.audit.emit(
        "command.run",
        agent=agent.name,
        skill=skill,
        pack=pack.id,
        command=command.name,
        argv=argv,
        effects=effects,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        truncated=result.truncated,
        duration_ms=round((time.monotonic() - started) * 1000, 1),
        outcome="ok" if result.ok else ("timeout" if result.timed_out else "error"),
    )
    if result.timed_out:
        raise ToolError(
            f"{pack.id}/{command.name} was killed (with its process group) after "
            f"{command.timeout_seconds}s",
            "CommandTimedOut",
        )
    payload: dict[str, Any] = {
        "exit_code": result.exit_code,
        "output": result.stdout,
        "stderr": result.stderr[-MAX_STDERR_CHARS:],
        "truncated": result.truncated,
    }
    if result.exit_code != 0 and not result.truncated:  # a cut-off run was killed by us
        raise ToolError(json.dumps(payload, ensure_ascii=False), "CommandFailed")
    payload["output"] = _parse(command, result.stdout, result.truncated)
    return json.dumps(payload, ensure_ascii=False)


def command_gate(command: PackCommand, layer: Layer) -> Gate:
    return Gate(layers=(layer,), effects=command.effects or "write")


def command_tools(ctx: RunContext, agent: BundleAgent) -> list[ToolEntry]:
    """``<pack>.<command>`` tools for the agent's ``pack:<id>`` grants (read commands)."""
    entries: list[ToolEntry] = []
    for ref in agent.commands:
        pack_id, _, name = ref.partition("/")
        try:
            pack, command = find_command(ctx.bundle, pack_id, name)
        except KeyError as exc:
            ctx.warn_once(f"command:{agent.name}:{ref}", str(exc.args[0]), agent=agent.name)
            continue
        if command.effects != "read":
            ctx.warn_once(
                f"command:{agent.name}:{ref}",
                f"agent {agent.name}: {ref} is not a read command; a pack:{pack_id} grant "
                "covers read commands only, so it is not offered",
                agent=agent.name,
            )
            continue
        gate = command_gate(command, Layer(f"command pack {pack.id}", "cautious"))

        async def call(
            args: dict[str, Any], _p: CommandPack = pack, _c: PackCommand = command
        ) -> str:
            return await run_command(ctx, agent, _p, _c, args)

        schema = command.inputs.as_dict() if command.inputs is not None else EMPTY_OBJECT_SCHEMA
        entries.append(
            ToolEntry(
                f"{pack.id}.{command.name}",
                command.description,
                schema,
                "command",
                guard(agent, gate, call),
                gate=gate,
            )
        )
    return entries


def command_executor(ctx: RunContext, agent: BundleAgent, skill: BundleSkill) -> SkillTool | None:
    """``command`` skills: one command of a pack, under the skill's tier."""
    impl = skill.spec.implementation
    assert impl is not None and impl.pack and impl.command
    pack, command = find_command(ctx.bundle, impl.pack, impl.command)  # checked at load

    async def call(args: dict[str, Any]) -> str:
        return await run_command(ctx, agent, pack, command, args, skill.name)

    if skill.spec.inputs is not None:
        schema = skill.spec.inputs.as_dict()
    elif command.inputs is not None:
        schema = command.inputs.as_dict()
    else:
        schema = EMPTY_OBJECT_SCHEMA
    return SkillTool(
        skill.spec.description,
        schema,
        call,
        effects=command.effects or "write",
        validates_inputs=skill.spec.inputs is None,
    )
