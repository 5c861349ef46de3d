"""``composed`` skills: run the ``composes`` skills, in order or in parallel by consensus.

Each component is a skill of the bundle, called through the same pipeline as any skill
(its own tier, scopes, constraints, decision outputs and onFailure; audited as
``skill.call`` with ``via`` naming the composed skill). Granting the composed skill is
what lets the agent run its components this way; it does not grant them on their own.

* ``sequential`` (the default): component 1 gets the call's arguments; each later one gets
  them too, plus ``previous``: the output of the component before it (parsed when it is
  JSON), unless its input schema forbids extra properties without declaring ``previous``.
  A failing component fails the composed call. The answer is the last component's output.
* ``parallel-consensus``: every component runs at once with the call's arguments; each must
  answer a JSON object with a ``verdict`` (decision components do, validated). The majority
  verdict wins (a tie goes to the higher total confidence, then to the earlier component);
  the answer is ``{"verdict", "confidence" (mean of the majority's), "reasoning",
  "agreement" ("k/n"), "votes": [{skill, verdict, confidence}], "dissent": [{skill,
  verdict, confidence, reasoning}], "errors": [{skill, error}]}``, audited as
  ``consensus``. Components that fail or give no verdict are listed in ``errors`` and do
  not vote; with no vote at all the call fails.

A decision composed skill's answer is then checked against its own ``outputs`` (only the
properties it declares when it forbids additional ones).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from swarmkit_api.bundle import BundleAgent, BundleSkill

from . import pipeline
from .catalog import EMPTY_OBJECT_SCHEMA
from .context import RunContext
from .errors import RunEnded, ToolError, ToolRefused
from .output import parse_answer
from .permissions import widest
from .skills import SkillTool

#: Composed skills being prepared right now (preparation is synchronous): a cycle guard.
_preparing: list[str] = []


def _parsed(text: str) -> Any:
    try:
        return parse_answer(text)
    except ValueError:
        return text


def _accepts_previous(schema: dict[str, Any]) -> bool:
    props = schema.get("properties")
    if isinstance(props, dict) and "previous" in props:
        return True
    return schema.get("additionalProperties", True) is not False


def composed_executor(ctx: RunContext, agent: BundleAgent, skill: BundleSkill) -> SkillTool | None:
    if skill.name in _preparing or len(_preparing) >= pipeline.MAX_COMPOSED_DEPTH:
        ctx.warn_once(
            f"composed:{skill.name}:cycle",
            f"composed skill {skill.name} composes itself or nests deeper than "
            f"{pipeline.MAX_COMPOSED_DEPTH}; it is not offered",
            skill=skill.name,
        )
        return None
    _preparing.append(skill.name)
    try:
        return _composed(ctx, agent, skill)
    finally:
        _preparing.pop()


def _composed(ctx: RunContext, agent: BundleAgent, skill: BundleSkill) -> SkillTool | None:
    impl = skill.spec.implementation
    assert impl is not None and impl.composes
    components = _components(ctx, agent, skill, impl.composes)
    if components is None:
        return None
    strategy = impl.strategy or "sequential"
    composition = _Composition(ctx, agent, skill, tuple(components), strategy)
    effects = [p.gate.effects for p in components]
    return SkillTool(
        skill.spec.description,
        components[0].tool.input_schema or EMPTY_OBJECT_SCHEMA,
        composition.sequential if strategy == "sequential" else composition.consensus,
        default_effects=widest(effects),
    )


def _components(
    ctx: RunContext, agent: BundleAgent, skill: BundleSkill, names: list[str]
) -> list[pipeline.Prepared] | None:
    """Each component prepared for ``agent``; None (warned once) when one cannot be."""
    components: list[pipeline.Prepared] = []
    for name in names:
        component = ctx.bundle.skills.get(name)
        if component is None:
            ctx.warn_once(
                f"composed:{skill.name}:{name}",
                f"composed skill {skill.name}: component {name!r} is not in the bundle; "
                "the skill is not offered",
                skill=skill.name,
            )
            return None
        prepared = pipeline.prepare(ctx, agent, component)
        if prepared is None:
            ctx.warn_once(
                f"composed:{skill.name}:{name}",
                f"composed skill {skill.name}: component {name} cannot be called here; "
                "the skill is not offered",
                skill=skill.name,
            )
            return None
        components.append(prepared)
    return components


@dataclass(frozen=True)
class _Composition:
    """A composed skill's components as one agent calls them, and its two strategies."""

    ctx: RunContext
    agent: BundleAgent
    skill: BundleSkill
    components: tuple[pipeline.Prepared, ...]
    strategy: str

    async def run_one(self, prepared: pipeline.Prepared, args: dict[str, Any]) -> str:
        """One component through the pipeline, audited as ``skill.call`` via this skill."""
        t0 = time.monotonic()
        outcome, error = "ok", None
        try:
            return await pipeline.invoke(self.ctx, self.agent, prepared, args, via=self.skill.name)
        except ToolError as exc:
            outcome = "refused" if isinstance(exc, ToolRefused) else "error"
            error = str(exc)
            raise
        finally:
            self.ctx.audit.emit(
                "skill.call",
                agent=self.agent.name,
                skill=prepared.skill.name,
                via=self.skill.name,
                strategy=self.strategy,
                duration_ms=round((time.monotonic() - t0) * 1000, 1),
                outcome=outcome,
                error=error,
            )

    async def sequential(self, args: dict[str, Any]) -> str:
        previous: str | None = None
        for prepared in self.components:
            step_args = dict(args)
            schema = prepared.tool.input_schema or EMPTY_OBJECT_SCHEMA
            if previous is not None and _accepts_previous(schema):
                step_args["previous"] = _parsed(previous)
            previous = await self.run_one(prepared, step_args)
        assert previous is not None
        return previous

    async def consensus(self, args: dict[str, Any]) -> str:
        async def vote(prepared: pipeline.Prepared) -> tuple[str, Any, str | None]:
            try:
                return prepared.skill.name, _parsed(await self.run_one(prepared, dict(args))), None
            except ToolError as exc:
                return prepared.skill.name, None, str(exc)

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(vote(p)) for p in self.components]
        except BaseExceptionGroup as eg:
            ended = eg.subgroup(RunEnded)
            if ended is not None:
                raise ended.exceptions[0] from None
            raise
        results = [t.result() for t in tasks]
        return combine(self.ctx, self.agent, self.skill, results)


