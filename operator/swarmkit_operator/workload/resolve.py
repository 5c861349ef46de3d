"""Resolving a runner workload's target: everything it will pin, or what it still waits for.

A Run, a served Topology and an Agent gateway are resolved here alike, by one
:class:`Resolver` (:mod:`swarmkit_operator.workload`).

The live objects come from the in-memory indexes (their readiness and versions) and their
content from the immutable rendered ConfigMaps their reconcilers wrote: an Agent's spec as
it was when it was last Ready, a Skill's files at the content hash an Agent pinned. Nothing
is read from a live spec that a reconciler has not validated yet, so a Run never pins a
half-applied change. The result feeds :func:`swarmkit_operator.builders.bundle.render_bundle`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from swarmkit_api.bundle import BUNDLE_FILE, RunBundle
from swarmkit_api.conditions import READY, REASON_TAMPERED_OBJECT
from swarmkit_api.funnel import FunnelSpec
from swarmkit_api.run import RunSpec
from swarmkit_api.topology import TopologySpec
from swarmkit_api.workspace import WorkspaceSpec

from .. import k8s
from ..builders import ObjectRef, pinned, promotion, trust
from ..builders import bundle as bundles
from ..builders import job as jobs
from ..builders.funnel import funnel_version, parse_funnel
from ..builders.review import approves
from ..builders.skill import SKILL_MD, load_rendered_skill, part_mismatch, revision_mismatch
from ..builders.workload import Target
from ..conditions import get_condition
from ..config import OperatorConfig
from ..indexes import ResolverIndexes, one
from .ledger import Ledger

#: How often a target that is not Ready is looked at again without any event.
PENDING_RECHECK = 30.0

#: Bound on each cache; cleared wholesale when exceeded (entries are cheap to re-read).
CACHE_LIMIT = 4096

#: A ConfigMap read back: (data, binaryData, immutable).
_Read = tuple[dict[str, str], dict[str, str], bool]


@dataclass(frozen=True)
class Waiting:
    """The target is not ready: why, and when to look again without an event."""

    message: str
    recheck: float = PENDING_RECHECK


@dataclass(frozen=True)
class Resolved:
    rendered: bundles.RenderedBundle


@dataclass
class _Walk:
    """What one resolution has pinned so far, and what it still has to visit."""

    topologies: dict[str, pinned.PinnedTopology] = field(default_factory=dict)
    agents: dict[str, pinned.RenderedAgent] = field(default_factory=dict)
    skills: dict[str, pinned.PinnedSkill] = field(default_factory=dict)
    #: agent → the version the Topologies that name it were made Ready with.
    expected: dict[str, str] = field(default_factory=dict)
    topo_queue: list[str] = field(default_factory=list)
    agent_queue: list[str] = field(default_factory=list)
    #: agent → the render a promoted Topology version runs it with.
    agent_pins: dict[str, promotion.PinnedAgentRender] = field(default_factory=dict)
    #: The version asked of the target (None: its active one, else its current one).
    version: str | None = None
    root: str = ""


def ready(summary: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a summarized object is Ready for its current generation, and why not."""
    status = summary.get("status") or {}
    cond = get_condition(status.get("conditions"), READY)
    generation = int(summary.get("generation") or 0)
    if cond is None:
        return False, "not reconciled yet"
    observed = int(cond.get("observedGeneration") or status.get("observedGeneration") or 0)
    if observed and generation and observed < generation:
        return False, "being reconciled"
    if cond.get("status") != "True":
        reason = cond.get("reason") or "NotReady"
        message = cond.get("message") or ""
        return False, f"{reason}: {message}" if message else str(reason)
    return True, ""


def ledger_of(resolver: object | None) -> Ledger:
    """The operator's one ledger (``resolver``'s, a Controller's loosely typed one); a
    bare controller (unit tests wire one without the Runs side) gets a ledger of its own,
    which adopts nothing unrecorded."""
    return resolver.ledger if isinstance(resolver, Resolver) else _OWN_LEDGER


_OWN_LEDGER = Ledger()


