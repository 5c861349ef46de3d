"""Agent → its version, resolved grants and the ConfigMap ``agent-<name>-<hash8>``.

``status.version`` is sha256[:12] over the canonical JSON of ``{"spec": <normalized spec
without gateway and promotion>, "skills": [[name, contentHash-or-null], ...]}``, the skills
in grant order with ``pack:`` grants expanded and ``composed`` skills' components appended.
A granted skill that does not exist (or is not Ready) enters by name only, with a null
hash, so its appearance changes the version; an agent granting no skills has
``"skills": []`` and no skill edit can touch it.
Nothing else (Workspace edits, other skills, Topologies) enters the version, except the
content of the synthesized skills the agent is granted:

* ``pack:workspace`` grants ``topology-<name>`` for every Topology of the agent's Workspace
  (now and later); a grant of ``topology-<name>`` grants just that one. Their content is the
  Topology's name and description.
* ``pack:<id>`` grants the read commands (``effects: read``) of the Workspace command pack
  ``<id>``; its content is those commands' definitions.

Key scheme of the rendered ConfigMap:

``agent.yaml``
    The normalized spec.
``resolved.json``
    ``{"version", "workspace", "skills": [{"name", "contentHash", "renderedConfigMap",
    "via"?, "scripts": [{path, sha256, approved, reason}]}], "synthesizedSkills": [{"name",
    "contentHash", "topology"? | "pack"?, "description"}], "missingSkills": [...],
    "commands": ["<pack>/<command>"], "permissions": [...], "tools": [...]}``; script
    verdicts there already include the Workspace's narrowing (``DeniedByWorkspace``).

The ConfigMap name hashes the rendered data, which also folds in Workspace-derived facts
(effective permissions, script narrowing); the version does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from swarmkit_api import ManifestError, validate_spec
from swarmkit_api.agent import AgentSpec
from swarmkit_api.conditions import (
    ACCEPTED,
    READY,
    REASON_ALL_RESOLVED,
    REASON_CREDENTIAL_NOT_ALLOWED,
    REASON_INVALID,
    REASON_SKILL_NOT_FOUND,
    REASON_SKILL_NOT_READY,
    REASON_TOO_LARGE,
    REASON_UNKNOWN_COMMAND_PACK,
    REASON_VALID,
    REASON_WORKSPACE_NOT_FOUND,
    REASON_WORKSPACE_NOT_READY,
    SKILLS_RESOLVED,
)
from swarmkit_api.workspace import RESERVED_PACK_ID, WorkspaceSpec

from ..hashing import canonical_json, sha256_hex
from . import (
    MAX_CONFIGMAP_BYTES,
    ObjectRef,
    Verdict,
    config_map_size,
    content_digest,
    dump_json,
    dump_yaml,
    invalid_verdict,
    rendered_config_map,
    rendered_verdict,
)
from .agent_workspace import effective_permissions, workspace_problems
from .skill import SYNTHESIZED_TOPOLOGY_PREFIX, ScriptVerdict, workspace_script_verdict

AGENT_YAML = "agent.yaml"
RESOLVED_JSON = "resolved.json"
PACK_PREFIX = "pack:"
WORKSPACE_PACK = PACK_PREFIX + RESERVED_PACK_ID


@dataclass(frozen=True)
class SkillView:
    """What an agent needs to know of a Skill (from the Skill's status)."""

    name: str
    content_hash: str | None = None
    config_map: str | None = None
    ready: bool = False
    reason: str = ""
    scripts: tuple[ScriptVerdict, ...] = ()
    composes: tuple[str, ...] = ()
    #: A remote agent skill's (credentialsRef, cardUrl): checked against the Workspace.
    credential: tuple[str, str] | None = None


@dataclass(frozen=True)
class WorkspaceView:
    """What an agent or topology needs to know of its Workspace."""

    name: str
    spec: WorkspaceSpec | None = None
    ready: bool = False
    reason: str = ""
    message: str = ""
    config_map: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class ResolvedGrant:
    name: str
    content_hash: str
    config_map: str
    via: str | None = None
    scripts: tuple[ScriptVerdict, ...] = ()

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "contentHash": self.content_hash,
            "renderedConfigMap": self.config_map,
        }


