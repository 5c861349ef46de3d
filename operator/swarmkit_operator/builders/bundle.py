"""The run bundle (pure: resolved, pinned objects → a :class:`RunBundle` and its ConfigMap).

The handler resolves the Run's target (Topology or Agent), every agent it may execute, every
skill those agents were granted (exactly the content hashes their versions folded in) and the
Workspace; this module turns them into the bundle the runner validates with the same model,
and into the run's immutable ConfigMap ``run-<name>-<uid5>-bundle``:

* ``bundle.json`` (:meth:`RunBundle.to_json`) and ``flow.<n>`` keys for the flow data files
  the run's agents may read (copied, so they are pinned like everything else; their
  sha256 in ``RunBundle.flow_data_sha256``, which the runner checks);
* label ``swarmkit.dev/run`` (and ``swarmkit.dev/run-uid``), owned by the Run;
* annotation ``swarmkit.dev/pinned-configmaps``: the comma-separated skill, agent and
  workspace ConfigMaps the run pins, which the reconcile loop's garbage collection keeps
  while the Run is unfinished. When the Run finishes, the operator adds the label
  ``swarmkit.dev/run-finished: "true"`` to the bundle ConfigMap (its data stays immutable).

Skill file contents are never copied into the bundle: each bundled file of a skill spec is
rewritten to a ``configMapRef`` naming the rendered skill ConfigMap and key it is mounted
from; the runner reads files from ``BundleSkill.directory``. Their digests are copied
(``BundleSkill.files_sha256``, :func:`mounted_digests`): the runner checks every mounted
file against them before anything runs, so a skill ConfigMap replaced between the
operator's check and the kubelet's mount is refused (the bundle itself is checked against
the sha256 in the Job, which only the operator writes). Secrets are never resolved: the
Workspace spec carries only Secret references.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from swarmkit_api.agent import AgentSpec
from swarmkit_api.bundle import (
    BUNDLE_FILE,
    BundleAgent,
    BundleSkill,
    BundleTopology,
    RunBundle,
    RunInfo,
    ScriptPin,
)
from swarmkit_api.common import ConfigMapKeyRef
from swarmkit_api.conditions import (
    REASON_APPROVED,
    REASON_DENIED_BY_WORKSPACE,
    REASON_EXECUTION_DISABLED,
    REASON_NOT_ALLOW_LISTED,
    REASON_NOT_APPROVED,
    REASON_PIN_MISMATCH,
)
from swarmkit_api.run import PinnedVersions, RunSpec
from swarmkit_api.skill import SkillFile, SkillSpec
from swarmkit_api.workspace import (
    RESERVED_PACK_ID,
    Governance,
    RuntimeDefaults,
    WorkspaceSpec,
)

from ..config import OperatorConfig
from ..hashing import sha256_hex
from . import PINNED_ANNOTATION, RUN_FINISHED_LABEL
from .job import (
    FLOW_DATA_MOUNT,
    RUN_LABEL,
    RUN_UID_LABEL,
    RunRef,
    SkillFileItem,
    SkillMount,
    bundle_config_map_name,
    label_value,
    owner_reference,
    run_labels,
    skill_directory,
)
from .pinned import (
    PinnedAgent,
    PinnedSkill,
    PinnedTopology,
    PinnedWorkspace,
)
from .skill import SKILL_MD, skill_md

#: A ConfigMap holds at most 1 MiB; keep room for metadata.
MAX_BUNDLE_BYTES = 1000 * 1024
FLOW_KEY_PREFIX = "flow."


class BundleTooLarge(ValueError):
    """The rendered bundle would not fit into one ConfigMap."""


@dataclass(frozen=True)
class RunInput:
    """The Run being rendered."""

    name: str
    namespace: str
    uid: str
    spec: RunSpec
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def ref(self) -> RunRef:
        return RunRef(
            name=self.name,
            namespace=self.namespace,
            uid=self.uid,
            labels=self.spec.labels,
            correlation_id=self.spec.correlation_id,
        )


@dataclass(frozen=True)
class RenderedBundle:
    """A bundle with everything needed to mount it."""

    bundle: RunBundle
    pinned: PinnedVersions
    skill_mounts: tuple[SkillMount, ...]
    #: bundle ConfigMap key → flow data path (relative to the flow data mount).
    flow_data_keys: Mapping[str, str]
    #: bundle ConfigMap key → content.
    flow_data: Mapping[str, str]
    pinned_config_maps: tuple[str, ...]
    #: ``bundle.to_json()``, computed once.
    bundle_json: str = ""


def effective_governance(workspace: WorkspaceSpec) -> Governance:
    return workspace.governance or Governance()


def effective_timeout(spec: RunSpec, workspace: WorkspaceSpec) -> int:
    runtime = workspace.runtime or RuntimeDefaults()
    return spec.timeout_seconds or runtime.default_timeout_seconds


def agent_permissions(spec: AgentSpec, workspace: WorkspaceSpec) -> list[str]:
    """The agent's permission bundle's permissions plus its inline ones, each once."""
    out: list[str] = []
    if spec.permissions_bundle:
        for pb in workspace.permission_bundles:
            if pb.name == spec.permissions_bundle:
                out.extend(pb.permissions)
    out.extend(spec.permissions)
    return list(dict.fromkeys(out))


def agent_commands(spec: AgentSpec, workspace: WorkspaceSpec) -> list[str]:
    """``pack:<id>`` grants as ``<pack>/<command>`` (read commands only)."""
    out: list[str] = []
    packs = {p.id: p for p in workspace.command_packs}
    for grant in spec.skills:
        if not grant.startswith("pack:"):
            continue
        pack_id = grant.removeprefix("pack:")
        pack = packs.get(pack_id)
        if pack_id == RESERVED_PACK_ID or pack is None:
            continue
        out.extend(f"{pack.id}/{c.name}" for c in pack.commands if c.effects == "read")
    return list(dict.fromkeys(out))


def _denied_by_workspace(governance: Governance, skill: str, path: str) -> bool:
    return any(
        d.skill == skill and (d.path is None or d.path == path) for d in governance.denied_scripts
    )


def script_pins(
    skill: PinnedSkill, namespace: str, workspace: WorkspaceSpec, config: OperatorConfig
) -> list[ScriptPin]:
    """Pins of every bundled script: approval can only narrow along the way.

    Approved needs all of: the operator allows execution, the Workspace does not forbid it,
    the operator's allow-list pins this exact content, the Workspace does not deny it, and
    the Skill's own status (the reconcile loop's verdict) did not refuse it.
    """
    governance = effective_governance(workspace)
    status = {s.path: s for s in skill.scripts}
    sha_by_path = {s.path: s.sha256 for s in skill.scripts}
    for item in skill.files:
        if item.sha256:
            sha_by_path[item.path] = item.sha256
    paths = sorted(
        {i.path for i in skill.files if i.is_script}
        | {s.path for s in skill.scripts}
        | {f.path for f in skill.spec.files if f.is_script}
    )
    pins: list[ScriptPin] = []
    for path in paths:
        sha = sha_by_path.get(path, "")
        allowed = config.pin_for(namespace, skill.name, path)
        entry = status.get(path)
        approved = False
        if not config.allow_script_execution or not governance.allow_script_execution:
            reason = REASON_EXECUTION_DISABLED
        elif allowed is None:
            reason = REASON_NOT_ALLOW_LISTED
        elif not sha or allowed.sha256 != sha.lower():
            reason = REASON_PIN_MISMATCH
        elif _denied_by_workspace(governance, skill.name, path):
            reason = REASON_DENIED_BY_WORKSPACE
        elif entry is not None and not entry.approved:
            reason = entry.reason or REASON_NOT_APPROVED
        else:
            approved, reason = True, REASON_APPROVED
        pin = allowed.sha256 if approved and allowed is not None else sha
        pins.append(ScriptPin(path=path, sha256=pin, approved=approved, reason=reason))
    return pins


_PROVENANCE_POLICY = ("imported_from_registry", "vendor_published", "derived_from_template")


def skill_callable(skill: PinnedSkill, workspace: WorkspaceSpec) -> tuple[bool, str]:
    """Whether provenance lets the run call the skill, and why not."""
    authored_by = skill.spec.provenance.authored_by
    if authored_by == "authored_by_swarm" and not skill.reviewed:
        return False, (
            "authored_by_swarm: locked until a reviewer approves its Review "
            f"skill-{skill.name}-{skill.content_hash[:8]}"
        )
    policy = effective_governance(workspace).provenance
    if policy is not None and authored_by in _PROVENANCE_POLICY:
        verdict: Literal["allow", "deny"] = getattr(policy, authored_by)
        if verdict == "deny":
            return False, f"{authored_by}: denied by the Workspace provenance policy"
    return True, ""


def bundle_skill_spec(skill: PinnedSkill) -> SkillSpec:
    """The skill spec without file contents: each file points at its rendered key."""
    if not skill.spec.files:
        return skill.spec
    keys = {i.path: i.key for i in skill.files}
    files = []
    for f in skill.spec.files:
        key = keys.get(f.path)
        if key and skill.config_map:
            files.append(
                SkillFile(
                    path=f.path,
                    config_map_ref=ConfigMapKeyRef(name=skill.config_map, key=key),
                    executable=f.executable,
                )
            )
        else:
            files.append(SkillFile(path=f.path, content="", executable=f.executable))
    return skill.spec.model_copy(update={"files": files})


def mounted_digests(skill: PinnedSkill) -> dict[str, str]:
    """sha256 of each file the pod mounts in ``skill``'s directory (its volume items, by
    path): ``BundleSkill.files_sha256``, what the runner checks before anything runs, since
    the revision ConfigMap may be replaced between the resolver's check and the kubelet's
    mount. SKILL.md's is of the text the spec renders, the one the resolver's revision check
    (``revision_mismatch``) compared the ConfigMap's with; every other file's is the sha256
    of its content the revision's file list records (and the check compared too)."""
    if not skill.config_map:
        return {}
    digests: dict[str, str] = {}
    for item in skill.files:
        if item.sha256:
            digests[item.path] = item.sha256
        elif item.path == SKILL_MD:
            text = skill_md(skill.name, skill.spec.description, skill.spec.instructions)
            digests[item.path] = sha256_hex(text)
    return digests


