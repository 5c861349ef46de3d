"""Funnel gates: every artifact of a gated topology node passes validate → judge → review →
approve before the run goes on.

When a node's agent gives its final answer (the *artifact*) and the node names a Funnel
(pinned in the bundle's topology), :meth:`Gate.assess` runs the layers in their fixed order:

1. ``validate`` (in-process, no model): the artifact as JSON against ``schema``;
   ``sliceBudget`` and ``citedChange`` over its ``diff``. With ``autocorrect`` (default) an
   invalid shape is first sent back once with the field-specific problems, without counting
   a retry.
2. ``judge``: the decision skill (called like any skill, under its governance, journaled)
   scores the artifact; ``confidence`` below ``threshold`` is a failure whose critique is
   the skill's ``reasoning``.
3. ``review``: the reviewer agent answers ``{findings:[{severity, message}]}``; a finding at
   or above ``routeBackAt`` is a failure, lower ones travel to the approval.
4. ``approve``: the run parks (outcome AwaitingReview, a ``funnel_approval`` review item
   carrying the :class:`GateReport`); the operator opens the Review and resumes the run once
   the quorum holds (verdict approve) or someone rejects. Only this layer ends the gate.
   A person may instead ask for a revision (verdict ``revise``, with a comment): the
   comment goes back to the drafting agent, the new draft re-enters at ``validate`` and
   parks for a new approval round whose report carries ``round`` and a unified ``diff``
   against the artifact shown in the previous round. A revision is a new draft but not a
   retry: it does not use up ``maxRetries`` (that budget bounds the automated layers;
   people bound the revisions, each round waiting at most the review timeout).

A failure of an automated layer is a retry: the drafting agent gets the critique in its
next prompt and the new draft re-enters at ``validate``, up to the funnel's ``maxRetries``.
Exhaustion never passes silently: ``onExhausted: approve`` (default) parks for the approval
with ``exhausted`` and the last critique attached; ``fail`` ends the run (Failed). Every
layer is audited (``funnel.validate``, ``funnel.judge``, ``funnel.review``, ``funnel.retry``,
``funnel.exhausted``, ``funnel.approval``) with the funnel, node and attempt, and the
outcomes of validate/judge/review and the retries of each approval round are tallied into
its report (``layerResults``, ``retries``: the operator's metrics count them). The reviewer
runs read-only (:mod:`.readonly`).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from swarmkit_api.funnel import SEVERITIES, Finding, FunnelSpec, GateReport, LayerResult
from swarmkit_api.review import ResumeDecision

from . import pipeline, readonly, reviews
from .context import RunContext
from .errors import RunFailed, ToolError
from .output import answer_problems, feedback, parse_answer
from .position import AgentPosition

#: What a reviewer agent must answer.
FINDINGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "severity": {"enum": list(SEVERITIES)},
                    "message": {"type": "string"},
                },
                "required": ["severity", "message"],
            },
        }
    },
    "required": ["findings"],
}
ARTIFACT_CHARS = 16000
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")

RunAgent = Callable[[AgentPosition, str, dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class Redraft:
    """Send this back to the drafting agent and assess its next answer."""

    prompt: str


def changed_lines(diff: str) -> dict[str, set[int]]:
    """File → the new-file line numbers a unified diff adds (deleted-only files: empty)."""
    files: dict[str, set[int]] = {}
    path: str | None = None
    line = 0
    for raw in diff.splitlines():
        if raw.startswith("+++ "):
            target = raw[4:].split("\t", 1)[0].strip()
            path = None if target == "/dev/null" else target.removeprefix("b/")
            if path is not None:
                files.setdefault(path, set())
        elif raw.startswith("@@"):
            m = _HUNK.match(raw)
            line = int(m.group(1)) if m else line
        elif path is None or raw.startswith("--- "):
            continue
        elif raw.startswith("+"):
            files[path].add(line)
            line += 1
        elif not raw.startswith("-"):
            line += 1
    return files


def diff_problems(spec: FunnelSpec, value: Any) -> list[str]:
    """``sliceBudget`` and ``citedChange`` problems of a parsed artifact."""
    layer = spec.validate_
    if layer is None or (layer.slice_budget is None and not layer.cited_change):
        return []
    diff = value.get("diff") if isinstance(value, dict) else None
    if not isinstance(diff, str):
        return ["diff: the artifact carries no unified diff (a `diff` string)"]
    files = changed_lines(diff)
    problems: list[str] = []
    budget = layer.slice_budget
    if budget is not None:
        added = sum(len(lines) for lines in files.values())
        if budget.max_diff_lines is not None and added > budget.max_diff_lines:
            problems.append(
                f"diff: {added} added lines, over the slice budget of {budget.max_diff_lines}; "
                "split the change"
            )
        if budget.max_files is not None and len(files) > budget.max_files:
            problems.append(
                f"diff: {len(files)} files touched, over the slice budget of {budget.max_files}"
            )
    if layer.cited_change:
        cited: set[str] = set()
        for n, c in enumerate(value.get("citations") or []):
            path = str(c.get("path", "")) if isinstance(c, dict) else ""
            lines = [int(x) for x in (c.get("lines") or []) if isinstance(x, int)] if path else []
            changed = files.get(path)
            cited.add(path)
            if not changed or (lines and not any(x in changed for x in lines)):
                problems.append(
                    f"citations[{n}]: {path or '(no path)'} {lines or ''} was not changed by "
                    "the diff"
                )
        problems += [
            f"diff: {p} was changed but no citation names it"
            for p in sorted(files)
            if p not in cited
        ]
    return problems


class Gate:
    """The funnel gate of one agent invocation at a gated node (see the module doc)."""

    def __init__(
        self, ctx: RunContext, position: AgentPosition, name: str, spec: FunnelSpec, run: RunAgent
    ) -> None:
        self.ctx = ctx
        self.position = position
        self.name = name
        self.spec = spec
        self.run_agent = run
        self.node = position.node.name if position.node is not None else ""
        self.attempt = 1
        self.retries = 0
        self.corrected = False
        self.report = GateReport(funnel=name, node=self.node)
        #: The approval round, and the artifact (scrubbed) shown in the previous round.
        self.round = 1
        self.shown: str | None = None
        #: (layer, outcome) → drafts, and retries, in this round (the report carries them;
        #: a resumed run replays the same drafts, so it rebuilds the same tally).
        self.tally: dict[tuple[str, str], int] = {}
        self.round_retries = 0

    def _audit(self, event: str, started: float, **fields: Any) -> None:
        key = (event.removeprefix("funnel."), str(fields.get("outcome")))
        self.tally[key] = self.tally.get(key, 0) + 1
        self.ctx.audit.emit(
            event,
            funnel=self.name,
            node=self.node,
            agent=self.position.agent.name,
            attempt=self.attempt,
            duration_ms=round((time.monotonic() - started) * 1000, 2),
            **fields,
        )

    async def assess(self, artifact: str) -> str | Redraft:
        """The artifact once approved (resumed runs), or what to ask the drafter next;
        raises AwaitingReview (parks for the approval) or RunFailed."""
        self.report = GateReport(
            funnel=self.name, node=self.node, artifact=artifact[:ARTIFACT_CHARS]
        )
        for layer in (self._validate, self._judge, self._review):
            critique = await layer(artifact)
            if isinstance(critique, Redraft):
                return critique  # an autocorrect re-ask: not a retry
            if critique is not None:
                return await self._retry(critique, artifact)
        return await self._approve(artifact)

    async def _validate(self, artifact: str) -> str | Redraft | None:
        layer = self.spec.validate_
        if layer is None:
            return None
        t0 = time.monotonic()
        schema = layer.schema_.as_dict() if layer.schema_ is not None else None
        problems = answer_problems(schema, artifact) if schema is not None else []
        if not problems and (layer.slice_budget is not None or layer.cited_change):
            try:
                problems = diff_problems(self.spec, parse_answer(artifact))
            except ValueError as exc:
                problems = [f"(root): the artifact is not valid JSON ({exc})"]
        self.report = self.report.model_copy(update={"validation": problems})
        if not problems:
            self._audit("funnel.validate", t0, outcome="ok")
            return None
        if layer.autocorrect and not self.corrected:
            self.corrected = True
            self._audit("funnel.validate", t0, outcome="autocorrect", problems=problems)
            return Redraft(feedback(schema or {}, problems))
        self._audit("funnel.validate", t0, outcome="failed", problems=problems)
        return "Validation failed:\n" + "\n".join(f"- {p}" for p in problems)

    async def _judge(self, artifact: str) -> str | Redraft | None:
        layer = self.spec.judge
        if layer is None:
            return None
        t0 = time.monotonic()
        skill = self.ctx.bundle.skills.get(layer.skill)
        agent = self.position.agent
        prepared = pipeline.prepare(self.ctx, agent, skill) if skill is not None else None
        if prepared is None:
            raise RunFailed(f"funnel {self.name}: judge skill {layer.skill} is not callable")
        try:
            answer = await pipeline.invoke(self.ctx, agent, prepared, {"input": artifact})
            value = json.loads(answer)
            score = float(value["confidence"])
            reasoning = str(value.get("reasoning") or "")
        except (ToolError, ValueError, KeyError, TypeError) as exc:
            why = exc.message if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
            self._audit("funnel.judge", t0, outcome="error", error=why)
            return f"The judge could not score the artifact: {why}"
        self.report = self.report.model_copy(update={"score": score, "critique": reasoning})
        passed = score >= layer.threshold
        self._audit(
            "funnel.judge",
            t0,
            outcome="ok" if passed else "below_threshold",
            skill=layer.skill,
            score=score,
            threshold=layer.threshold,
        )
        if passed:
            return None
        return (
            f"A judge scored your answer {score:g}, below the threshold of "
            f"{layer.threshold:g}. Critique:\n{reasoning}"
        )

    async def _review(self, artifact: str) -> str | Redraft | None:
        layer = self.spec.review
        if layer is None:
            return None
        t0 = time.monotonic()
        reviewer = self.ctx.bundle.agents.get(layer.agent)
        if reviewer is None:
            raise RunFailed(f"funnel {self.name}: reviewer agent {layer.agent} is not in the run")
        task = (
            "Review this artifact. Answer only JSON {findings:[{severity, message}]} with "
            f"severity one of {', '.join(SEVERITIES)}.\n\n{artifact}"
        )
        # Read-only whatever it was granted (the operator checks the grants too).
        with readonly.reviewer(f"the reviewer of funnel {self.name}"):
            answer = await self.run_agent(
                AgentPosition(reviewer, None, self.position.topology), task, FINDINGS_SCHEMA
            )
        findings = [Finding.model_validate(f) for f in parse_answer(answer)["findings"]]
        bar = SEVERITIES.index(layer.route_back_at)
        blocking = [f for f in findings if SEVERITIES.index(f.severity) >= bar]
        kept = [f for f in findings if SEVERITIES.index(f.severity) < bar]
        self.report = self.report.model_copy(update={"findings": kept})
        self._audit(
            "funnel.review",
            t0,
            outcome="route_back" if blocking else "ok",
            reviewer=layer.agent,
            findings=len(findings),
            blocking=len(blocking),
        )
        if not blocking:
            return None
        lines = "\n".join(f"- [{f.severity}] {f.message}" for f in blocking)
        self.report = self.report.model_copy(update={"critique": lines})
        return f"A reviewer found problems you must fix:\n{lines}"

    async def _retry(self, critique: str, artifact: str) -> str | Redraft:
        if self.retries < self.spec.max_retries:
            self.retries += 1
            self.round_retries += 1
            self.attempt += 1
            self.corrected = False
            self.ctx.audit.emit(
                "funnel.retry",
                funnel=self.name,
                node=self.node,
                attempt=self.attempt,
                of=self.spec.max_retries + 1,
                critique=critique,
                outcome="retry",
            )
            return Redraft(f"{critique}\n\nRevise your answer and answer again in full.")
        self.report = self.report.model_copy(
            update={"exhausted": True, "critique": critique[:4096]}
        )
        self.ctx.audit.emit(
            "funnel.exhausted",
            funnel=self.name,
            node=self.node,
            attempt=self.attempt,
            on_exhausted=self.spec.on_exhausted,
            critique=critique,
            outcome="failed" if self.spec.on_exhausted == "fail" else "approval",
        )
        if self.spec.on_exhausted == "fail":
            raise RunFailed(
                f"funnel {self.name} at node {self.node}: retries exhausted after "
                f"{self.attempt} draft(s) (onExhausted: fail): {critique.splitlines()[0]}"
            )
        return await self._approve(artifact)

    async def _approve(self, artifact: str) -> str | Redraft:
        """The approve layer as one journal effect: its own key, so a resumed run finds
        the decision exactly here (not at an earlier draft of the same agent). Its value is
        the decision (approve or revise); the round's state is updated outside the effect
        so a replayed run rebuilds it."""

        async def step() -> dict[str, str]:
            decided = reviews.decision(self.ctx, "funnel_approval")
            if decided is not None:
                return self._decided(decided.verdict, reviews.by(decided), decided)
            self._park(artifact)

        outcome = await self.ctx.journal.effect("funnel", step, dict, _outcome)
        if outcome.get("verdict") != "revise":
            return artifact
        self.shown = self.ctx.secrets.scrub(artifact[:ARTIFACT_CHARS])
        self.round += 1
        self.tally, self.round_retries = {}, 0
        self.attempt += 1
        self.corrected = False
        return Redraft(
            f"{outcome.get('by', 'A reviewer')} asked for a revision before approving:\n"
            f"{outcome.get('text', '')}\n\nRevise your answer and answer again in full."
        )

    def _park(self, artifact: str) -> NoReturn:
        scrub = self.ctx.secrets.scrub  # the report lands in a Review and the Run's status
        r = self.report
        report = r.model_copy(
            update={
                "attempts": self.attempt,
                "round": self.round,
                "layer_results": [
                    LayerResult(layer=layer, outcome=outcome, count=n)
                    for (layer, outcome), n in sorted(self.tally.items())
                ],
                "retries": self.round_retries,
                "diff": artifact_diff(self.shown, scrub(r.artifact), self.round),
                "artifact": scrub(r.artifact),
                "critique": scrub(r.critique),
                "validation": [scrub(v) for v in r.validation],
                "findings": [
                    f.model_copy(update={"message": scrub(f.message)}) for f in r.findings
                ],
            }
        )
        question = (
            f"Approve the artifact of node {self.node} (agent {self.position.agent.name}) "
            f"through funnel {self.name}?"
            + (" The automated layers' retries are exhausted." if report.exhausted else "")
        )
        self.ctx.audit.emit(
            "funnel.approval",
            funnel=self.name,
            node=self.node,
            attempt=self.attempt,
            exhausted=report.exhausted,
            score=report.score,
            round=self.round,
            outcome="AwaitingReview",
        )
        parked = reviews.park(
            self.ctx,
            "funnel_approval",
            question,
            agent=self.position.agent.name,
            context=report.critique or None,
        )
        if isinstance(parked, ToolError):
            raise RunFailed(f"funnel {self.name}: {parked.message}")
        parked.items = [i.model_copy(update={"gate": report}) for i in parked.items]
        raise parked

    def _decided(self, verdict: str, by: str, found: ResumeDecision) -> dict[str, str]:
        self.ctx.audit.emit(
            "funnel.decided",
            funnel=self.name,
            node=self.node,
            verdict=verdict,
            by=by,
            round=self.round,
            outcome="failed" if verdict in ("reject", "timeout") else "ok",
        )
        if verdict == "approve":
            return {"verdict": "approve"}
        if verdict == "revise":
            return {"verdict": "revise", "by": found.decided_by, "text": found.text}
        if verdict == "timeout":
            raise RunFailed(f"funnel {self.name}: the approval expired ({by})")
        raise RunFailed(f"funnel {self.name} at node {self.node}: rejected ({by})")


def _outcome(value: Any) -> dict[str, str]:
    """A recorded approve-layer effect: the decision (journals written before revisions
    existed recorded the approved artifact itself: an approval)."""
    return dict(value) if isinstance(value, dict) else {"verdict": "approve"}


def _diffable(text: str) -> list[str]:
    """The artifact's lines for a diff (JSON pretty-printed, so a change is one line)."""
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    return text.splitlines(keepends=True)


