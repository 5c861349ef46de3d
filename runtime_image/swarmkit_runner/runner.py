"""One run, end to end: context, MCP servers, the root agent, the outcome.

A run that parks for a person (AwaitingReview) prints its checkpoint (the journal of every
effect so far, :mod:`.journal`) on one stdout line and puts the line's sha256 in the result;
a resumed run (``journal`` from that checkpoint plus the decision) replays to where it
parked and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field

from swarmkit_api.bundle import Outcome, ReviewItem, RunBundle, RunResult
from swarmkit_api.effects import Effect, outbox_line

from . import egress, genai_stats, replay
from .audit import AuditLog
from .bundle import root_position
from .commands import check_command_packs
from .context import AskHook, Budget, RunContext
from .errors import AwaitingReview, BundleError, RunEnded, StartupError
from .journal import Journal, checkpoint_line
from .loop import AgentRunner
from .mcp_client import McpManager
from .paths import RunnerPaths
from .position import AgentPosition
from .result import make_result
from .secrets import MissingSecret, SecretStore
from .spend import SpendMeter, run_currency
from .toolset import needed_servers


def run_deadline(timeout_seconds: int) -> float:
    """Seconds the runner gives the run. The operator sets the Job's activeDeadlineSeconds
    a grace period later, so the runner ends the run (TimedOut) and writes its result
    before Kubernetes kills the pod."""
    return float(timeout_seconds)


async def execute(
    bundle: RunBundle,
    paths: RunnerPaths,
    audit: AuditLog,
    secrets: SecretStore,
    cancel: asyncio.Event | None = None,
    ask: AskHook | None = None,
    journal: Journal | None = None,
) -> RunResult:
    """Run ``bundle`` and return its result (never raises for run-level failures).

    Setting ``cancel`` stops the run with outcome Cancelled (the CLI sets it on SIGTERM).
    ``ask`` (serve mode) answers the run's questions instead of parking it for review.
    ``journal`` resumes a parked run (its checkpoint and the decision).
    """
    started = time.monotonic()
    calls = genai_stats.begin()  # this run's model calls, for its report
    # The bundle's egress plan (None: policy none) checks every connection from here on.
    egress.install(bundle.egress)
    journal = journal or Journal()
    ctx = _run_context(bundle, paths, audit, secrets, journal)
    ctx.shared.ask, ctx.shared.harness = ask, _harness
    root = root_position(bundle)
    _audit_start(ctx, root)
    runner = AgentRunner(ctx)
    mcp = McpManager(needed_servers(bundle), secrets, audit, bundle.workspace.credentials)
    ctx.mcp = mcp
    recorder = replay.Recorder()
    ending = await _run_root(ctx, runner, mcp, root, cancel, recorder)
    checkpoint_sha = None
    if ending.outcome == "AwaitingReview" and ending.review_items:
        checkpoint_sha = _print_checkpoint(audit, secrets, journal, bundle, ending.review_items[0])
    if journal.resume and journal.new_decision is not None and not journal.applied:
        # The decision found no call waiting for it (the run went elsewhere on replay).
        audit.emit("review.unused", review=journal.new_decision.review, outcome="warning")
    result = _result(ctx, ending, calls)
    if checkpoint_sha is not None:
        result = result.model_copy(update={"checkpoint_sha256": checkpoint_sha})
    outbox_sha = _print_outbox(audit, journal)
    if outbox_sha is not None:
        result = result.model_copy(update={"outbox_sha256": outbox_sha})
    recording_sha = replay.print_line(audit, secrets, recorder)
    if recording_sha is not None:
        result = result.model_copy(update={"recording_sha256": recording_sha})
    _audit_end(ctx, result, started)
    return result


@dataclass(frozen=True)
class _Ending:
    """How the root agent's work ended: the outcome and what the result reports of it."""

    outcome: Outcome
    message: str
    output: str = ""
    review_items: list[ReviewItem] = field(default_factory=list)


def _run_context(
    bundle: RunBundle, paths: RunnerPaths, audit: AuditLog, secrets: SecretStore, journal: Journal
) -> RunContext:
    """The run's context: its budget from the governance and the Run's spend limits."""
    governance = bundle.governance
    return RunContext(
        bundle=bundle,
        paths=paths,
        audit=audit,
        secrets=secrets,
        budget=Budget(
            governance.max_steps_per_run,
            governance.max_tokens_per_run,
            spend=SpendMeter.for_run(
                bundle.run.max_cost,
                bundle.run.max_tokens,
                run_currency(bundle.workspace.model_providers),
            ),
        ),
        topology=bundle.target if bundle.target_kind == "Topology" else None,
        topology_depth=1 if bundle.target_kind == "Topology" else 0,
        journal=journal,
    )


def _audit_start(ctx: RunContext, root: AgentPosition) -> None:
    """``run.start``, and ``run.resume`` when the run resumes with a decision."""
    bundle, journal = ctx.bundle, ctx.journal
    ctx.audit.emit(
        "run.start",
        run=bundle.run.name,
        namespace=bundle.run.namespace,
        target_kind=bundle.target_kind,
        target=bundle.target,
        agent=root.agent.name,
        agents=len(bundle.agents),
        skills=len(bundle.skills),
        resume=journal.resume or None,
    )
    if journal.new_decision is not None:
        d = journal.new_decision
        ctx.audit.emit(
            "run.resume",
            resume=journal.resume,
            recorded_effects=len(journal.entries),
            review=d.review,
            kind=d.kind,
            verdict=d.verdict,
            decided_by=d.decided_by,
            decided_at=d.decided_at or None,
        )