def _bundle_skill(
    skill: PinnedSkill, namespace: str, workspace: WorkspaceSpec, config: OperatorConfig
) -> BundleSkill:
    callable_, blocked = skill_callable(skill, workspace)
    return BundleSkill(
        name=skill.name,
        content_hash=skill.content_hash,
        spec=bundle_skill_spec(skill),
        directory=skill_directory(skill.name),
        scripts=script_pins(skill, namespace, workspace, config),
        callable=callable_,
        blocked_reason=blocked,
        reviewed=skill.reviewed,
        synthesized_topology=skill.synthesized_topology,
        config_map=skill.config_map or None,
        files_sha256=mounted_digests(skill),
    )


def flow_data_paths(agents: Iterable[PinnedAgent]) -> list[str]:
    """Flow data paths any of the run's agents may read."""
    return sorted({p for a in agents for p in a.spec.flow_data_access})


def flow_data_keys(paths: Sequence[str]) -> dict[str, str]:
    """Bundle ConfigMap key of each flow data path (``flow.<n>``)."""
    return {f"{FLOW_KEY_PREFIX}{i}": p for i, p in enumerate(sorted(paths))}


def too_large_message(size: int, input_bytes: int) -> str:
    """Why a bundle does not fit, with the share of the Run's own input (the field a user
    can shorten) by its name."""
    return (
        f"the run bundle is {size} bytes, more than a ConfigMap holds ({MAX_BUNDLE_BYTES}); "
        f"spec.input is {input_bytes} bytes of it"
    )


