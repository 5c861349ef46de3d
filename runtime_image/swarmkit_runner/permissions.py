"""Permission tiers, effects, IAM scopes and provenance: may this call happen?

Every governed call (a skill, an MCP tool an agent lists, a Workspace HTTP tool, a command)
carries a :class:`Gate`: the tier of each layer it passes through (the skill, the MCP server
or its per-tool override, the Workspace tool), the call's effects, the scopes it requires and
whether provenance blocks it. :func:`refusal` applies them, in this order:

* provenance: a skill the operator marked not callable (``authored_by_swarm`` before its
  review, a provenance the Workspace policy denies) is refused (``SkillBlocked``); the
  runner re-applies both rules itself (``BundleSkill.reviewed``, the bundle's
  ``governance.provenance``);
* ``iam.requiredScopes`` must all be among the agent's ``scopes`` (``MissingScopes``);
* tiers, per layer: ``open`` and ``cautious`` allow the call (``cautious``, the default, is
  what every call gets: audited with its tier and effects); ``readonly`` allows only calls
  whose effects are ``read`` (``ReadOnlyTier``); ``strict`` needs an explicit approval:
  a standing one (an MCP tool's ``toolOverrides[].approved``, a skill's recorded human
  review, ``BundleSkill.reviewed``) or, per call, a person's approval through a Review
  (``NotApproved`` is then a question, not a refusal: see :mod:`.pipeline` and
  :func:`guard`'s ``approve``); where no one can be asked, it refuses.

Effects: ``read | write | unknown``. Undeclared: MCP tools ``unknown``, Workspace tools and
pack commands ``write``, ``llm_prompt`` skills ``read``, agent skills ``unknown``, a
composed skill the widest of its components.

A refusal is a ``ToolRefused`` tool error the model can read, audited as ``tool.refused``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from swarmkit_api.bundle import BundleAgent, BundleSkill, RunBundle
from swarmkit_api.common import Effects, PermissionTier
from swarmkit_api.workspace import McpServer, ToolOverride

from .errors import ToolRefused

DEFAULT_TIER: PermissionTier = "cautious"
_EFFECT_RANK: dict[str, int] = {"read": 0, "write": 1, "unknown": 2}


@dataclass(frozen=True)
class Layer:
    """One tier a call passes through."""

    source: str
    tier: PermissionTier
    approved: bool = False
    #: How this layer is approved (named in the refusal message).
    approve_hint: str = ""


@dataclass(frozen=True)
class Gate:
    """Everything that decides whether one call may happen."""

    layers: tuple[Layer, ...] = ()
    effects: Effects = "unknown"
    required_scopes: tuple[str, ...] = ()
    blocked: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def tier(self) -> PermissionTier:
        """The strictest tier of the layers (for audit lines)."""
        order = ("open", "cautious", "strict", "readonly")
        tiers = [layer.tier for layer in self.layers] or [DEFAULT_TIER]
        return max(tiers, key=order.index)


def widest(effects: list[Effects]) -> Effects:
    """The widest of ``effects`` (read < write < unknown); none = read."""
    if not effects:
        return "read"
    return max(effects, key=lambda e: _EFFECT_RANK[e])


def refusal(gate: Gate, agent: BundleAgent) -> ToolRefused | None:
    """Why ``agent`` may not make the call (None = allowed)."""
    if gate.blocked:
        return ToolRefused(gate.blocked, "SkillBlocked")
    held = set(agent.spec.scopes)
    missing = [s for s in gate.required_scopes if s not in held]
    if missing:
        return ToolRefused(
            f"requires scope(s) {', '.join(missing)}, which agent {agent.name} does not hold "
            f"(it holds: {', '.join(sorted(held)) or 'none'})",
            "MissingScopes",
        )
    for layer in gate.layers:
        if layer.tier == "readonly" and gate.effects != "read":
            return ToolRefused(
                f"{layer.source} is readonly and this call's effects are {gate.effects}; "
                "only read calls are allowed",
                "ReadOnlyTier",
            )
        if layer.tier == "strict" and not layer.approved:
            hint = f" ({layer.approve_hint})" if layer.approve_hint else ""
            return ToolRefused(
                f"{layer.source} is strict and this call is not explicitly approved{hint}",
                "NotApproved",
            )
    return None


#: Asked when a strict tier has no standing approval: None = approved, a text = the
#: reviewer's answer stands in for the result; it raises to refuse (or to park the run).
Approver = Callable[[ToolRefused, dict[str, Any]], Awaitable[str | None]]


def guard(
    agent: BundleAgent,
    gate: Gate,
    handler: Callable[[dict[str, Any]], Awaitable[str]],
    approve: Approver | None = None,
) -> Callable[[dict[str, Any]], Awaitable[str]]:
    """``handler`` behind ``gate``: a refusal is raised before anything is called; a
    strict tier without approval asks ``approve`` (per-call human approval) when given."""

    async def guarded(args: dict[str, Any]) -> str:
        refused = refusal(gate, agent)
        if refused is not None:
            if refused.code != "NotApproved" or approve is None:
                raise refused
            answer = await approve(refused, args)
            if answer is not None:
                return answer
        return await handler(args)

    return guarded


def _override(server: McpServer, tool: str) -> ToolOverride | None:
    return next((o for o in server.tool_overrides if o.tool == tool), None)


def mcp_layer(server: McpServer, tool: str) -> tuple[Layer, Effects]:
    """The layer and effects of MCP tool ``tool`` on ``server`` (override first)."""
    override = _override(server, tool)
    tier = override.permission if override is not None and override.permission else None
    layer = Layer(
        f"MCP tool {server.tool_prefix}.{tool}",
        tier or server.permission,
        approved=override.approved if override is not None else False,
        approve_hint=f"set approved: true in mcpServers[{server.id}].toolOverrides for {tool}",
    )
    effects: Effects = override.effects if override is not None and override.effects else "unknown"
    return layer, effects


ProvenanceVerdict = Literal["allow", "deny"]


def provenance_block(bundle: RunBundle, skill: BundleSkill) -> str:
    """Why provenance forbids calling ``skill`` ('' when it does not)."""
    if not skill.callable:
        return f"skill {skill.name} is not callable: {skill.blocked_reason or 'blocked'}"
    authored_by = skill.spec.provenance.authored_by
    if authored_by == "authored_by_swarm" and not skill.reviewed:
        return (
            f"skill {skill.name} is authored_by_swarm and locked until a reviewer approves "
            "its Review (kubectl swarmkit review)"
        )
    policy = bundle.governance.provenance
    if policy is not None and authored_by in (
        "imported_from_registry",
        "vendor_published",
        "derived_from_template",
    ):
        verdict: ProvenanceVerdict = getattr(policy, authored_by)
        if verdict == "deny":
            return (
                f"skill {skill.name}: provenance {authored_by} is denied by the Workspace "
                "governance.provenance policy"
            )
    return ""


def skill_layer(skill: BundleSkill) -> Layer:
    impl = skill.spec.implementation
    tier = impl.permission if impl is not None and impl.permission else DEFAULT_TIER
    return Layer(
        f"skill {skill.name}",
        tier,
        approved=skill.reviewed,
        approve_hint="or a reviewer approves the skill's Review",
    )


def skill_scopes(skill: BundleSkill) -> tuple[str, ...]:
    return tuple(skill.spec.iam.required_scopes) if skill.spec.iam is not None else ()


__all__ = [
    "DEFAULT_TIER",
    "Gate",
    "Layer",
    "guard",
    "mcp_layer",
    "provenance_block",
    "refusal",
    "skill_layer",
    "skill_scopes",
    "widest",
]