def _confidence(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def combine(
    ctx: RunContext,
    agent: BundleAgent,
    skill: BundleSkill,
    results: list[tuple[str, Any, str | None]],
) -> str:
    """The majority verdict of ``results`` (name, parsed answer, error), as JSON."""
    votes: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    reasons: dict[str, str] = {}
    for name, answer, error in results:
        if error is not None:
            errors.append({"skill": name, "error": error})
        elif not isinstance(answer, dict) or "verdict" not in answer:
            errors.append({"skill": name, "error": "answer has no verdict"})
        else:
            votes.append(
                {
                    "skill": name,
                    "verdict": answer["verdict"],
                    "confidence": _confidence(answer.get("confidence")),
                }
            )
            reasons[name] = str(answer.get("reasoning", ""))
    if not votes:
        detail = "; ".join(f"{e['skill']}: {e['error']}" for e in errors)
        raise ToolError(f"no component gave a verdict ({detail})", "NoConsensus")
    counts = Counter(json.dumps(v["verdict"], sort_keys=True) for v in votes)
    order = {
        json.dumps(v["verdict"], sort_keys=True): i for i, v in reversed(list(enumerate(votes)))
    }

    def rank(key: str) -> tuple[int, float, int]:
        total = sum(
            v["confidence"] for v in votes if json.dumps(v["verdict"], sort_keys=True) == key
        )
        return counts[key], total, -order[key]

    winner_key = max(counts, key=rank)
    majority = [v for v in votes if json.dumps(v["verdict"], sort_keys=True) == winner_key]
    dissent = [
        {**v, "reasoning": reasons[v["skill"]]}
        for v in votes
        if json.dumps(v["verdict"], sort_keys=True) != winner_key
    ]
    confidence = round(sum(v["confidence"] for v in majority) / len(majority), 4)
    reasoning = " | ".join(f"{v['skill']}: {reasons[v['skill']]}" for v in majority)
    answer = {
        "verdict": majority[0]["verdict"],
        "confidence": confidence,
        "reasoning": reasoning,
        "agreement": f"{len(majority)}/{len(votes)}",
        "votes": votes,
        "dissent": dissent,
        "errors": errors,
    }
    ctx.audit.emit(
        "consensus",
        agent=agent.name,
        skill=skill.name,
        verdict=answer["verdict"],
        confidence=confidence,
        agreement=answer["agreement"],
        votes=votes,
        dissent=dissent,
        errors=errors or None,
        outcome="ok",
    )
    schema = skill.spec.outputs.as_dict() if skill.spec.outputs is not None else None
    if (
        skill.spec.category == "decision"
        and schema is not None
        and schema.get("additionalProperties") is False
    ):
        declared = set((schema.get("properties") or {}).keys())
        answer = {k: v for k, v in answer.items() if k in declared}
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