def artifact_diff(before: str | None, after: str, round_: int) -> str:
    """Unified diff of the artifact shown in round ``round_`` - 1 and the one now (capped;
    empty in the first round)."""
    if before is None:
        return ""
    lines = difflib.unified_diff(
        _diffable(before),
        _diffable(after),
        fromfile=f"round {round_ - 1}",
        tofile=f"round {round_}",
    )
    diff = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return diff if len(diff) <= ARTIFACT_CHARS else diff[: ARTIFACT_CHARS - 1] + "…"


def gate_for(ctx: RunContext, position: AgentPosition, run: RunAgent) -> Gate | None:
    """The gate of ``position`` when its node names a funnel (None otherwise)."""
    node = position.node
    if node is None or node.funnel is None or position.topology is None:
        return None
    topology = ctx.bundle.topologies.get(position.topology)
    spec = topology.funnels.get(node.funnel.name) if topology is not None else None
    if spec is None:  # the operator pins every funnel a node names; never skip a gate
        raise RunFailed(f"node {node.name} names funnel {node.funnel.name}, not in the bundle")
    return Gate(ctx, position, node.funnel.name, spec, run)


__all__ = [
    "FINDINGS_SCHEMA",
    "Gate",
    "Redraft",
    "artifact_diff",
    "changed_lines",
    "diff_problems",
    "gate_for",
]
