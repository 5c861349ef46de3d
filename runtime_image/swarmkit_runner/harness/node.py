"""Run one harness node: the CLI as a subprocess beside its model proxy and MCP gateway.

:func:`run_harness` is what the agent loop calls for a Topology node with ``harness:``
(:meth:`..loop.AgentRunner.run_agent`). In order:

1. a work dir and a HOME under the pod's scratch ``emptyDir`` (``<scratch>/harness/<node>``),
   the granted skills laid out where the harness looks for them (``<work>/.claude/skills``);
2. the model proxy (:mod:`.proxy`) and the governed MCP gateway (:mod:`.gateway`) on
   ``127.0.0.1``, each with its own random per-node token, and, when the node switches
   built-in tools on (``builtinTools``), the decision point its pre-tool-use hook asks
   (:mod:`.hooks`, a third token);
3. the CLI (:data:`HARNESS_DIR`, installed from the pinned lockfile) with only the
   environment its :class:`.base.Harness` builds (none of the runner's: no Secret value),
   in its own process group; every JSON line it prints is kept as a ``harness.event``
   audit line (scrubbed like every audit line, capped per line and in total): the
   transcript ``kubectl swarmkit logs`` shows;
4. its end: past the node's timeout the group is killed (``HarnessTimedOut``); a non-zero
   exit, no final answer or a question end the node with their own reason
   (:class:`..errors.HarnessEnded`); a limit the proxy hit ends it with that limit's outcome.
   Otherwise its final answer is the node's answer (a funnel on the node still gates it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import secrets as token_source
import signal
import time
from asyncio import FIRST_COMPLETED
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from swarmkit_api.harness import HarnessSpec, native_classes

from ..bundle import provider_for
from ..errors import HarnessEnded, StartupError
from ..listen import listen_socket
from ..skills import SkillFiles, granted_skills
from . import harness_for
from .base import (
    REASON_HARNESS_FAILED,
    REASON_HARNESS_TIMED_OUT,
    Harness,
    HarnessInvocation,
    HarnessOutcome,
    NativeGrant,
)
from .gateway import RunGateway
from .hooks import HOOK_PATH, builtin_entries, hook_app, hook_command
from .proxy import DIALECTS, Dialect, ModelProxy

if TYPE_CHECKING:
    from collections.abc import Iterator

    import uvicorn
    from starlette.applications import Starlette

    from ..catalog import ToolEntry
    from ..context import RunContext
    from ..position import AgentPosition

#: Where the images install the pinned harness CLIs (``<dir>/node_modules/.bin/<bin>``).
HARNESS_DIR_ENV: Final = "SWARMKIT_HARNESS_DIR"
HARNESS_DIR: Final = "/opt/swarmkit/harness-clis"
#: One transcript line's event is cut here; the transcript stops at the total.
MAX_EVENT_CHARS: Final = 2048
MAX_TRANSCRIPT_CHARS: Final = 256 * 1024
#: Seconds the harness's own timeout stays below the Run's, so its reason wins.
RUN_TIMEOUT_MARGIN: Final = 10
#: Bytes of stderr kept for the failure message.
STDERR_TAIL: Final = 2000
#: Bytes in a MiB (the data rlimit check).
MIB: Final = 1024 * 1024


def harness_dir() -> Path:
    return Path(os.environ.get(HARNESS_DIR_ENV) or HARNESS_DIR)


def node_timeout(ctx: RunContext, spec: HarnessSpec) -> float:
    """The node's own timeout, or the Run's less a margin (so HarnessTimedOut is reported)."""
    run_timeout = max(1, ctx.bundle.run.timeout_seconds - RUN_TIMEOUT_MARGIN)
    return float(min(spec.timeout_seconds or run_timeout, run_timeout))


def lay_out_skills(ctx: RunContext, position: AgentPosition, skills_dir: Path) -> list[str]:
    """Each granted skill as ``<skills_dir>/<name>/SKILL.md`` plus its bundled files."""
    laid: list[str] = []
    for skill in granted_skills(ctx, position.agent):
        files = SkillFiles(ctx, skill)
        target = skills_dir / skill.name
        target.mkdir(parents=True, exist_ok=True)
        description = " ".join(skill.spec.description.split()) or skill.name
        (target / "SKILL.md").write_text(
            f"---\nname: {skill.name}\ndescription: {description}\n---\n\n{files.instructions()}",
            encoding="utf-8",
        )
        for path in files.bundled:
            if path == "SKILL.md":
                continue
            dest = target / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(files.read_bytes(path))
        laid.append(skill.name)
    return laid


@dataclass
class _Servers:
    """The proxy's and the gateway's uvicorn servers (one task each)."""

    servers: list[uvicorn.Server]
    tasks: list[asyncio.Task[None]]

    async def stop(self) -> None:
        for server in self.servers:
            server.should_exit = True
        for task in self.tasks:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 5)


async def _serve(apps: list[Starlette]) -> tuple[_Servers, list[int]]:
    """Serve each app on its own loopback port (the runner keeps its own signal handling)."""
    import uvicorn

    class Embedded(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # SIGTERM stays the runner's (it cancels the run, which stops us)

    servers: list[uvicorn.Server] = []
    tasks: list[asyncio.Task[None]] = []
    ports: list[int] = []
    for app in apps:
        sock = listen_socket("127.0.0.1", 0)
        ports.append(int(sock.getsockname()[1]))
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=2
        )
        server = Embedded(config)
        servers.append(server)
        tasks.append(asyncio.create_task(server.serve(sockets=[sock])))
    for started, task in zip(servers, tasks, strict=True):
        while not started.started:
            if task.done():  # it could not start (its lifespan failed): say why
                await _Servers(servers, tasks).stop()
                raise StartupError(f"harness node: a loopback server did not start: {task}")
            await asyncio.sleep(0.01)
    return _Servers(servers, tasks), ports


class _Transcript:
    """The harness's JSON lines as ``harness.event`` audit lines, capped."""

    def __init__(self, ctx: RunContext, agent: str, node: str) -> None:
        self.ctx, self.agent, self.node = ctx, agent, node
        self.lines: list[str] = []
        self.kept = 0
        self.capped = False

    def add(self, line: str) -> None:
        self.lines.append(line)
        text = line.strip()
        if not text.startswith("{"):
            return
        if self.kept >= MAX_TRANSCRIPT_CHARS:
            if not self.capped:
                self.capped = True
                self.ctx.audit.emit(
                    "harness.transcript_capped",
                    agent=self.agent,
                    node=self.node,
                    chars=MAX_TRANSCRIPT_CHARS,
                    outcome="capped",
                )
            return
        cut = text[:MAX_EVENT_CHARS]
        self.kept += len(cut)
        self.ctx.audit.emit(
            "harness.event",
            agent=self.agent,
            node=self.node,
            line=cut,
            truncated=len(text) > MAX_EVENT_CHARS or None,
        )