def render_bundle(
    *,
    run: RunInput,
    target_kind: Literal["Topology", "Agent"],
    target: str,
    topologies: Sequence[PinnedTopology],
    agents: Sequence[PinnedAgent],
    skills: Sequence[PinnedSkill],
    workspace: PinnedWorkspace,
    config: OperatorConfig,
    flow_data: Mapping[str, str] | None = None,
) -> RenderedBundle:
    """The run's bundle. ``flow_data`` maps flow data path → content (resolved by the caller).

    Raises :class:`BundleTooLarge` when it would not fit into a ConfigMap, and pydantic's
    ``ValidationError`` when the result is not a valid bundle.
    """
    ws = workspace.spec
    governance = effective_governance(ws)
    info = _run_info(run, ws, governance)
    used_skills = {s for a in agents for s in a.skills}
    bundle_skills = {
        s.name: _bundle_skill(s, run.namespace, ws, config)
        for s in sorted(skills, key=lambda s: s.name)
        if s.name in used_skills
    }
    bundle_agents = _bundle_agents(agents, bundle_skills, ws)
    bundle_topologies = {
        t.name: BundleTopology(name=t.name, version=t.version, spec=t.spec, funnels=dict(t.funnels))
        for t in sorted(topologies, key=lambda t: t.name)
    }
    paths = flow_data_paths(agents)
    known = {f.path for f in ws.flow_data}
    paths = [p for p in paths if p in known and flow_data is not None and p in flow_data]
    keys = flow_data_keys(paths)
    content = {k: (flow_data or {})[p] for k, p in keys.items()}
    bundle = RunBundle(
        run=info,
        target_kind=target_kind,
        target=target,
        topologies=bundle_topologies,
        agents=bundle_agents,
        skills=bundle_skills,
        workspace=ws,
        workspace_name=workspace.name,
        allow_script_execution=config.allow_script_execution and governance.allow_script_execution,
        governance=governance,
        flow_data_dir=FLOW_DATA_MOUNT if keys else None,
        # the runner checks each mounted file: the Job's sha256 covers bundle.json only
        flow_data_sha256={p: sha256_hex(content[k]) for k, p in keys.items()},
    )
    bundle_json = bundle.to_json()
    size = len(bundle_json.encode()) + sum(len(v.encode()) for v in content.values())
    if size > MAX_BUNDLE_BYTES:
        raise BundleTooLarge(too_large_message(size, len(info.input.encode())))
    mounts = tuple(
        SkillMount(skill=s.name, config_map=s.config_map, items=s.files)
        for s in sorted(skills, key=lambda s: s.name)
        if s.name in bundle_skills and s.config_map
    )
    topo_version = bundle_topologies[target].version if target_kind == "Topology" else None
    pinned = PinnedVersions(
        topology=topo_version,
        agents={a.name: a.version for a in bundle_agents.values()},
        skills={s.name: s.content_hash for s in bundle_skills.values()},
    )
    cms = [m.config_map for m in mounts]
    cms += [a.config_map for a in agents if a.config_map]
    if workspace.config_map:
        cms.append(workspace.config_map)
    return RenderedBundle(
        bundle=bundle,
        pinned=pinned,
        skill_mounts=mounts,
        flow_data_keys=keys,
        flow_data=content,
        pinned_config_maps=tuple(dict.fromkeys(cms)),
        bundle_json=bundle_json,
    )


