"""Loading the mounted run bundle and checking it is runnable.

Problems are reported as one line (:class:`BundleError`): the runner exits with code 2 and
outcome ValidationFailed (``TamperedObject`` for a bundle or a mounted skill file that is
not the one the operator wrote), and that line is the message the Run shows.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import ValidationError

from swarmkit_api.bundle import BUNDLE_SHA256_ENV, BundleAgent, RunBundle
from swarmkit_api.workspace import ModelProvider

from .errors import BundleError
from .paths import RunnerPaths
from .position import AgentPosition
from .skill_mounts import check_flow_files, check_skill_files


def _format_validation_error(err: ValidationError) -> str:
    errors = err.errors(include_url=False)
    first = errors[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {first.get('msg', 'invalid')}{more}"


def load_bundle(path: Path, sha256: str | None = None) -> RunBundle:
    """Read and validate ``path`` (bundle.json) with the shared model; with ``sha256``
    (what the operator put in the Job, ``SWARMKIT_BUNDLE_SHA256``), only that very file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BundleError(f"bundle not found: {path}") from None
    except OSError as exc:
        raise BundleError(f"bundle unreadable: {path}: {exc.strerror or exc}") from None
    found = hashlib.sha256(raw).hexdigest()
    if sha256 and found != sha256:
        raise BundleError(
            f"bundle {path} is not the one the operator wrote (sha256 {found[:12]}, "
            f"the Job says {sha256[:12]}): it was replaced; refusing to run it"
        )
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BundleError(f"bundle is not valid JSON: {exc}") from None
    try:
        bundle = RunBundle.model_validate(data)
    except ValidationError as exc:
        raise BundleError(f"invalid bundle: {_format_validation_error(exc)}") from None
    check_consistency(bundle)
    return bundle


def load_mounted(paths: RunnerPaths) -> RunBundle:
    """The bundle as a pod runs it: only the very bundle.json the operator wrote (the
    sha256 its Job or Deployment carries, ``SWARMKIT_BUNDLE_SHA256``), and every skill file
    and flow data file mounted beside it checked against the digests that bundle records
    (:mod:`.skill_mounts`): a replaced one is :class:`~.errors.TamperedFile`, before
    anything runs."""
    bundle = load_bundle(paths.bundle_file, os.environ.get(BUNDLE_SHA256_ENV))
    check_skill_files(bundle, paths)
    check_flow_files(bundle)
    return bundle


def root_position(bundle: RunBundle) -> AgentPosition:
    """Where the run starts: the target topology's root or the single target agent."""
    if bundle.target_kind == "Agent":
        return AgentPosition(bundle.agents[bundle.target], None, None)
    topo = bundle.topologies[bundle.target].spec
    root = topo.root
    return AgentPosition(bundle.agents[root.agent_ref.name], root, bundle.target)


def children(bundle: RunBundle, position: AgentPosition) -> list[AgentPosition]:
    """The topology children of ``position`` (its delegate_to_<child> tools)."""
    if position.node is None or position.topology is None:
        return []
    topo = bundle.topologies[position.topology].spec
    return [
        AgentPosition(bundle.agents[n.agent_ref.name], n, position.topology)
        for n in topo.children(position.node.name)
    ]


def provider_for(bundle: RunBundle, agent: BundleAgent) -> ModelProvider:
    """The agent's model provider (named, or the Workspace's first)."""
    providers = bundle.workspace.model_providers
    wanted = agent.spec.model.provider if agent.spec.model else None
    if wanted is None:
        if not providers:
            if agent.spec.replay:
                return ModelProvider(name="replay", type="replay")
            raise BundleError(
                f"agent {agent.name}: the workspace declares no modelProviders "
                "(and the agent has no replay turns)"
            )
        return providers[0]
    for provider in providers:
        if provider.name == wanted:
            return provider
    raise BundleError(f"agent {agent.name}: model provider {wanted!r} is not in the workspace")


def check_consistency(bundle: RunBundle) -> None:
    """Cross-references the pydantic model cannot check."""
    if bundle.target_kind == "Agent":
        if bundle.target not in bundle.agents:
            raise BundleError(f"target agent {bundle.target!r} is not in the bundle")
    else:
        if bundle.target not in bundle.topologies:
            raise BundleError(f"target topology {bundle.target!r} is not in the bundle")
    for tname, topo in bundle.topologies.items():
        for node in topo.spec.agents:
            if node.agent_ref.name not in bundle.agents:
                raise BundleError(
                    f"topology {tname}: node {node.name} names agent "
                    f"{node.agent_ref.name!r}, which is not in the bundle"
                )
    for key, agent in bundle.agents.items():
        if agent.name != key:
            raise BundleError(f"agents.{key}: name {agent.name!r} does not match its key")
    for key, skill in bundle.skills.items():
        if skill.name != key:
            raise BundleError(f"skills.{key}: name {skill.name!r} does not match its key")
    _check_skills(bundle)
    for agent in bundle.agents.values():
        provider = provider_for(bundle, agent)
        if provider.type != "replay":
            model = agent.spec.model.name if agent.spec.model else None
            if not (model or provider.default_model):
                raise BundleError(
                    f"agent {agent.name}: no model name and provider {provider.name} "
                    "has no defaultModel"
                )
        native = agent.spec.native_tools
        if native is not None and native.web_search and bundle.workspace.search_provider is None:
            raise BundleError(
                f"agent {agent.name}: nativeTools.webSearch is enabled but the workspace has "
                "no searchProvider, so this runtime cannot provide web_search"
            )


def _check_skills(bundle: RunBundle) -> None:
    """What skills reference must be in the bundle / workspace (fails the load, not a run)."""
    from .commands import check_bundle_commands

    check_bundle_commands(bundle)
    credentials = {c.name for c in bundle.workspace.credentials}
    for name, skill in bundle.skills.items():
        impl = skill.spec.implementation
        if impl is None:
            continue
        if impl.type == "composed":
            for component in impl.composes or ():
                if component not in bundle.skills:
                    raise BundleError(
                        f"skill {name}: composes {component!r}, which is not in the bundle"
                    )
        if impl.type == "agent":
            topology = impl.topology or skill.synthesized_topology
            if impl.card_url is None and topology is not None and topology not in bundle.topologies:
                raise BundleError(f"skill {name}: topology {topology!r} is not in the bundle")
            if impl.credentials_ref is not None and impl.credentials_ref not in credentials:
                raise BundleError(
                    f"skill {name}: credentialsRef {impl.credentials_ref!r} is not a "
                    "workspace credential"
                )