async def _drive(
    harness: Harness,
    inv: HarnessInvocation,
    timeout: float,
    transcript: _Transcript,
    stop: asyncio.Event,
) -> tuple[int | None, str]:
    """Run the CLI to its end; returns (exit code, stderr tail). The code is None when it
    was killed: at ``timeout``, or when ``stop`` was set (a call ended the node)."""
    for path, content in harness.files(inv).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    executable = harness.executable(harness_dir())
    if not executable.exists():
        raise StartupError(
            f"harness {harness.info.kind}: {executable} is missing (the image has no "
            f"{harness.info.npm_package} {harness.info.version}; set {HARNESS_DIR_ENV})"
        )
    _check_data_limit(harness)
    process = await asyncio.create_subprocess_exec(
        *harness.argv(executable, inv),
        cwd=inv.work_dir,
        env=harness.env(inv),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        limit=16 * 1024 * 1024,
    )
    stderr: list[bytes] = []

    async def read_out() -> None:
        assert process.stdout is not None
        async for raw in process.stdout:
            transcript.add(raw.decode("utf-8", "replace"))

    async def read_err() -> None:
        assert process.stderr is not None
        async for raw in process.stderr:
            stderr.append(raw)
            del stderr[:-50]

    async def finish() -> int:
        await asyncio.gather(read_out(), read_err())
        return await process.wait()

    finished = asyncio.create_task(finish())
    stopped = asyncio.create_task(stop.wait())
    code: int | None = None
    try:
        await asyncio.wait({finished, stopped}, timeout=timeout, return_when=FIRST_COMPLETED)
        if finished.done():
            code = finished.result()
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        for task in (finished, stopped):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    tail = b"".join(stderr).decode("utf-8", "replace")[-STDERR_TAIL:]
    return code, tail


