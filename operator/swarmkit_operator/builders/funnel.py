"""The Funnels a Topology's nodes name (pure): found, valid, usable, and their versions.

A node's ``funnel: {name}`` must name a Funnel of the namespace whose spec is valid, whose
judge skill is granted to the node's agent (the run pins skills through the agents that
are granted them, so that is how the judge reaches the bundle) and whose reviewer Agent
exists. Otherwise the Topology is ``Ready=False`` with reason ``FunnelNotFound`` or
``FunnelInvalid`` naming the node and the funnel; a reviewer holding anything that is not
read-only (:mod:`.reviewer`) makes it ``ReviewerNotReadOnly``, naming what. Each
funnel's version is sha256[:12] of its canonical spec; the Topology folds these into its
own version (only when a node names a funnel, so topologies without one keep their
versions), and a Run pins the content (:mod:`swarmkit_operator.runs.resolve`).

A Funnel's own status (:func:`funnel_status`): ``Accepted=False`` with the model's reason
(``InvalidSchema`` for a ``validate.schema`` the metaschema refuses, naming the nested
field), ``Ready=False QuorumUnreachable``, or ``Ready=False SkillNotFound`` while its judge
skill does not exist in the namespace (it turns Ready when the Skill appears: the Skill's
watch events enqueue the Funnels judging with it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from swarmkit_api import ManifestError, validate_spec
from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_FUNNEL_INVALID,
    REASON_FUNNEL_NOT_FOUND,
    REASON_QUORUM_UNREACHABLE,
    REASON_REVIEWER_NOT_READ_ONLY,
    REASON_SKILL_NOT_FOUND,
    REASON_VALID,
)
from swarmkit_api.funnel import FunnelSpec
from swarmkit_api.topology import TopologySpec

from ..hashing import canonical_json, sha256_hex
from . import Verdict, invalid_verdict


def funnel_version(spec: FunnelSpec) -> str:
    return sha256_hex(canonical_json(spec.wire()))[:12]


def unreachable(spec: FunnelSpec) -> str | None:
    """Why no set of people could ever satisfy the approval, judging by the users it lists
    (None: reachable, or unknowable because a role admits a group, whose members only the
    authenticator knows)."""
    roles = spec.approve.roles
    for n, rule in enumerate(spec.approve.rules):
        if rule.k_of is None or any(roles[r].groups for r in rule.roles if r in roles):
            continue
        users = {u for r in rule.roles if r in roles for u in roles[r].users}
        if rule.k_of > len(users):
            return (
                f"approve.rules[{n}]: kOf {rule.k_of} but its roles list only {len(users)} "
                "user(s) and no group"
            )
    if not any(m.groups for m in roles.values()):
        everyone = {u for m in roles.values() for u in m.users}
        if spec.approve.min_distinct_approvers > len(everyone):
            return (
                f"approve.minDistinctApprovers {spec.approve.min_distinct_approvers} but the "
                f"roles list only {len(everyone)} user(s) and no group"
            )
    return None


def parse_funnel(raw: Mapping[str, Any]) -> FunnelSpec | str:
    """The validated spec, or the first problem (CEL at admission normally catches it)."""
    try:
        model = validate_spec("Funnel", dict(raw))
    except ManifestError as exc:
        return str(exc.errors[0]) if exc.errors else str(exc)
    assert isinstance(model, FunnelSpec)
    return model


@dataclass(frozen=True)
class FunnelStatus:
    """What a Funnel's reconcile writes: status fields and the two verdicts."""

    fields: Mapping[str, Any]
    verdicts: tuple[Verdict, Verdict]