def _run_info(run: RunInput, ws: WorkspaceSpec, governance: Governance) -> RunInfo:
    """The bundle's ``run``: identity, input, the effective timeout and spend caps."""
    return RunInfo(
        name=run.name,
        namespace=run.namespace,
        uid=run.uid,
        correlation_id=run.spec.correlation_id or run.uid,
        input=run.spec.input,
        timeout_seconds=effective_timeout(run.spec, ws),
        # the runner checks the cap before every model call (swarmkit_runner.spend)
        max_cost=run.spec.max_cost or governance.max_cost_per_run,
        max_tokens=run.spec.max_tokens,
        read_only=run.spec.read_only,
        replay=run.spec.replay,
    )


def _bundle_agents(
    agents: Sequence[PinnedAgent], bundle_skills: Mapping[str, BundleSkill], ws: WorkspaceSpec
) -> dict[str, BundleAgent]:
    """The pinned agents with the skills the bundle carries, their commands and
    permissions (as pinned, else derived from the Workspace)."""
    return {
        a.name: BundleAgent(
            name=a.name,
            version=a.version,
            spec=a.spec,
            skills=[s for s in a.skills if s in bundle_skills],
            commands=list(a.commands) if a.commands is not None else agent_commands(a.spec, ws),
            permissions=(
                list(a.permissions) if a.permissions is not None else agent_permissions(a.spec, ws)
            ),
        )
        for a in sorted(agents, key=lambda a: a.name)
    }


def bundle_data(rendered: RenderedBundle) -> dict[str, str]:
    """The bundle ConfigMap's ``data`` (its digest is the Run's ``status.bundleSha256``)."""
    return {BUNDLE_FILE: rendered.bundle_json or rendered.bundle.to_json(), **rendered.flow_data}


def bundle_file_sha256(rendered: RenderedBundle) -> str:
    """sha256 of bundle.json as written: the Job's ``SWARMKIT_BUNDLE_SHA256`` (the runner
    refuses another file)."""
    return sha256_hex(bundle_data(rendered)[BUNDLE_FILE])


