"""Served tasks: each one a run of the topology, with its own id, audit stream and scratch.

A task runs :func:`swarmkit_runner.runner.execute` on the served bundle with the run's
``input`` = the message text, ``uid`` = the task id and the correlation id of the caller
(its ``metadata.correlationId``, else its ``contextId``), so the same loop, limits,
default-deny catalog and audit apply as to a Run, and two workspaces' audit lines join on
the correlation id. Its scratch directory is ``<scratch>/tasks/<id>`` (removed afterwards).

States (the A2A 0.3 words): ``submitted`` → ``working`` → ``completed`` (the root agent's
answer is the artifact) | ``failed`` (the run's one-line reason) | ``canceled``; and
``input-required`` while the topology asks a question (``ctx.shared.ask``: a skill
escalating to a human, a remote agent's relayed question): the next message on the task
is the answer and the run goes on from where it asked. Past ``input_timeout`` without an
answer the task fails.

Capacity: at most ``max_concurrent`` unfinished tasks (working or waiting for an answer);
:meth:`TaskManager.start` raises :class:`Busy` past it. Draining (SIGTERM) refuses new
tasks (:class:`Draining`), lets running ones finish until the deadline, then cancels the
rest, so each ends in a state a caller can read: none is dropped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from swarmkit_api.bundle import ReviewItem, RunBundle, RunResult

from ..audit import AuditLog
from ..errors import RunFailed
from ..paths import RunnerPaths
from ..runner import execute
from ..secrets import SecretStore
from .metrics import ServeMetrics
from .wire import INTERRUPTED, TASK_NOT_CANCELABLE, TERMINAL, Incoming, Msg, RpcError

#: Finished tasks kept for tasks/get (the oldest are dropped first past the count).
RETAIN_SECONDS = 3600.0
RETAIN_MAX = 1000


class Busy(Exception):
    """The replica runs ``max_concurrent`` tasks already."""


class Draining(Exception):
    """The replica is shutting down and takes no new task."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class ServedTask:
    """One task and everything a caller may ask about it."""

    id: str
    context_id: str
    correlation_id: str
    input: str
    state: str = "submitted"
    history: list[Msg] = field(default_factory=list)
    status_message: Msg | None = None
    answer: str | None = None
    artifact_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timestamp: str = field(default_factory=_now)
    created: float = field(default_factory=time.monotonic)
    finished: float | None = None
    result: RunResult | None = None
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    pending: asyncio.Future[str] | None = None
    runner: asyncio.Task[None] | None = None
    #: Bumped on every change; waiters wake on it.
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    version: int = 0

    @property
    def done(self) -> bool:
        return self.state in TERMINAL

    @property
    def settled(self) -> bool:
        """Terminal, or waiting for the caller (a blocking send returns then)."""
        return self.state in TERMINAL or self.state in INTERRUPTED