@dataclass(frozen=True)
class SynthesizedSkill:
    name: str
    content_hash: str
    description: str
    topology: str | None = None
    pack: str | None = None
    commands: tuple[str, ...] = ()

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "contentHash": self.content_hash,
            "description": self.description,
        }
        if self.topology is not None:
            out["topology"] = self.topology
        if self.pack is not None:
            out["pack"] = self.pack
            out["commands"] = list(self.commands)
        return out


@dataclass(frozen=True)
class AgentRender:
    verdicts: tuple[Verdict, ...]
    spec: AgentSpec | None = None
    version: str | None = None
    config_map: dict[str, Any] | None = None
    resolved: tuple[ResolvedGrant, ...] = ()
    synthesized: tuple[SynthesizedSkill, ...] = ()
    missing: tuple[str, ...] = ()
    problems: tuple[tuple[str, str], ...] = ()

    @property
    def config_map_name(self) -> str | None:
        return str(self.config_map["metadata"]["name"]) if self.config_map else None

    @property
    def ready(self) -> bool:
        return any(v.type == READY and v.status == "True" for v in self.verdicts)

    def status_fields(self) -> dict[str, Any]:
        cm = self.config_map
        return {
            "version": self.version,
            "renderedConfigMap": self.config_map_name,
            # What a Run checks the render it reads under that name against (trust.py).
            "renderedSha256": content_digest(cm["data"], cm.get("binaryData")) if cm else None,
            "resolvedSkills": [r.status() for r in self.resolved],
            "missingSkills": list(self.missing),
        }


def topology_skill(topology: str, description: str) -> SynthesizedSkill:
    digest = sha256_hex(
        canonical_json(
            {"synthesized": "topology", "topology": topology, "description": description}
        )
    )
    text = description or f"Run the {topology} topology as a child run."
    return SynthesizedSkill(
        f"{SYNTHESIZED_TOPOLOGY_PREFIX}{topology}", digest, text, topology=topology
    )


def pack_skill(workspace: WorkspaceSpec, pack_id: str) -> SynthesizedSkill | None:
    pack = next((p for p in workspace.command_packs if p.id == pack_id), None)
    if pack is None:
        return None
    reads = [c for c in pack.commands if c.effects == "read"]
    digest = sha256_hex(
        canonical_json(
            {
                "synthesized": "pack",
                "pack": pack.id,
                "requires": list(pack.requires),
                "commands": [c.wire() for c in reads],
            }
        )
    )
    return SynthesizedSkill(
        f"{PACK_PREFIX}{pack.id}",
        digest,
        pack.description,
        pack=pack.id,
        commands=tuple(f"{pack.id}/{c.name}" for c in reads),
    )


def granted_skill_names(raw_spec: Mapping[str, Any]) -> list[str]:
    """The grants of a (possibly invalid) spec, as written."""
    grants = raw_spec.get("skills") or []
    return [g for g in grants if isinstance(g, str)] if isinstance(grants, list) else []


def workspace_name(raw_spec: Mapping[str, Any]) -> str:
    ref = raw_spec.get("workspaceRef")
    if isinstance(ref, Mapping) and isinstance(ref.get("name"), str) and ref["name"]:
        return str(ref["name"])
    return "default"


@dataclass
class _Expansion:
    entries: list[tuple[str, str | None]] = field(default_factory=list)  # version input
    resolved: list[ResolvedGrant] = field(default_factory=list)
    synthesized: list[SynthesizedSkill] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    not_ready: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)


def credential_problem(skill: str, ref: str, url: str, workspace: WorkspaceSpec) -> str | None:
    """Why Skill ``skill`` may not send Workspace credential ``ref`` to ``url`` (or None)."""
    credential = next((c for c in workspace.credentials if c.name == ref), None)
    if credential is None:
        return f"Skill {skill!r}: credentialsRef {ref!r} is not a credential of the workspace"
    if credential.allows(url):
        return None
    host = urlsplit(url).hostname or url
    allowed = ", ".join(credential.allowed_hosts) or "none: allowedHosts is empty"
    return (
        f"Skill {skill!r} would send Workspace credential {ref!r} to host {host!r}, which "
        f"its allowedHosts does not list (allowed: {allowed})"
    )


