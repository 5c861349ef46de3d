"""Pinned objects: a Run's skills, agents, topology and Workspace as their versions fixed them.

A Run executes exactly what its target's versions pinned, read back from their immutable
rendered ConfigMaps (never the live objects): :func:`pinned_skill_from_config_map` and
:func:`pinned_agent_from_config_map` turn those ConfigMaps into the values
:func:`swarmkit_operator.builders.bundle.render_bundle` renders into the run's bundle.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from swarmkit_api.agent import AgentSpec
from swarmkit_api.common import ConfigMapKeyRef
from swarmkit_api.funnel import FunnelSpec
from swarmkit_api.skill import Implementation, Provenance, ScriptStatus, SkillFile, SkillSpec
from swarmkit_api.topology import TopologySpec
from swarmkit_api.workspace import WorkspaceSpec

from .agent import AGENT_YAML, RESOLVED_JSON
from .job import SkillFileItem
from .skill import SKILL_MD, FileEntry, load_rendered_skill


@dataclass(frozen=True)
class PinnedSkill:
    """A skill exactly as an agent's version pinned it."""

    name: str
    content_hash: str
    config_map: str
    spec: SkillSpec
    files: tuple[SkillFileItem, ...] = ()
    scripts: tuple[ScriptStatus, ...] = ()
    reviewed: bool = False
    synthesized_topology: str | None = None


@dataclass(frozen=True)
class PinnedAgent:
    """An agent at the version the run executes."""

    name: str
    version: str
    spec: AgentSpec
    skills: tuple[str, ...] = ()
    config_map: str | None = None
    #: From the rendered agent (``resolved.json``); None = computed from the Workspace.
    commands: tuple[str, ...] | None = None
    permissions: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SkillRef:
    """A granted skill as an agent's rendered ConfigMap pins it."""

    name: str
    content_hash: str
    config_map: str
    scripts: tuple[ScriptStatus, ...] = ()


@dataclass(frozen=True)
class RenderedAgent:
    """An agent's immutable rendered ConfigMap read back."""

    agent: PinnedAgent
    skills: tuple[SkillRef, ...]
    #: Synthesized ``topology-<name>`` skills (complete: they have no ConfigMap).
    synthesized: tuple[PinnedSkill, ...]

    @property
    def topologies(self) -> tuple[str, ...]:
        """Topologies the agent may run as child runs through synthesized skills."""
        return tuple(s.synthesized_topology for s in self.synthesized if s.synthesized_topology)


@dataclass(frozen=True)
class PinnedTopology:
    """A topology at the version the run executes."""

    name: str
    version: str
    spec: TopologySpec
    funnels: Mapping[str, FunnelSpec] = field(default_factory=dict)


@dataclass(frozen=True)
class PinnedWorkspace:
    """The Workspace whose policy applies."""

    name: str
    spec: WorkspaceSpec
    config_map: str | None = None


def skill_file_items(
    files: Iterable[FileEntry], with_skill_md: bool = True
) -> tuple[SkillFileItem, ...]:
    """Volume items of a rendered skill ConfigMap: every bundled file, then ``SKILL.md``."""
    items = [SkillFileItem(f.key, f.path, f.is_script, f.sha256, f.config_map) for f in files]
    if with_skill_md and all(i.path != SKILL_MD for i in items):
        items.append(SkillFileItem(SKILL_MD, SKILL_MD))
    return tuple(items)


def pinned_skill_from_config_map(
    *,
    name: str,
    content_hash: str,
    config_map: str,
    data: Mapping[str, str],
    scripts: Sequence[ScriptStatus] = (),
    reviewed: bool = False,
) -> PinnedSkill:
    """A skill exactly as its immutable rendered ConfigMap holds it.

    ``scripts`` (the Skill's ``status.scripts``) should be passed only when the live Skill
    still has ``content_hash``; the pins are recomputed from the operator config anyway.
    """
    rendered = load_rendered_skill(data)
    spec = rendered.spec.model_copy(
        update={
            "files": [
                SkillFile(
                    path=f.path,
                    config_map_ref=ConfigMapKeyRef(name=f.config_map or config_map, key=f.key),
                    executable=f.is_script,
                )
                for f in rendered.files
            ]
        }
    )
    return PinnedSkill(
        name=name,
        content_hash=content_hash,
        config_map=config_map,
        spec=spec,
        files=skill_file_items(rendered.files, with_skill_md=SKILL_MD in data),
        scripts=tuple(scripts),
        reviewed=reviewed,
    )


def synthesized_topology_skill(
    name: str, content_hash: str, topology: str, description: str
) -> PinnedSkill:
    """The ``topology-<name>`` skill ``pack:workspace`` grants: run a Topology as a child."""
    spec = SkillSpec(
        description=description or f"Run the {topology} topology as a child run.",
        category="coordination",
        implementation=Implementation(type="agent", topology=topology),
        provenance=Provenance(authored_by="human", version="synthesized"),
    )
    return PinnedSkill(
        name=name,
        content_hash=content_hash,
        config_map="",
        spec=spec,
        synthesized_topology=topology,
    )


def pinned_agent_from_config_map(
    *, name: str, version: str, config_map: str, data: Mapping[str, str]
) -> RenderedAgent:
    """An agent exactly as its immutable rendered ConfigMap (``agent-<name>-<h>``) holds it."""
    spec = AgentSpec.model_validate(yaml.safe_load(data[AGENT_YAML]) or {})
    resolved: dict[str, Any] = json.loads(data.get(RESOLVED_JSON) or "{}")
    refs = tuple(
        SkillRef(
            name=str(entry["name"]),
            content_hash=str(entry["contentHash"]),
            config_map=str(entry["renderedConfigMap"]),
            scripts=tuple(ScriptStatus.model_validate(x) for x in entry.get("scripts") or ()),
        )
        for entry in resolved.get("skills") or ()
        if entry.get("renderedConfigMap")
    )
    synthesized = tuple(
        synthesized_topology_skill(
            str(entry["name"]),
            str(entry.get("contentHash", "")),
            str(entry["topology"]),
            str(entry.get("description", "")),
        )
        for entry in resolved.get("synthesizedSkills") or ()
        if entry.get("topology")
    )
    commands = resolved.get("commands")
    permissions = resolved.get("permissions")
    agent = PinnedAgent(
        name=name,
        version=version,
        spec=spec,
        skills=tuple(r.name for r in refs) + tuple(s.name for s in synthesized),
        config_map=config_map,
        commands=tuple(str(c) for c in commands) if isinstance(commands, list) else None,
        permissions=tuple(str(p) for p in permissions) if isinstance(permissions, list) else None,
    )
    return RenderedAgent(agent=agent, skills=refs, synthesized=synthesized)