def _dialect(harness: Harness) -> Dialect:
    """The model proxy's dialect for the harness's wire format (admission refuses one the
    proxy does not forward; a bundle written by hand is told the same here)."""
    dialect = DIALECTS.get(harness.info.wire_format)
    if dialect is None:
        raise HarnessEnded(
            REASON_HARNESS_FAILED,
            f"{harness.info.kind} speaks {harness.info.wire_format}, which the model proxy "
            "does not forward yet",
        )
    return dialect


def _check_data_limit(harness: Harness) -> None:
    """End the node, saying why, when a data rlimit is below what the harness maps.

    Where the pod's memory limit is an ``RLIMIT_DATA`` (no cgroup, as on the process node),
    its reserved-but-untouched arenas count: Claude Code under 512Mi aborts 5 ms after start
    or segfaults mid-run with nothing but a Bun panic to show for it."""
    need = harness.info.data_mib
    limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    if need is None or limit == resource.RLIM_INFINITY or limit >= need * MIB:
        return
    raise HarnessEnded(
        REASON_HARNESS_FAILED,
        f"{harness.info.kind} {harness.info.version} maps about {need} MiB of writable memory "
        f"but the pod's memory limit is enforced as a data rlimit of {limit // MIB} MiB: give "
        f"the Run's pod at least {need}Mi (Workspace spec.runtime.resources.limits.memory)",
    )


def _verdict(outcome: HarnessOutcome, code: int | None, timeout: float, stderr: str) -> str:
    """The final answer, or :class:`HarnessEnded` with the node's reason."""
    if code is None:
        raise HarnessEnded(
            REASON_HARNESS_TIMED_OUT, f"the harness ran past its timeout of {timeout:g}s"
        )
    if outcome.error_reason is not None:
        detail = " ".join(stderr.split())[-500:] if code != 0 and not outcome.finished else ""
        message = f"{outcome.error_message} (exit {code}: {detail})" if detail else ""
        raise HarnessEnded(outcome.error_reason, message or outcome.error_message)
    if code != 0:
        detail = " ".join(stderr.split())[-500:]
        raise HarnessEnded(
            REASON_HARNESS_FAILED, f"the harness exited {code}: {detail}".rstrip(": ")
        )
    if not outcome.final_text.strip():
        raise HarnessEnded(REASON_HARNESS_FAILED, "the harness ended without a final answer")
    return outcome.final_text


def _audit_end(
    ctx: RunContext,
    position: AgentPosition,
    outcome: HarnessOutcome,
    code: int | None,
    model_calls: int,
    started: float,
) -> None:
    """The ``harness.end`` line: how it ended, and what it reported (usage is the proxy's)."""
    ctx.audit.emit(
        "harness.end",
        agent=position.agent.name,
        node=position.node.name if position.node else None,
        exit_code=code,
        turns=outcome.turns,
        model_calls=model_calls,
        tool_calls=len(outcome.tool_calls),
        reported_input_tokens=outcome.usage.input_tokens,
        reported_output_tokens=outcome.usage.output_tokens,
        unmapped=list(outcome.unmapped) or None,
        duration_ms=round((time.monotonic() - started) * 1000, 1),
        outcome=outcome.error_reason
        or ("ok" if code == 0 else "stopped" if code is None else "failed"),
    )


def _directories(ctx: RunContext, node: str) -> tuple[Path, Path]:
    """The harness's work dir and HOME (with its TMPDIR) on the pod's scratch ``emptyDir``."""
    root = ctx.paths.scratch / "harness" / node
    work, home = root / "work", root / "home"
    for directory in (work, home, home / "tmp"):
        directory.mkdir(parents=True, exist_ok=True)
    return work, home