@dataclass
class TaskManager:
    """Starts, answers, cancels and drains the served tasks of one replica."""

    bundle: RunBundle
    paths: RunnerPaths
    secrets: SecretStore
    metrics: ServeMetrics
    max_concurrent: int = 4
    input_timeout: float = 3600.0
    tasks: dict[str, ServedTask] = field(default_factory=dict)
    draining: bool = False

    @property
    def active(self) -> int:
        return sum(1 for t in self.tasks.values() if not t.done)

    def get(self, task_id: str) -> ServedTask | None:
        return self.tasks.get(task_id)

    def start(self, incoming: Incoming) -> ServedTask:
        """A new task for ``incoming`` (raises :class:`Draining` / :class:`Busy`)."""
        if self.draining:
            raise Draining()
        if self.active >= self.max_concurrent:
            raise Busy()
        self._prune()
        task_id = str(uuid.uuid4())
        context_id = incoming.context_id or str(uuid.uuid4())
        correlation = str(incoming.metadata.get("correlationId") or context_id)
        task = ServedTask(task_id, context_id, correlation, incoming.text)
        task.history.append(Msg("user", incoming.text, incoming.message_id or str(uuid.uuid4())))
        self.tasks[task_id] = task
        self.metrics.started()
        task.runner = asyncio.create_task(self._run(task), name=f"task-{task_id}")
        return task

    async def answer(self, task: ServedTask, incoming: Incoming) -> None:
        """The caller's answer to the task's open question."""
        pending = task.pending
        if task.state != "input-required" or pending is None or pending.done():
            raise RpcError(
                TASK_NOT_CANCELABLE,
                f"task {task.id} is {task.state}, not waiting for input",
            )
        task.history.append(Msg("user", incoming.text, incoming.message_id or str(uuid.uuid4())))
        pending.set_result(incoming.text)
        await self._set(task, "working", None)

    async def cancel(self, task: ServedTask) -> None:
        """Stop the task's run (it ends ``canceled``, also while waiting for an answer)."""
        task.cancel.set()

    async def wait(self, task: ServedTask, until: Callable[[ServedTask], bool], since: int) -> int:
        """Wait until ``task`` changed after version ``since`` and ``until(task)`` holds."""
        async with task.changed:
            await task.changed.wait_for(lambda: task.version > since and until(task))
            return task.version

    async def wait_changed(self, task: ServedTask, since: int) -> int:
        async with task.changed:
            await task.changed.wait_for(lambda: task.version > since)
            return task.version

    async def _set(self, task: ServedTask, state: str, message: Msg | None) -> None:
        async with task.changed:
            task.state = state
            task.status_message = message
            task.timestamp = _now()
            task.version += 1
            if message is not None:
                task.history.append(message)
            task.changed.notify_all()

    def _audit(self, task: ServedTask) -> AuditLog:
        """The task's audit stream: its own run id, the caller's correlation id."""
        return AuditLog(task.id, task.correlation_id, self.secrets)

    async def _run(self, task: ServedTask) -> None:
        started = time.monotonic()
        audit = self._audit(task)
        scratch = self.paths.scratch / "tasks" / task.id
        scratch.mkdir(parents=True, exist_ok=True)
        paths = replace(self.paths, scratch=scratch)
        run = self.bundle.run.model_copy(
            update={
                "name": f"{self.bundle.run.name}/{task.id}",
                "uid": task.id,
                "correlation_id": task.correlation_id,
                "input": task.input,
            }
        )
        bundle = self.bundle.model_copy(update={"run": run})
        audit.emit("a2a.task.start", task_id=task.id, context_id=task.context_id)

        async def ask(item: ReviewItem) -> str:
            loop = asyncio.get_running_loop()
            task.pending = loop.create_future()
            meta = {"kind": item.kind, "skill": item.skill, "agent": item.agent}
            await self._set(
                task,
                "input-required",
                Msg(
                    "agent", item.question, str(uuid.uuid4()), {k: v for k, v in meta.items() if v}
                ),
            )
            try:
                return await asyncio.wait_for(asyncio.shield(task.pending), self.input_timeout)
            except TimeoutError:
                raise RunFailed(
                    f"no answer to {item.question!r} within {self.input_timeout:g}s"
                ) from None
            finally:
                task.pending = None

        await self._set(task, "working", None)
        result: RunResult | None = None
        try:
            result = await execute(bundle, paths, audit, self.secrets, task.cancel, ask=ask)
        finally:
            with contextlib.suppress(OSError):
                shutil.rmtree(scratch, ignore_errors=True)
            task.result = result
            task.finished = time.monotonic()
            state, text = _outcome(result)
            if state == "completed":
                task.answer = text
                message = None
            else:
                message = Msg("agent", text, str(uuid.uuid4()))
            await self._set(task, state, message)
            self.metrics.finished(state, time.monotonic() - started)
            audit.emit(
                "a2a.task.end",
                task_id=task.id,
                context_id=task.context_id,
                state=state,
                duration_ms=round((time.monotonic() - started) * 1000, 1),
            )

    def _prune(self) -> None:
        now = time.monotonic()
        finished = sorted(
            (t for t in self.tasks.values() if t.finished is not None),
            key=lambda t: t.finished or 0.0,
        )
        extra = max(0, len(finished) - RETAIN_MAX)
        for i, task in enumerate(finished):
            if i < extra or now - (task.finished or now) > RETAIN_SECONDS:
                self.tasks.pop(task.id, None)

    async def drain(self, deadline: float) -> tuple[int, int]:
        """Refuse new tasks; let running ones finish until ``deadline`` (monotonic), then
        cancel the rest and wait for them to record it. Returns (finished, cancelled)."""
        self.draining = True
        running = [t for t in self.tasks.values() if not t.done and t.runner is not None]
        runners = [t.runner for t in running if t.runner is not None]
        if runners:
            await asyncio.wait(runners, timeout=max(0.0, deadline - time.monotonic()))
        left = [t for t in running if not t.done]
        for task in left:
            await self.cancel(task)
        rest = [t.runner for t in left if t.runner is not None]
        if rest:
            await asyncio.wait(rest, timeout=10.0)
        return len(running) - len(left), len(left)


def _outcome(result: RunResult | None) -> tuple[str, str]:
    """(task state, answer or reason) of a finished run."""
    if result is None:
        return "failed", "the task ended without a result (runner error)"
    if result.outcome == "Succeeded":
        return "completed", result.output
    if result.outcome == "Cancelled":
        return "canceled", result.message or "the task was cancelled"
    if result.outcome == "AwaitingReview":
        return "failed", f"the topology needs a person's review: {result.message}"
    return "failed", f"{result.outcome}: {result.message}"


__all__ = ["Busy", "Draining", "ServedTask", "TaskManager"]
