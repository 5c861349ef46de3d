"""Remote agent skills (``implementation.cardUrl``): an A2A agent over JSON-RPC.

* **Card**: fetched on first use and cached for the run (``a2a.card``). ``skillId`` must be
  one of its skills' ids (omitted = the first). The JSON-RPC endpoint is the card's
  ``supportedInterfaces`` entry with ``protocolBinding: JSONRPC`` (A2A 1.0, preferred) or
  its ``url`` (A2A 0.3, ``preferredTransport`` JSONRPC or unset). A 1.0 endpoint is called
  with ``SendMessage`` / ``GetTask`` / ``CancelTask`` and the ``A2A-Version: 1.0`` header; a
  0.3 endpoint with ``message/send`` / ``tasks/get`` / ``tasks/cancel``. Task states are
  normalized to the 0.3 words (``submitted``, ``working``, ``input-required``,
  ``completed``, ``failed``, ``canceled``, ``rejected``, ``auth-required``).
* **Credentials**: ``credentialsRef`` names a Workspace ``credentials`` entry whose Secret
  value is sent as ``Authorization: Bearer …`` to the card URL and to the endpoint, but only
  when the endpoint has the card's origin (scheme, host, port): a card cannot redirect the
  token elsewhere. The card URL's host must be one of the credential's ``allowedHosts``
  (the Workspace admin's list; empty = nowhere), else the call is refused
  (``CredentialNotAllowed``) before anything is sent.
* **Call**: ``message/send`` with the task text, our run id as ``contextId`` (so the two
  sides' records join on it), ``configuration.blocking: false`` (1.0:
  ``returnImmediately: true``) and ``metadata {skillId, correlationId}``; then ``tasks/get``
  (every 0.1 s, growing to 2 s) until the task is terminal or asks for input. Completed:
  the artifacts' text (data parts as JSON; else the status message) is the answer. Failed,
  canceled, rejected or auth-required: a tool error with the remote message (the skill's
  onFailure decides). Past ``timeoutS`` (default 600 s, counted from the first send) the
  remote task is cancelled and the call fails (``A2ATimedOut``); so it is when our side
  stops waiting for any other reason (``constraints.timeoutSeconds``, run cancelled).
* **input-required**, per ``onUnanswerable``:

  * ``agent`` (default): the calling agent gets ``{"status": "input_required", "task_id",
    "question"}`` and answers by calling the skill again with ``{task_id, answer}``
    (audited as ``executor.input_response`` with ``responder: agent:<name>``). After
    ``maxAgentAnswers`` answers on one task (default 2) the next question is relayed;
  * ``relay``: the run parks with outcome AwaitingReview and an ``input_request`` review
    item (the remote task stays open, waiting); the resumed run sends the person's answer
    to that task and follows it, or cancels it when the answer is a rejection or the
    review expired (then ``onReviewTimeout`` decides: the call fails); in serve
    mode the question is relayed to our own caller and its answer sent on;
  * ``abort``: the remote task is cancelled and the call fails with the question as the
    reason.

  A question the remote side marks as a human gate (status message metadata
  ``kind: human_gate``) is never the agent's to answer: the result says
  ``kind: human_gate`` and names the ``gate``; a person resolves it there, and the agent
  may call again with just ``{task_id}`` to see whether it has moved on.

The wire (cards, JSON-RPC, task texts) is :mod:`.a2a_client`; this module is the policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from swarmkit_api.bundle import BundleAgent, BundleSkill, ReviewItem
from swarmkit_api.review import ResumeDecision
from swarmkit_api.skill import Implementation

from . import reviews
from .a2a_client import (
    HTTP_TIMEOUT_SECONDS,
    INTERRUPTED,
    TERMINAL,
    Card,
    Client,
    RemoteTask,
    answer_text,
    normalize_state,
    parse_card,
    status_metadata,
    status_text,
)
from .context import RunContext
from .errors import InvalidArguments, ToolError, ToolRefused
from .handoff import task_text
from .output import schema_problems
from .pipeline import ask_caller
from .secrets import MissingSecret
from .skills import Interim, SkillTool

DEFAULT_TIMEOUT_S = 600
DEFAULT_MAX_AGENT_ANSWERS = 2
POLL_FIRST_SECONDS = 0.1
POLL_MAX_SECONDS = 2.0

REMOTE_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "The task for the remote agent."},
        "context": {"type": "string", "description": "Optional background for it."},
        "task_id": {
            "type": "string",
            "description": "To answer the remote agent's question: the task_id it came with.",
        },
        "answer": {"type": "string", "description": "Your answer to that question."},
    },
}


async def fetch_card(ctx: RunContext, url: str, token: str | None) -> Card:
    cached = ctx.shared.a2a_cards.get(url)
    if isinstance(cached, Card):
        return cached
    t0 = time.monotonic()
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        response = await ctx.http.get(url, headers=headers, timeout=HTTP_TIMEOUT_SECONDS)
    except httpx.HTTPError as exc:
        raise ToolError(
            f"agent card {url} is unreachable: {type(exc).__name__}", "A2AUnreachable"
        ) from None
    if response.status_code >= 300:
        raise ToolError(f"agent card {url}: HTTP {response.status_code}", "A2ACardInvalid")
    try:
        data = response.json()
    except ValueError:
        raise ToolError(f"agent card {url} is not JSON", "A2ACardInvalid") from None
    card = parse_card(url, data)
    ctx.shared.a2a_cards[url] = card
    ctx.audit.emit(
        "a2a.card",
        url=url,
        name=card.name,
        skills=list(card.skills),
        endpoint=card.endpoint,
        protocol=card.version,
        duration_ms=round((time.monotonic() - t0) * 1000, 1),
        outcome="ok",
    )
    return card


def bearer_token(ctx: RunContext, skill: str, ref: str | None, card_url: str) -> str | None:
    """The Workspace credential ``ref``'s value, when its allowedHosts lists the card's host.

    The operator refuses such a Skill at reconcile; a bundle that says otherwise still does
    not get the token out (the endpoint shares the card's origin, checked by the client).
    """
    credential = next((c for c in ctx.bundle.workspace.credentials if c.name == ref), None)
    if ref is None or credential is None:
        return None
    if not credential.allows(card_url):
        raise ToolRefused(
            f"skill {skill} would send Workspace credential {credential.name!r} to "
            f"{card_url}, a host its allowedHosts does not list",
            "CredentialNotAllowed",
        )
    try:
        return ctx.secrets.get(credential.secret_key_ref)
    except MissingSecret as exc:
        raise ToolError(str(exc), "MissingSecret") from None


def remote_executor(ctx: RunContext, agent: BundleAgent, skill: BundleSkill) -> SkillTool:
    remote = _RemoteSkill.of(ctx, agent, skill)
    schema = skill.spec.inputs.as_dict() if skill.spec.inputs is not None else REMOTE_INPUT_SCHEMA
    return SkillTool(
        skill.spec.description,
        schema,
        remote.call,
        validates_inputs=True,
    )


@dataclass(frozen=True)
class _RemoteSkill:
    """One remote agent skill as one calling agent uses it: its settings, read once.

    The steps of a call are its methods: :meth:`call` picks the way in (a resumed run at a
    relayed question, the agent answering or looking at a tracked task, or a new task);
    :meth:`follow` polls to an end or a question; :meth:`question` applies
    ``onUnanswerable``.
    """

    ctx: RunContext
    agent: BundleAgent
    skill: BundleSkill
    impl: Implementation
    card_url: str
    timeout_s: float
    policy: str
    max_answers: int

    @classmethod
    def of(cls, ctx: RunContext, agent: BundleAgent, skill: BundleSkill) -> _RemoteSkill:
        impl = skill.spec.implementation
        assert impl is not None and impl.card_url
        return cls(
            ctx,
            agent,
            skill,
            impl,
            impl.card_url,
            float(impl.timeout_s or DEFAULT_TIMEOUT_S),
            impl.on_unanswerable or "agent",
            impl.max_agent_answers
            if impl.max_agent_answers is not None
            else DEFAULT_MAX_AGENT_ANSWERS,
        )

    def emit(self, event: str, **fields: Any) -> None:
        """An audit line of this skill's calls (naming the calling agent and the skill)."""
        self.ctx.audit.emit(event, agent=self.agent.name, skill=self.skill.name, **fields)

    async def client(self) -> tuple[Client, Card]:
        impl = self.impl
        bearer = bearer_token(self.ctx, self.skill.name, impl.credentials_ref, self.card_url)
        card = await fetch_card(self.ctx, self.card_url, bearer)
        if impl.skill_id is not None and impl.skill_id not in card.skills:
            raise ToolError(
                f"the agent card at {self.card_url} has no skill {impl.skill_id!r} "
                f"(it offers: {', '.join(card.skills) or 'none'})",
                "A2ASkillNotFound",
            )
        return Client(self.ctx, card, bearer), card

    async def call(self, args: dict[str, Any]) -> str:
        rpc, card = await self.client()
        relayed = reviews.decision(self.ctx, "input_request")
        if relayed is not None and relayed.task_id:
            return await self.answered(rpc, card, relayed)
        task_id = args.get("task_id")
        if task_id is not None:
            return await self.on_tracked(rpc, str(task_id), args.get("answer"))
        return await self.start(rpc, card, args)

    async def on_tracked(self, rpc: Client, task_id: str, answer: Any) -> str:
        """The agent comes back to a task it was asked about: answer it, or just look again."""
        skill, agent = self.skill, self.agent
        tracked = self.ctx.shared.a2a_tasks.get(task_id)
        if not isinstance(tracked, RemoteTask) or tracked.skill != skill.name:
            raise InvalidArguments(
                f"task_id {task_id!r} is not a task of skill {skill.name} waiting for an answer"
            )
        if answer is None:  # just look again (e.g. after a human gate)
            task = await rpc.get(tracked.task_id)
        else:
            if tracked.human_gate is not None:
                raise ToolRefused(
                    f"task {tracked.task_id} waits on the human gate {tracked.human_gate} "
                    "on the remote side; a person resolves it there",
                    "HumanGate",
                )
            tracked.answers += 1
            self.emit(
                "executor.input_response",
                task_id=tracked.task_id,
                responder=f"agent:{agent.name}",
                answer=str(answer),
                answers=tracked.answers,
            )
            task = await rpc.send(str(answer), self.impl.skill_id, tracked.task_id)
        return await self.follow(rpc, tracked, task)

    async def start(self, rpc: Client, card: Card, args: dict[str, Any]) -> str:
        """A new remote task with the call's arguments as its text."""
        skill = self.skill
        if skill.spec.inputs is not None:
            problems = schema_problems(skill.spec.inputs.as_dict(), args)
            if problems:
                raise InvalidArguments("; ".join(problems))
        text = task_text({k: v for k, v in args.items() if k not in ("task_id", "answer")})
        skill_id = self.impl.skill_id or (card.skills[0] if card.skills else None)
        task = await rpc.send(text, skill_id, None)
        tracked = RemoteTask(
            str(task.get("id") or ""), skill.name, self.agent.name, card, time.monotonic()
        )
        self.emit(
            "a2a.send",
            url=card.endpoint,
            protocol=card.version,
            task_id=tracked.task_id,
            context_id=self.ctx.run_id,
            remote_skill=skill_id,
            state=normalize_state((task.get("status") or {}).get("state")),
        )
        return await self.follow(rpc, tracked, task)

    async def follow(self, rpc: Client, tracked: RemoteTask, task: dict[str, Any]) -> str:
        """Poll until terminal or a question; apply the policy."""
        task, state, polls = await self.poll(rpc, tracked, task)
        self.emit(
            "a2a.task",
            task_id=tracked.task_id,
            state=state,
            polls=polls,
            duration_ms=round((time.monotonic() - tracked.started) * 1000, 1),
            outcome="ok" if state in ("completed", "input-required") else state,
        )
        if state == "completed":
            self.ctx.shared.a2a_tasks.pop(tracked.task_id, None)
            return answer_text(task)
        if state == "input-required":
            return await self.question(rpc, tracked, task)
        self.ctx.shared.a2a_tasks.pop(tracked.task_id, None)
        detail = status_text(task) or state
        code = {"failed": "RemoteTaskFailed", "auth-required": "RemoteAuthRequired"}.get(
            state, "RemoteTaskEnded"
        )
        raise ToolError(f"remote task {tracked.task_id} {state}: {detail}", code)

    async def poll(
        self, rpc: Client, tracked: RemoteTask, task: dict[str, Any]
    ) -> tuple[dict[str, Any], str, int]:
        """``(task, state, polls)`` once terminal or interrupted; past timeoutS the task is
        cancelled; when our side stops waiting for any other reason, too."""
        timeout_s = self.timeout_s
        delay = POLL_FIRST_SECONDS
        polls = 0
        done = False
        try:
            while True:
                state = normalize_state((task.get("status") or {}).get("state"))
                if state in TERMINAL or state in INTERRUPTED:
                    break
                if not tracked.task_id:
                    break
                if time.monotonic() - tracked.started > timeout_s:
                    await rpc.cancel(tracked.task_id, f"timeoutS ({timeout_s:g}s) passed")
                    done = True
                    raise ToolError(
                        f"remote task {tracked.task_id} did not finish within {timeout_s:g}s "
                        "(timeoutS); it was cancelled",
                        "A2ATimedOut",
                    )
                await asyncio.sleep(delay)
                delay = min(POLL_MAX_SECONDS, delay * 1.5)
                polls += 1
                task = await rpc.get(tracked.task_id)
            done = True
        finally:
            if not done and tracked.task_id:
                with contextlib.suppress(BaseException):
                    await asyncio.shield(rpc.cancel(tracked.task_id, "the call was stopped"))
        return task, state, polls

    async def question(self, rpc: Client, tracked: RemoteTask, task: dict[str, Any]) -> str:
        """The remote task asks for input: a human gate, or ``onUnanswerable`` decides."""
        text = status_text(task) or "(the remote agent asks for input)"
        meta = status_metadata(task)
        tracked.question = text
        self.ctx.shared.a2a_tasks[tracked.task_id] = tracked
        if meta.get("kind") == "human_gate":
            return self.human_gate(tracked, text, str(meta.get("gate") or "human gate"))
        effective = self.policy
        if effective == "agent" and tracked.answers >= self.max_answers:
            effective = "relay"
        self.emit(
            "executor.input_request",
            task_id=tracked.task_id,
            question=text,
            policy=effective,
            answers=tracked.answers,
        )
        if effective == "agent":
            return Interim(
                json.dumps(
                    {"status": "input_required", "task_id": tracked.task_id, "question": text}
                )
            )
        if effective == "abort":
            self.ctx.shared.a2a_tasks.pop(tracked.task_id, None)
            await rpc.cancel(tracked.task_id, "onUnanswerable: abort")
            raise ToolError(
                f"the remote agent asked {text!r} and onUnanswerable is abort; task "
                f"{tracked.task_id} was cancelled",
                "A2AInputRequired",
            )
        return await self.relay(rpc, tracked, text)

    def human_gate(self, tracked: RemoteTask, text: str, gate: str) -> str:
        """A question the remote side keeps for a person: never the agent's to answer."""
        tracked.human_gate = gate
        self.emit(
            "executor.input_request",
            task_id=tracked.task_id,
            question=text,
            kind="human_gate",
            gate=gate,
            policy="human_gate",
        )
        return Interim(
            json.dumps(
                {
                    "status": "input_required",
                    "kind": "human_gate",
                    "gate": gate,
                    "task_id": tracked.task_id,
                    "question": text,
                }
            )
        )

    async def relay(self, rpc: Client, tracked: RemoteTask, text: str) -> str:
        """Relay the question: to our own caller in serve mode, else park the run for a person."""
        ctx = self.ctx
        item = ReviewItem(
            kind="input_request",
            skill=self.skill.name,
            agent=self.agent.name,
            question=text,
            task_id=tracked.task_id,
        )
        if ctx.shared.ask is not None:  # serve mode: relay the question to our caller
            answer = await ask_caller(ctx, item)
            tracked.answers += 1
            task = await rpc.send(answer, self.impl.skill_id, tracked.task_id)
            return await self.follow(rpc, tracked, task)
        raise reviews.park(
            ctx,
            "input_request",
            text,
            agent=self.agent.name,
            skill=self.skill,
            tool=self.skill.name,
            context=(
                f"remote agent {tracked.card.name or self.card_url} (task {tracked.task_id}) asks"
            ),
            task_id=tracked.task_id,
        )

    async def answered(self, rpc: Client, card: Card, found: ResumeDecision) -> str:
        """A resumed run at a relayed question: send the person's answer to the waiting
        remote task and follow it, or cancel the task (rejected, or no answer in time)."""
        ctx, skill = self.ctx, self.skill
        task_id = str(found.task_id)
        tracked = RemoteTask(task_id, skill.name, self.agent.name, card, time.monotonic())
        if found.verdict in ("reject", "timeout"):
            why = (
                "the relayed question was rejected"
                if found.verdict == "reject"
                else ("no answer to the relayed question in time")
            )
            await rpc.cancel(task_id, why)
            if found.verdict == "timeout":
                raise reviews.timed_out(ctx, found, skill, f"remote task {task_id} cancelled")
            raise ToolError(
                f"remote task {task_id} was cancelled: {reviews.by(found)}", "A2AInputRejected"
            )
        answer = found.text or "approved"
        tracked.answers += 1
        self.emit(
            "executor.input_response",
            task_id=task_id,
            responder=f"user:{found.decided_by}",
            review=found.review,
            answer=answer,
            answers=tracked.answers,
        )
        task = await rpc.send(answer, self.impl.skill_id, task_id)
        return await self.follow(rpc, tracked, task)