def _max_turns(ctx: RunContext, position: AgentPosition) -> int:
    """Model turns the harness may take: the Agent's maxSteps, capped by governance."""
    turns = ctx.bundle.governance.max_steps_per_agent
    steps = position.agent.spec.max_steps
    return turns if steps is None else min(turns, steps)


def _builtins(
    ctx: RunContext, position: AgentPosition, harness: Harness
) -> tuple[NativeGrant, list[ToolEntry]]:
    """The built-ins switched on (``harness.builtinTools`` and the Agent's ``nativeTools``)
    and their entries for the decision point (:mod:`.hooks`); none when its hook is not
    wired (admission refuses such a node by the harness's capabilities)."""
    assert position.node is not None and position.node.harness is not None
    spec = position.node.harness
    names = harness.native_names
    if not spec.builtin_tools or names is None:
        return NativeGrant(), []
    native = NativeGrant.of(native_classes(position.agent.spec))
    tier = spec.builtin_tools_permission
    return native, builtin_entries(ctx, position.agent, names, native, tier)


async def run_harness(ctx: RunContext, position: AgentPosition, task: str, depth: int) -> str:
    """Run ``position``'s harness on ``task``; its final answer (see the module docstring)."""
    assert position.node is not None and position.node.harness is not None
    spec = position.node.harness
    agent = position.agent
    harness = harness_for(spec.kind)
    config = provider_for(ctx.bundle, agent)
    model = (agent.spec.model.name if agent.spec.model else None) or config.default_model or ""
    work, home = _directories(ctx, position.node.name)
    skills_dir = work / ".claude" / "skills"
    laid = lay_out_skills(ctx, position, skills_dir)
    gateway_token = token_source.token_urlsafe(32)
    native, builtins = _builtins(ctx, position, harness)
    gateway = RunGateway(ctx, agent, gateway_token, position.node.name, builtins)
    hook_token = token_source.token_urlsafe(32)
    proxy = ModelProxy(
        ctx,
        agent.name,
        config,
        model,
        token_source.token_urlsafe(32),
        stop=gateway.stop,
        dialect=_dialect(harness),
    )
    from ..gateway_app import MCP_PATH, build_app

    apps = [proxy.app(), build_app(gateway)]
    if builtins:
        apps.append(hook_app(gateway, hook_token))
    servers, ports = await _serve(apps)
    inv = HarnessInvocation(
        prompt=task,
        system_prompt=agent.spec.system_prompt,
        model=model,
        work_dir=work,
        home_dir=home,
        skills_dir=skills_dir if laid else None,
        mcp_url=f"http://127.0.0.1:{ports[1]}{MCP_PATH}",
        mcp_token=gateway_token,
        model_proxy_url=f"http://127.0.0.1:{ports[0]}",
        model_token=proxy.token,
        max_turns=_max_turns(ctx, position),
        native=native,
        hook_command=hook_command() if builtins else (),
        hook_url=f"http://127.0.0.1:{ports[-1]}{HOOK_PATH}" if builtins else "",
        hook_token=hook_token,
    )
    # The tokens are scrubbed like Secret values wherever the harness may echo them.
    for token in (proxy.token, gateway_token, hook_token):
        ctx.secrets.remember(token)
    timeout = node_timeout(ctx, spec)
    transcript = _Transcript(ctx, agent.name, position.node.name)
    ctx.audit.emit(
        "harness.start",
        agent=agent.name,
        node=position.node.name,
        depth=depth,
        harness=spec.kind,
        version=harness.info.version,
        model=model,
        tools=gateway.tool_names,
        builtins=[e.name for e in builtins] or None,
        skills=laid or None,
        timeout_s=timeout,
    )
    started = time.monotonic()
    try:
        code, stderr = await _drive(harness, inv, timeout, transcript, gateway.stop)
    finally:
        await servers.stop()
        await proxy.aclose()
    outcome = harness.parse_events(transcript.lines)
    _audit_end(ctx, position, outcome, code, proxy.calls, started)
    for ended in (gateway.ended, proxy.ended):
        if ended is not None:
            raise ended
    return _verdict(outcome, code, timeout, stderr)


__all__ = ["HARNESS_DIR", "HARNESS_DIR_ENV", "lay_out_skills", "node_timeout", "run_harness"]