def _expand(
    spec: AgentSpec,
    skills: Mapping[str, SkillView],
    workspace: WorkspaceView | None,
    topologies: Mapping[str, str],
) -> _Expansion:
    out = _Expansion()
    ws_spec = workspace.spec if workspace is not None else None

    def add_synth(skill: SynthesizedSkill) -> None:
        if skill.name in out.seen:
            return
        out.seen.add(skill.name)
        out.entries.append((skill.name, skill.content_hash))
        out.synthesized.append(skill)

    def add_skill(name: str, via: str | None) -> None:
        if name in out.seen:
            return
        out.seen.add(name)
        view = skills.get(name)
        if view is None:
            out.entries.append((name, None))
            out.missing.append(name)
            return
        if not view.ready or view.content_hash is None or view.config_map is None:
            out.entries.append((name, None))
            out.not_ready.append(f"{name} ({view.reason or 'not Ready'})")
            return
        out.entries.append((name, view.content_hash))
        if view.credential is not None and ws_spec is not None:
            problem = credential_problem(name, *view.credential, ws_spec)
            if problem is not None:
                out.problems.append((REASON_CREDENTIAL_NOT_ALLOWED, problem))
        governance = ws_spec.governance if ws_spec is not None else None
        scripts = tuple(workspace_script_verdict(s, name, governance) for s in view.scripts)
        out.resolved.append(ResolvedGrant(name, view.content_hash, view.config_map, via, scripts))
        for component in view.composes:
            add_skill(component, via or name)

    for i, grant in enumerate(spec.skills):
        if grant == WORKSPACE_PACK:
            for topo in sorted(topologies):
                add_synth(topology_skill(topo, topologies[topo]))
        elif grant.startswith(PACK_PREFIX):
            pack_id = grant[len(PACK_PREFIX) :]
            synth = pack_skill(ws_spec, pack_id) if ws_spec is not None else None
            if synth is not None:
                add_synth(synth)
            else:
                out.entries.append((grant, None))
                if ws_spec is not None:
                    out.problems.append(
                        (
                            REASON_UNKNOWN_COMMAND_PACK,
                            f"spec.skills[{i}]: workspace {workspace.name if workspace else ''!r}"
                            f" has no command pack {pack_id!r}",
                        )
                    )
        elif grant.startswith(SYNTHESIZED_TOPOLOGY_PREFIX):
            topo = grant[len(SYNTHESIZED_TOPOLOGY_PREFIX) :]
            if topo in topologies:
                add_synth(topology_skill(topo, topologies[topo]))
            else:
                out.seen.add(grant)
                out.entries.append((grant, None))
                out.missing.append(grant)
        else:
            add_skill(grant, None)
    return out


def agent_version(normalized: Mapping[str, Any], entries: Sequence[tuple[str, str | None]]) -> str:
    return sha256_hex(
        canonical_json({"spec": dict(normalized), "skills": [list(e) for e in entries]})
    )[:12]


def resolve_agent(
    owner: ObjectRef,
    raw_spec: Mapping[str, Any],
    skills: Mapping[str, SkillView],
    workspace: WorkspaceView | None,
    topologies: Mapping[str, str],
) -> AgentRender:
    """Resolve grants, compute the version, validate against the Workspace and render.

    ``skills`` holds the Skills that exist in the namespace (at least the granted ones),
    ``workspace`` the agent's Workspace (``None``: not found), ``topologies`` the names and
    descriptions of the Topologies of that Workspace (for ``pack:workspace``).
    """
    try:
        model = validate_spec("Agent", dict(raw_spec))
    except ManifestError as exc:
        return _invalid_render(exc)
    assert isinstance(model, AgentSpec)
    normalized = model.wire()
    expansion = _expand(model, skills, workspace, topologies)
    # How it is served (spec.gateway) or promoted (spec.promotion) is not what it is.
    versioned = {k: v for k, v in normalized.items() if k not in ("gateway", "promotion")}
    base = AgentRender(
        verdicts=(),
        spec=model,
        version=agent_version(versioned, expansion.entries),
        resolved=tuple(expansion.resolved),
        synthesized=tuple(expansion.synthesized),
        missing=(*expansion.missing, *(n.split(" ", 1)[0] for n in expansion.not_ready)),
    )
    resolved_verdict = _skills_verdict(expansion)
    ws_spec = workspace.spec if workspace is not None else None
    problems = list(expansion.problems)
    if ws_spec is not None:
        problems = workspace_problems(model, ws_spec) + problems
    if problems:
        message = "; ".join(m for _, m in problems)
        return replace(
            base,
            verdicts=(
                Verdict(ACCEPTED, "False", problems[0][0], message),
                resolved_verdict,
                Verdict(READY, "False", problems[0][0], message),
            ),
            problems=tuple(problems),
        )
    accepted = Verdict(ACCEPTED, "True", REASON_VALID, "the spec is valid")
    if workspace is None or ws_spec is None:
        not_ready = _workspace_unusable(model, workspace)
        return replace(base, verdicts=(accepted, resolved_verdict, not_ready))
    return _render(owner, base, normalized, workspace, ws_spec, (accepted, resolved_verdict))