async def _run_root(
    ctx: RunContext,
    runner: AgentRunner,
    mcp: McpManager,
    root: AgentPosition,
    cancel: asyncio.Event | None,
    recorder: replay.Recorder,
) -> _Ending:
    """The root agent's work until it ends, the run is cancelled or its timeout passes
    (in the Run's mode: live and recorded, replayed, or read-only: :mod:`.replay`); the
    runner, the MCP servers and the context are closed in any case."""
    bundle = ctx.bundle

    async def work() -> str:
        ctx.journal.bind()
        check_command_packs(bundle)
        await mcp.start()
        work = runner.run_agent(root, bundle.run.input, 0)
        return await replay.run_as(bundle.run, recorder, work)

    timeout = run_deadline(bundle.run.timeout_seconds)
    work_task = asyncio.create_task(work(), name="run")
    stop_task = asyncio.create_task((cancel or asyncio.Event()).wait(), name="cancel")
    try:
        done, _ = await asyncio.wait(
            {work_task, stop_task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if work_task in done:
            return _ending_of(work_task)
        work_task.cancel()
        with contextlib.suppress(BaseException):
            await work_task
        if stop_task in done:
            return _Ending("Cancelled", "the run was cancelled")
        message = f"run exceeded its timeout of {bundle.run.timeout_seconds}s"
        ctx.audit.emit(
            "limit.exceeded",
            limit="timeoutSeconds",
            value=bundle.run.timeout_seconds,
            outcome="TimedOut",
            message=message,
        )
        return _Ending("TimedOut", message)
    finally:
        stop_task.cancel()
        await _close(runner, mcp, ctx)


def _ending_of(work_task: asyncio.Task[str]) -> _Ending:
    """The outcome of finished work: its answer, or the run-level error it raised."""
    try:
        return _Ending("Succeeded", "the root agent answered", work_task.result())
    except AwaitingReview as exc:
        return _Ending(exc.outcome, exc.message, review_items=exc.items)
    except RunEnded as exc:
        return _Ending(exc.outcome, exc.message)
    except MissingSecret as exc:
        return _Ending("Failed", str(exc))
    except (BundleError, StartupError) as exc:
        return _Ending("ValidationFailed", str(exc))
    except Exception as exc:
        return _Ending("Failed", f"runner error: {type(exc).__name__}: {exc}")


def _result(ctx: RunContext, ending: _Ending, calls: genai_stats.GenAiStats) -> RunResult:
    """The run's result: outcome, capped and scrubbed output, counters, usage and cost."""
    budget = ctx.budget
    result = make_result(
        ending.outcome,
        ending.message,
        ending.output if ending.outcome == "Succeeded" else "",
        ctx.bundle.governance.max_output_bytes,
        budget.input_tokens,
        budget.output_tokens,
        budget.steps,
        ctx.stats.tool_calls,
        ctx.secrets,
        ending.review_items,
        ctx.shared.usage.report(),
    )
    # Tokens per model and their cost (the governance counters above are the same totals).
    result = result.model_copy(update={"usage": budget.spend.report()})
    # This stage's model calls for the operator's GenAI histograms (names scrubbed).
    return result.model_copy(update={"genai": calls.report(ctx.secrets.scrub)})


def _audit_end(ctx: RunContext, result: RunResult, started: float) -> None:
    ctx.audit.emit(
        "run.end",
        outcome=result.outcome,
        message=result.message,
        steps=result.steps,
        tool_calls=result.tool_calls,
        input_tokens=result.usage.input_tokens,
        output_tokens=result.usage.output_tokens,
        cached_input_tokens=result.usage.cached_input_tokens or None,
        cost=result.usage.cost,
        currency=result.usage.currency,
        cost_unknown=result.usage.cost_unknown or None,
        duration_ms=round((time.monotonic() - started) * 1000, 1),
        review_items=[i.wire() for i in result.review_items] or None,
        replayed_effects=ctx.journal.replayed or None,
    )


async def _harness(ctx: RunContext, position: AgentPosition, task: str, depth: int) -> str:
    """A harness node (imported only when one runs: a Run without one never loads it)."""
    from .harness.node import run_harness

    return await run_harness(ctx, position, task, depth)


def _print_checkpoint(
    audit: AuditLog,
    secrets: SecretStore,
    journal: Journal,
    bundle: RunBundle,
    item: ReviewItem,
) -> str:
    """Print the checkpoint line (secrets scrubbed before it is encoded) and audit it."""
    checkpoint = journal.checkpoint(bundle.run.uid, item)
    scrubbed = json.loads(secrets.scrub(json.dumps(checkpoint.wire())))
    line, sha = checkpoint_line(type(checkpoint).model_validate(scrubbed))
    audit.write_raw(line)
    audit.emit(
        "run.checkpoint",
        sha256=sha,
        bytes=len(line),
        effects=len(journal.entries),
        parked_key=item.key,
    )
    return sha


def _print_outbox(audit: AuditLog, journal: Journal) -> str | None:
    """Print this stage's effects on one stdout line (the operator materializes them)."""
    new = journal.new_effects
    if not new:
        return None
    line, sha = outbox_line([Effect.model_validate(e) for e in new])
    audit.write_raw(line)
    audit.emit("run.outbox", sha256=sha, effects=len(new), first_seq=journal.outbox_start)
    return sha


async def _close(runner: AgentRunner, mcp: McpManager, ctx: RunContext) -> None:
    await runner.aclose()
    await mcp.aclose()
    await ctx.aclose()