def job_bundle_mismatch(data: Mapping[str, str], file_sha256: str) -> str | None:
    """Why ``data`` (a bundle ConfigMap's) is not the bundle a Job runs whose
    ``SWARMKIT_BUNDLE_SHA256`` is ``file_sha256``; None when it is exactly that: its
    bundle.json has that sha256, and its other keys are the flow data files that bundle.json
    pins, each with the sha256 it records (the runner's own checks, made before the
    operator records the bundle's digest in the Run's status)."""
    text = data.get(BUNDLE_FILE)
    if text is None or not file_sha256:
        return "no bundle.json" if text is None else "its Job records no bundle sha256"
    found = sha256_hex(text)
    if found != file_sha256:
        return f"its bundle.json has sha256 {found[:12]}, the Job's {file_sha256[:12]}"
    recorded = RunBundle.model_validate_json(text).flow_data_sha256
    keys = flow_data_keys(sorted(recorded))
    if set(data) != {BUNDLE_FILE, *keys}:
        return "its keys are not bundle.json and the flow data files it pins"
    wrong = [p for k, p in keys.items() if sha256_hex(data[k]) != recorded[p]]
    return f"flow data file {wrong[0]} is not the one bundle.json records" if wrong else None


def build_bundle_config_map(run: RunRef, rendered: RenderedBundle) -> dict[str, Any]:
    """The run's immutable bundle ConfigMap, owned by the Run."""
    labels = run_labels(run, rendered.bundle)
    labels[RUN_LABEL] = label_value(run.name)
    labels[RUN_UID_LABEL] = label_value(run.uid)
    data = bundle_data(rendered)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": bundle_config_map_name(run.name, run.uid),
            "namespace": run.namespace,
            "labels": labels,
            "annotations": {PINNED_ANNOTATION: ",".join(rendered.pinned_config_maps)},
            "ownerReferences": [owner_reference(run)],
        },
        "immutable": True,
        "data": data,
    }


def rendered_from_config_map(
    config_map: Mapping[str, Any], skill_files: Mapping[str, Sequence[SkillFileItem]]
) -> RenderedBundle:
    """Rebuild a :class:`RenderedBundle` from an existing bundle ConfigMap.

    Used when the ConfigMap already exists (operator restart, Job recreation): the run keeps
    exactly what it pinned the first time. ``skill_files`` maps each pinned skill's rendered
    ConfigMap name to its files (from that ConfigMap's index).
    """
    data: Mapping[str, str] = config_map.get("data") or {}
    bundle = RunBundle.model_validate_json(data[BUNDLE_FILE])
    mounts = tuple(
        SkillMount(
            skill=s.name, config_map=s.config_map, items=tuple(skill_files.get(s.config_map, ()))
        )
        for s in sorted(bundle.skills.values(), key=lambda s: s.name)
        if s.config_map
    )
    flow = {k: v for k, v in data.items() if k.startswith(FLOW_KEY_PREFIX)}
    paths = sorted(
        {p for a in bundle.agents.values() for p in a.spec.flow_data_access}
        & {f.path for f in bundle.workspace.flow_data}
    )
    keys = {k: p for k, p in flow_data_keys(paths).items() if k in flow} if flow else {}
    topo = bundle.topologies.get(bundle.target) if bundle.target_kind == "Topology" else None
    pinned = PinnedVersions(
        topology=topo.version if topo else None,
        agents={a.name: a.version for a in bundle.agents.values()},
        skills={s.name: s.content_hash for s in bundle.skills.values()},
    )
    meta = config_map.get("metadata") or {}
    annotation = str((meta.get("annotations") or {}).get(PINNED_ANNOTATION, ""))
    return RenderedBundle(
        bundle=bundle,
        pinned=pinned,
        skill_mounts=mounts,
        flow_data_keys=keys,
        flow_data=flow,
        pinned_config_maps=tuple(c for c in annotation.split(",") if c),
        bundle_json=data[BUNDLE_FILE],  # as written: its digest is the Run's bundleSha256
    )


__all__ = [
    "PINNED_ANNOTATION",
    "RUN_FINISHED_LABEL",
    "BundleTooLarge",
    "RenderedBundle",
    "RunInput",
    "build_bundle_config_map",
    "bundle_data",
    "bundle_file_sha256",
    "effective_governance",
    "effective_timeout",
    "job_bundle_mismatch",
    "mounted_digests",
    "render_bundle",
    "rendered_from_config_map",
    "script_pins",
    "skill_callable",
]