def _invalid_render(exc: ManifestError) -> AgentRender:
    """The render of a spec the schema refuses: nothing resolved, nothing rendered."""
    verdict = invalid_verdict(exc)
    return AgentRender(
        verdicts=(
            verdict,
            Verdict(SKILLS_RESOLVED, "Unknown", REASON_INVALID, "the spec is invalid"),
            Verdict(READY, "False", verdict.reason, verdict.message),
        ),
    )


def _skills_verdict(expansion: _Expansion) -> Verdict:
    """``SkillsResolved``: every grant found and Ready, or which are missing / not Ready."""
    if not expansion.missing and not expansion.not_ready:
        count = len(expansion.resolved) + len(expansion.synthesized)
        return Verdict(SKILLS_RESOLVED, "True", REASON_ALL_RESOLVED, f"{count} skill(s) resolved")
    parts = []
    if expansion.missing:
        parts.append(
            "granted skill(s) not found: "
            + ", ".join(expansion.missing)
            + " (inert until they appear)"
        )
    if expansion.not_ready:
        parts.append("granted skill(s) not Ready: " + ", ".join(expansion.not_ready))
    reason = REASON_SKILL_NOT_FOUND if expansion.missing else REASON_SKILL_NOT_READY
    return Verdict(SKILLS_RESOLVED, "False", reason, "; ".join(parts))


def _workspace_unusable(model: AgentSpec, workspace: WorkspaceView | None) -> Verdict:
    """``Ready=False`` for a Workspace that is not found or whose spec is not valid."""
    if workspace is None:
        ws = model.workspace_name
        return Verdict(READY, "False", REASON_WORKSPACE_NOT_FOUND, f"Workspace {ws!r} not found")
    return Verdict(
        READY,
        "False",
        REASON_WORKSPACE_NOT_READY,
        f"Workspace {workspace.name!r} is not valid: {workspace.message}",
    )


def _render(
    owner: ObjectRef,
    base: AgentRender,
    normalized: Mapping[str, Any],
    workspace: WorkspaceView,
    ws_spec: WorkspaceSpec,
    verdicts: tuple[Verdict, Verdict],
) -> AgentRender:
    """The accepted agent rendered into its ConfigMap (refused when over the size limit)."""
    assert base.spec is not None
    data = {
        AGENT_YAML: dump_yaml(normalized),
        RESOLVED_JSON: dump_json(_resolved_doc(base, base.spec, workspace.name, ws_spec)),
    }
    size = config_map_size(data)
    if size > MAX_CONFIGMAP_BYTES:
        message = f"the rendered agent is {size} bytes, over the {MAX_CONFIGMAP_BYTES}-byte limit"
        return replace(
            base,
            verdicts=(
                Verdict(ACCEPTED, "False", REASON_TOO_LARGE, message),
                verdicts[1],
                Verdict(READY, "False", REASON_TOO_LARGE, message),
            ),
        )
    manifest = rendered_config_map(owner, content_digest(data), data)
    if not workspace.ready:
        ready = Verdict(
            READY,
            "False",
            REASON_WORKSPACE_NOT_READY,
            f"Workspace {workspace.name!r} is not Ready ({workspace.reason}): {workspace.message}",
        )
    else:
        ready = rendered_verdict(manifest)
    return replace(base, verdicts=(*verdicts, ready), config_map=manifest)


def _resolved_doc(
    base: AgentRender, model: AgentSpec, workspace: str, ws_spec: WorkspaceSpec
) -> dict[str, Any]:
    """``resolved.json``: what the runner reads of the grants, commands and permissions."""
    return {
        "version": base.version,
        "workspace": workspace,
        "skills": [
            {
                **r.status(),
                **({"via": r.via} if r.via else {}),
                "scripts": [s.wire() for s in r.scripts],
            }
            for r in base.resolved
        ],
        "synthesizedSkills": [s.wire() for s in base.synthesized],
        "missingSkills": list(base.missing),
        "commands": [c for s in base.synthesized for c in s.commands],
        "permissions": effective_permissions(model, ws_spec),
        "tools": list(model.tools),
    }