class Resolver:
    """Resolves targets; caches what it parsed of immutable ConfigMaps (never live state).

    One per operator: the Runs controller, the served Topologies and the gateways share
    it (and its caches), over one :class:`~swarmkit_operator.indexes.ResolverIndexes`."""

    def __init__(self, config: OperatorConfig, indexes: ResolverIndexes) -> None:
        self.config = config
        self.idx = indexes
        self._cm_cache: dict[tuple[str, str], tuple[dict[str, str], dict[str, str]]] = {}
        self._parsed: dict[Any, Any] = {}
        #: What the pipelines (Runs, serving, gateways) created, until recorded.
        self.ledger = Ledger()

    async def resolve(self, target: Target, spec: RunSpec) -> Waiting | Resolved:
        """Everything ``target``'s workload pins, from the indexes and the immutable
        rendered ConfigMaps.

        A fixpoint over topologies (the target and every one reachable through
        ``childTopologies``, synthesized ``topology-<name>`` skills and agent-type skills),
        their agents (as their rendered ConfigMaps pin them) and those agents' skills.

        A Topology or Agent with ``spec.promotion`` runs its *active* version
        (``status.promotion.active``, from its renders) wherever it is reached, whatever its
        spec says now; ``spec.version`` asks for another version of the target itself (its
        candidate: an evaluation), which must be its current, active or candidate one.
        """
        ns = target.namespace
        version = spec.version
        if spec.topology_ref is not None:
            kind: Literal["Topology", "Agent"] = "Topology"
            root = spec.topology_ref.name
            walk = _Walk(version=version, root=root)
            walk.topo_queue.append(root)
        else:
            assert spec.agent_ref is not None
            kind, root = "Agent", spec.agent_ref.name
            walk = _Walk(version=version, root=root)
            walk.agent_queue.append(root)
        while walk.topo_queue or walk.agent_queue:
            waiting = await self._walk_topologies(ns, walk)
            waiting = waiting or await self._walk_agents(ns, walk)
            if waiting is not None:
                return waiting
        if kind == "Agent":
            ws_name = walk.agents[root].agent.spec.workspace_name
        else:
            ws_name = walk.topologies[root].spec.workspace_ref.name
        workspace = self._workspace(ns, ws_name)
        if isinstance(workspace, Waiting):
            return workspace
        flow = await self._flow_data(ns, workspace.spec, walk.agents.values())
        if isinstance(flow, Waiting):
            return flow
        rendered = bundles.render_bundle(
            run=bundles.RunInput(target.workload, ns, target.uid, spec, target.labels),
            target_kind=kind,
            target=root,
            topologies=list(walk.topologies.values()),
            agents=[ra.agent for ra in walk.agents.values()],
            skills=list(walk.skills.values()),
            workspace=workspace,
            config=self.config,
            flow_data=flow,
        )
        return Resolved(rendered)

    async def _walk_topologies(self, ns: str, walk: _Walk) -> Waiting | None:
        """Pin every queued topology (Ready, at its version, with its funnels; a promoted
        one at its active version's render); queue its agents and child topologies."""
        while walk.topo_queue:
            tname = walk.topo_queue.pop(0)
            if tname in walk.topologies:
                continue
            topo = one(self.idx.topologies, (ns, tname))
            if topo is None:
                return Waiting(f"waiting for Topology {tname}: not found")
            promoted = await self._promoted_topology(ns, tname, topo, walk)
            if promoted is not None:
                if isinstance(promoted, Waiting):
                    return promoted
                continue
            ok, why = ready(topo)
            if not ok:
                return Waiting(f"waiting for Topology {tname} to be Ready ({why})")
            tstatus = topo.get("status") or {}
            version = tstatus.get("version")
            if not version:
                return Waiting(f"waiting for Topology {tname}: no version yet", 2.0)
            tspec = TopologySpec.model_validate(topo.get("spec") or {})
            funnels = self._funnels(ns, tspec, tstatus)
            if isinstance(funnels, Waiting):
                return funnels
            for f in funnels.values():
                if f.review is not None:
                    walk.agent_queue.append(f.review.agent)
            walk.topologies[tname] = pinned.PinnedTopology(tname, str(version), tspec, funnels)
            walk.agent_queue.extend(n.agent_ref.name for n in tspec.agents)
            for aname, aversion in (tstatus.get("agentVersions") or {}).items():
                walk.expected.setdefault(str(aname), str(aversion))
            walk.topo_queue.extend(str(c) for c in tstatus.get("childTopologies") or ())
        return None

    async def _walk_agents(self, ns: str, walk: _Walk) -> Waiting | None:
        """Pin the queued agents, then their skills; queue the topologies they reach.

        Agents (then their skills) of one round are read concurrently: each may cost a
        ConfigMap GET the first time."""
        pending = list(dict.fromkeys(a for a in walk.agent_queue if a not in walk.agents))
        walk.agent_queue.clear()
        results = await asyncio.gather(*(self._resolve_agent(ns, a, walk) for a in pending))
        new_refs: dict[str, pinned.SkillRef] = {}
        for aname, result in zip(pending, results, strict=True):
            if isinstance(result, Waiting):
                return result
            # A Topology pins the Agent versions it was made Ready with: a newer Agent
            # must first be picked up by it, or the run would mix versions.
            want = walk.expected.get(aname)
            if want is not None and aname not in walk.agent_pins and want != result.agent.version:
                return Waiting(
                    f"waiting for the Topology to pick up Agent {aname}'s new version", 1.0
                )
            walk.agents[aname] = result
            walk.topo_queue.extend(t for t in result.topologies if t not in walk.topologies)
            for synth in result.synthesized:
                walk.skills.setdefault(synth.name, synth)
            for ref in result.skills:
                if ref.name not in walk.skills:
                    new_refs.setdefault(ref.name, ref)
        skill_results = await asyncio.gather(
            *(self._resolve_skill(ns, ref) for ref in new_refs.values())
        )
        for res in skill_results:
            if isinstance(res, Waiting):
                return res
            walk.skills[res.name] = res
            impl = res.spec.implementation
            if impl is not None and impl.type == "agent" and impl.topology:
                walk.topo_queue.append(impl.topology)
        return None

    async def _promoted_topology(
        self, ns: str, name: str, topo: Mapping[str, Any], walk: _Walk
    ) -> Literal[True] | Waiting | None:
        """Pin ``name`` at its promoted version's render (``spec.promotion``), with the
        agents that render pins; None when it has no promotion status (nor was a version
        of it asked for): pinned live."""
        status = topo.get("status") or {}
        asked = walk.version if name == walk.root else None
        entry = promotion.render_of(status, asked)
        if entry is None:
            if asked is not None and asked != status.get("version"):
                return Waiting(
                    f"version {asked} of Topology {name} is neither its current, active nor "
                    "candidate version"
                )
            return None
        cm = str(entry["renderedConfigMap"])
        # The content digest the promotion recorded (an older record: its name's).
        digest = entry.get("renderedSha256")
        owner = ObjectRef("Topology", name, ns, "")
        found = await self._render(ns, owner, cm, str(digest) if digest else None)
        if found is None:
            return Waiting(f"waiting for Topology {name}: its render {cm} not found", 2.0)
        data = found[0]
        key = ("topology", ns, cm)
        pins = self._parsed.get(key)
        if not isinstance(pins, promotion.TopologyPins):
            pins = promotion.read_topology_render(data)
            self._remember(key, pins)
        tspec = TopologySpec.model_validate(pins.spec)
        funnels: dict[str, FunnelSpec] = {}
        for fname, raw in pins.funnels.items():
            parsed = parse_funnel(raw)
            if isinstance(parsed, str):
                return Waiting(f"Topology {name}'s render {cm}: Funnel {fname}: {parsed}")
            funnels[fname] = parsed
            if parsed.review is not None:
                walk.agent_queue.append(parsed.review.agent)
        walk.topologies[name] = pinned.PinnedTopology(name, pins.version, tspec, funnels)
        for aname, pin in pins.agents.items():
            walk.agent_pins.setdefault(aname, pin)
        walk.agent_queue.extend(n.agent_ref.name for n in tspec.agents)
        walk.topo_queue.extend(pins.children)
        return True

    def _workspace(self, ns: str, name: str) -> pinned.PinnedWorkspace | Waiting:
        ws = one(self.idx.workspaces, (ns, name))
        if ws is None:
            return Waiting(f"waiting for Workspace {name}: not found")
        ok, why = ready(ws)
        if not ok:
            return Waiting(f"waiting for Workspace {name} to be Ready ({why})")
        spec = WorkspaceSpec.model_validate(ws.get("spec") or {})
        cm = (ws.get("status") or {}).get("renderedConfigMap")
        return pinned.PinnedWorkspace(name, spec, str(cm) if cm else None)

    def _funnels(
        self, ns: str, tspec: TopologySpec, tstatus: Mapping[str, Any]
    ) -> dict[str, FunnelSpec] | Waiting:
        """The Funnels ``tspec``'s nodes name, at the versions the Topology was made Ready
        with (a newer Funnel must first be picked up by it, like a newer Agent)."""
        pinned: dict[str, FunnelSpec] = {}
        want = tstatus.get("funnelVersions") or {}
        for node in tspec.agents:
            if node.funnel is None or node.funnel.name in pinned:
                continue
            name = node.funnel.name
            view = one(self.idx.funnels, (ns, name))
            parsed = parse_funnel(view["spec"]) if view else f"Funnel {name} not found"
            if isinstance(parsed, str):
                return Waiting(f"waiting for Funnel {name}: {parsed}")
            if want.get(name) != funnel_version(parsed):
                return Waiting(
                    f"waiting for the Topology to pick up Funnel {name}'s new version", 1.0
                )
            pinned[name] = parsed
        return pinned

    async def _resolve_agent(
        self, ns: str, name: str, walk: _Walk
    ) -> pinned.RenderedAgent | Waiting:
        pin = walk.agent_pins.get(name)
        if pin is not None:  # as a promoted Topology version runs it
            return await self._agent_at(ns, name, pin.version, pin.config_map, pin.sha256)
        agent = one(self.idx.agents, (ns, name))
        if agent is None:
            return Waiting(f"waiting for Agent {name}: not found")
        status = agent.get("status") or {}
        asked = walk.version if name == walk.root and not walk.topologies else None
        entry = promotion.render_of(status, asked)
        if entry is not None:  # spec.promotion: its active (or asked) version's render
            digest = entry.get("renderedSha256")
            return await self._agent_at(
                ns,
                name,
                str(entry["version"]),
                str(entry["renderedConfigMap"]),
                str(digest) if digest else None,
            )
        if asked is not None and asked != status.get("version"):
            return Waiting(
                f"version {asked} of Agent {name} is neither its current, active nor candidate "
                "version"
            )
        ok, why = ready(agent)
        if not ok:
            return Waiting(f"waiting for Agent {name} to be Ready ({why})")
        late = self._skill_to_pick_up(ns, status) if asked is None else None
        if late is not None:
            return Waiting(f"waiting for Agent {name} to pick up its granted Skill {late}", 1.0)
        version, cm = status.get("version"), status.get("renderedConfigMap")
        if not version or not cm:
            return Waiting(f"waiting for Agent {name}: not rendered yet", 2.0)
        digest = status.get("renderedSha256")
        return await self._agent_at(ns, name, str(version), str(cm), digest and str(digest))

    def _skill_to_pick_up(self, ns: str, agent_status: Mapping[str, Any]) -> str | None:
        """A granted skill the Agent's render went without that exists now, Ready or not
        reconciled yet: the Agent renders again with it. A Skill applied with its Agent
        (and a Run) can reach the operator after the Agent, whose first render is Ready
        without it (a missing grant is inert until it appears); the Run waits for the
        render the user applied, not the first one. A Skill that is not Ready stays inert."""
        for skill in agent_status.get("missingSkills") or ():
            summary = one(self.idx.skills, (ns, str(skill)))
            if summary is not None and summary.get("ready") is not False:
                return str(skill)
        return None

    async def _agent_at(
        self, ns: str, name: str, version: str, cm: str, digest: str | None = None
    ) -> pinned.RenderedAgent | Waiting:
        """The agent at ``version``, from its immutable rendered ConfigMap ``cm`` (whose
        content digest the Agent's status recorded as ``digest``, None: not recorded)."""
        key = (ns, str(cm), name, str(version))
        cached = self._parsed.get(key)
        if isinstance(cached, pinned.RenderedAgent):
            return cached
        found = await self._render(ns, ObjectRef("Agent", name, ns, ""), cm, digest)
        if found is None:
            return Waiting(f"waiting for Agent {name}: ConfigMap {cm} not found", 2.0)
        parsed = pinned.pinned_agent_from_config_map(
            name=name, version=str(version), config_map=str(cm), data=found[0]
        )
        self._remember(key, parsed)
        return parsed

    async def _resolve_skill(self, ns: str, ref: pinned.SkillRef) -> pinned.PinnedSkill | Waiting:
        # Review is the one live fact a pinned skill carries, so it is part of the cache key:
        # an approved Review of exactly this content version (swarm-authored skills).
        reviewed = any(
            approves(r, ref.content_hash) for r in self.idx.skill_reviews.get((ns, ref.name)) or ()
        )
        key = (ns, ref, reviewed)
        cached = self._parsed.get(key)
        if isinstance(cached, pinned.PinnedSkill):
            return cached
        data = await self.skill_revision(ns, ref.name, ref.config_map, ref.content_hash)
        if data is None:
            return Waiting(
                f"waiting for Skill {ref.name}: ConfigMap {ref.config_map} not found", 2.0
            )
        parsed = pinned.pinned_skill_from_config_map(
            name=ref.name,
            content_hash=ref.content_hash,
            config_map=ref.config_map,
            data=data,
            scripts=ref.scripts,
            reviewed=reviewed,
        )
        self._remember(key, parsed)
        return parsed

    def _remember(self, key: Any, value: Any) -> None:
        """Parsed immutable ConfigMaps (keyed by their content-addressed names)."""
        if len(self._parsed) > CACHE_LIMIT:
            self._parsed.clear()
        self._parsed[key] = value

    async def _flow_data(
        self, ns: str, ws: WorkspaceSpec, agents: Iterable[pinned.RenderedAgent]
    ) -> dict[str, str] | Waiting:
        # Only the flow data some agent of the run reads goes into the bundle. These
        # ConfigMaps are the user's (mutable), so they are read every time, never cached.
        wanted = set(bundles.flow_data_paths(a.agent for a in agents))
        out: dict[str, str] = {}
        for item in ws.flow_data:
            if item.path not in wanted:
                continue
            if item.content is not None:
                out[item.path] = item.content
                continue
            assert item.config_map_ref is not None
            cm = await k8s.read_config_map(ns, item.config_map_ref.name)
            data = (cm or {}).get("data") or {}
            if item.config_map_ref.key not in data:
                return Waiting(
                    f"waiting for flow data {item.path}: ConfigMap "
                    f"{item.config_map_ref.name} key {item.config_map_ref.key} not found"
                )
            out[item.path] = str(data[item.config_map_ref.key])
        return out

    async def _read(self, namespace: str, name: str, cache: bool = True) -> _Read | None:
        """(data, binaryData, immutable) of a ConfigMap; only an immutable one is cached
        (by name), and only when ``cache`` (not: a large skill's parts, a MiB each)."""
        key = (namespace, name)
        cached = self._cm_cache.get(key) if cache else None
        if cached is not None:
            return cached[0], cached[1], True
        cm = await k8s.read_config_map(namespace, name)
        if cm is None:
            return None
        data = {str(k): str(v) for k, v in (cm.get("data") or {}).items()}
        binary = {str(k): str(v) for k, v in (cm.get("binaryData") or {}).items()}
        # Only an immutable ConfigMap can be cached by name: a mutable one may change.
        if cm.get("immutable") and cache:
            if len(self._cm_cache) > CACHE_LIMIT:
                self._cm_cache.clear()
            self._cm_cache[key] = (data, binary)
        return data, binary, bool(cm.get("immutable"))

    async def pinned_render(
        self,
        namespace: str,
        owner: ObjectRef,
        name: str,
        mismatch: Callable[[Mapping[str, str], Mapping[str, str], bool], str | None],
        cache: bool = True,
    ) -> _Read | None:
        """ConfigMap ``name``, a render of ``owner`` that a Run or a served workload pins
        (None: gone), only when ``mismatch`` finds nothing wrong with it: anyone who may
        create ConfigMaps may delete the operator's and create another under its name. Else
        :class:`~swarmkit_operator.builders.trust.Refused` (``TamperedObject``) naming it:
        a Run fails, a served workload reports it. The one content check of every render
        read on the Run side (skill revisions and their parts, agent and topology renders).
        """
        found = await self._read(namespace, name, cache)
        if found is None:
            return None
        why = mismatch(*found)
        if why is not None:
            self._cm_cache.pop((namespace, name), None)
            raise trust.tampered_render(owner.kind, owner.name, name, why)
        return found

    async def _render(
        self, namespace: str, owner: ObjectRef, name: str, digest: str | None
    ) -> _Read | None:
        """An Agent's or a Topology's render ``name`` (:meth:`pinned_render`), checked
        against the content ``digest`` its owner's status recorded (None: its name's)."""
        return await self.pinned_render(
            namespace,
            owner,
            name,
            lambda data, binary, immutable: trust.pinned_render_mismatch(
                owner, name, data, binary, immutable, digest
            ),
        )

    async def skill_revision(
        self, namespace: str, skill: str, name: str, content_hash: str, cache: bool = True
    ) -> dict[str, str] | None:
        """The data of skill ``skill``'s revision ConfigMap ``name`` (None: gone), only when
        it is the operator's render of ``content_hash``, the hash the Agent (or the Run's
        bundle) pinned, and so is each of its part ConfigMaps (a large skill: gone is
        ``PinnedRevisionMissing``); else ``TamperedObject`` naming the ConfigMap
        (:meth:`pinned_render`). ``cache=False``: read now (a pod is about to mount it)."""
        owner = ObjectRef("Skill", skill, namespace, "")
        found = await self.pinned_render(
            namespace,
            owner,
            name,
            lambda data, binary, immutable: revision_mismatch(
                data, immutable, content_hash, binary, skill
            ),
            cache,
        )
        if found is None:
            return None
        files = load_rendered_skill(found[0]).files
        for part in sorted({f.config_map for f in files if f.config_map}):
            key = ("part", namespace, part, content_hash)
            if cache and key in self._parsed:
                continue
            held = await self.pinned_render(
                namespace,
                owner,
                part,
                functools.partial(part_mismatch, files, part),
                cache=False,
            )
            if held is None:
                raise trust.missing(f"skill {skill}'s revision {name}: its part", part)
            self._remember(key, True)
        return found[0]

    async def existing_bundle(
        self, namespace: str, cm_name: str, digest: str | None
    ) -> bundles.RenderedBundle:
        """What an earlier start pinned, read back from its bundle ConfigMap.

        A recreated Job, or a start retried after a crash, must run with exactly what the
        Run pinned the first time, not with what the target resolves to now; and only with
        the ConfigMap the operator wrote: its data must have ``digest`` (the Run's
        ``status.bundleSha256``), else :class:`~swarmkit_operator.builders.trust.Refused`
        (``TamperedObject``; gone: ``PinnedRevisionMissing``). Without a recorded digest
        nothing proves who wrote it: refused too.
        """
        cm = await k8s.read_config_map(namespace, cm_name)
        if cm is None:
            raise trust.missing("the run's bundle", cm_name)
        if not digest:
            raise trust.Refused(
                REASON_TAMPERED_OBJECT,
                f"the run's bundle ConfigMap {cm_name} exists but the run recorded no digest "
                "of a bundle the operator wrote: it is not used",
            )
        return await self.pinned_bundle(
            namespace, trust.check("the run's bundle", cm_name, cm, digest)
        )

    async def pinned_bundle(self, namespace: str, cm: Mapping[str, Any]) -> bundles.RenderedBundle:
        """What the Run's bundle ConfigMap ``cm`` pins, its data already proven the
        operator's (:meth:`existing_bundle`, or the pipeline's
        :func:`~.pipeline.ensure_bundle`): the bundle, and the files of each skill
        revision it pins, read (not cached) so each revision still exists."""
        data = cm.get("data") or {}
        bundle = RunBundle.model_validate_json(data[BUNDLE_FILE])
        files: dict[str, tuple[jobs.SkillFileItem, ...]] = {}
        for skill in bundle.skills.values():
            if not skill.config_map:
                continue
            # Read, not the cache: the revision must still exist for the pod to mount it.
            skill_data = await self.skill_revision(
                namespace, skill.name, skill.config_map, skill.content_hash, cache=False
            )
            if skill_data is None:
                raise trust.missing(f"skill {skill.name}'s pinned revision", skill.config_map)
            rendered = load_rendered_skill(skill_data)
            files[skill.config_map] = pinned.skill_file_items(
                rendered.files, with_skill_md=SKILL_MD in skill_data
            )
        return bundles.rendered_from_config_map(cm, files)