def funnel_status(raw: Mapping[str, Any], skill_exists: Callable[[str], bool]) -> FunnelStatus:
    """The Funnel's own status (see the module docstring); ``skill_exists`` says whether a
    Skill of that name exists in the Funnel's namespace."""
    try:
        model = validate_spec("Funnel", dict(raw))
    except ManifestError as exc:
        refused = invalid_verdict(exc)
        return FunnelStatus({}, (refused, Verdict(READY, "False", refused.reason, refused.message)))
    assert isinstance(model, FunnelSpec)
    layers = [n for n in ("validate", "judge", "review") if raw.get(n)]
    message = f"layers: {', '.join([*layers, 'approve'])}; {len(model.approve.rules)} rule(s)"
    accepted = Verdict(ACCEPTED, "True", REASON_VALID, message)
    why = unreachable(model)
    judge = model.judge.skill if model.judge is not None else None
    if why is not None:
        ready = Verdict(READY, "False", REASON_QUORUM_UNREACHABLE, why)
    elif judge is not None and not skill_exists(judge):
        ready = Verdict(
            READY,
            "False",
            REASON_SKILL_NOT_FOUND,
            f"spec.judge.skill: Skill {judge!r} not found in the namespace (the funnel turns "
            "Ready when it is created)",
        )
    else:
        ready = Verdict(READY, "True", REASON_VALID, message)
    return FunnelStatus({"version": funnel_version(model)}, (accepted, ready))


@dataclass(frozen=True)
class FunnelCheck:
    """The verdict (None: every funnel is usable) and name → version of those found."""

    problem: Verdict | None
    versions: Mapping[str, str]


def check_funnels(
    spec: TopologySpec,
    funnels: Mapping[str, Mapping[str, Any]],
    skills_of: Callable[[str], Sequence[str]],
    agent_exists: Callable[[str], bool],
    category_of: Callable[[str], str | None] = lambda _: None,
    reviewer_writes: Callable[[str], Sequence[str]] = lambda _: (),
) -> FunnelCheck:
    """Check every funnel ``spec``'s nodes name (see the module docstring);
    ``reviewer_writes`` names what a reviewer agent holds that is not read-only."""
    versions: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for node in spec.agents:
        if node.funnel is None:
            continue
        name = node.funnel.name
        raw = funnels.get(name)
        if raw is None:
            problems.append(
                (REASON_FUNNEL_NOT_FOUND, f"node {node.name}: Funnel {name!r} not found")
            )
            continue
        parsed = parse_funnel(raw)
        if isinstance(parsed, str):
            problems.append((REASON_FUNNEL_INVALID, f"node {node.name}: Funnel {name}: {parsed}"))
            continue
        versions[name] = funnel_version(parsed)
        agent = node.agent_ref.name
        why = unreachable(parsed)
        if why is not None:
            problems.append((REASON_FUNNEL_INVALID, f"node {node.name}: Funnel {name}: {why}"))
        judge = parsed.judge.skill if parsed.judge is not None else None
        if judge is not None and judge not in skills_of(agent):
            problems.append(
                (
                    REASON_FUNNEL_INVALID,
                    f"node {node.name}: Funnel {name}'s judge skill {judge!r} is "
                    f"not granted to agent {agent}",
                )
            )
        elif judge is not None and category_of(judge) not in (None, "decision"):
            problems.append(
                (
                    REASON_FUNNEL_INVALID,
                    f"node {node.name}: Funnel {name}'s judge skill {judge!r} is not a decision "
                    f"skill (category {category_of(judge)})",
                )
            )
        if parsed.review is not None and not agent_exists(parsed.review.agent):
            problems.append(
                (
                    REASON_FUNNEL_INVALID,
                    f"node {node.name}: Funnel {name}'s reviewer agent "
                    f"{parsed.review.agent!r} not found",
                )
            )
        elif parsed.review is not None and (writes := reviewer_writes(parsed.review.agent)):
            problems.append(
                (
                    REASON_REVIEWER_NOT_READ_ONLY,
                    f"node {node.name}: Funnel {name}'s reviewer agent {parsed.review.agent} "
                    f"must be read-only but holds: {', '.join(writes)}",
                )
            )
    if not problems:
        return FunnelCheck(None, versions)
    reason = problems[0][0]
    return FunnelCheck(Verdict(READY, "False", reason, "; ".join(m for _, m in problems)), versions)


__all__ = [
    "FunnelCheck",
    "FunnelStatus",
    "check_funnels",
    "funnel_status",
    "funnel_version",
    "parse_funnel",
    "unreachable",
]
