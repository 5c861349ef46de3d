"""Builders' inputs made from the repository's examples (no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from swarmkit_api.agent import AgentSpec
from swarmkit_api.run import RunSpec
from swarmkit_api.skill import SkillSpec
from swarmkit_api.topology import TopologySpec
from swarmkit_api.workspace import WorkspaceSpec
from swarmkit_operator.builders import ObjectRef
from swarmkit_operator.builders.bundle import (
    RenderedBundle,
    RunInput,
    render_bundle,
)
from swarmkit_operator.builders.pinned import (
    PinnedAgent,
    PinnedSkill,
    PinnedTopology,
    PinnedWorkspace,
    pinned_skill_from_config_map,
)
from swarmkit_operator.builders.skill import render_skill
from swarmkit_operator.config import OperatorConfig

REPO = Path(__file__).resolve().parents[3]
RUN_UID = "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
NAMESPACE = "team-a"


def examples() -> dict[tuple[str, str], dict[str, Any]]:
    docs: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted((REPO / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def pinned_skill(name: str, spec: dict[str, Any], config: OperatorConfig) -> PinnedSkill:
    render = render_skill(ObjectRef("Skill", name, NAMESPACE, f"uid-{name}"), spec, {}, config)
    assert render.config_map is not None and render.content_hash is not None
    return pinned_skill_from_config_map(
        name=name,
        content_hash=render.content_hash,
        config_map=render.config_map["metadata"]["name"],
        data=render.config_map["data"],
    )


def example_bundle(
    config: OperatorConfig | None = None,
    workspace_patch: dict[str, Any] | None = None,
    run_patch: dict[str, Any] | None = None,
) -> tuple[RunInput, RenderedBundle]:
    config = config or OperatorConfig()
    docs = examples()
    ws_doc = dict(docs[("Workspace", "default")]["spec"])
    ws_doc.update(workspace_patch or {})
    ws = WorkspaceSpec.model_validate(ws_doc)
    skills = {
        name: pinned_skill(name, doc["spec"], config)
        for (kind, name), doc in docs.items()
        if kind == "Skill"
    }
    agents = []
    for (kind, name), doc in docs.items():
        if kind != "Agent":
            continue
        spec = AgentSpec.model_validate(doc["spec"])
        agents.append(
            PinnedAgent(
                name=name,
                version=f"v-{name}",
                spec=spec,
                skills=tuple(s for s in spec.skills if s in skills),
                config_map=f"agent-{name}-12345678",
            )
        )
    topo = PinnedTopology(
        "review-pipeline",
        "topo-version-1",
        TopologySpec.model_validate(docs[("Topology", "review-pipeline")]["spec"]),
    )
    run_spec = dict(docs[("Run", "review-demo")]["spec"])
    run_spec.update(run_patch or {})
    run = RunInput("review-demo", NAMESPACE, RUN_UID, RunSpec.model_validate(run_spec))
    flow = {f.path: f.content or "" for f in ws.flow_data}
    rendered = render_bundle(
        run=run,
        target_kind="Topology",
        target="review-pipeline",
        topologies=[topo],
        agents=agents,
        skills=list(skills.values()),
        workspace=PinnedWorkspace("default", ws, "ws-default-abcdef12"),
        config=config,
        flow_data=flow,
    )
    return run, rendered


__all__ = ["NAMESPACE", "RUN_UID", "SkillSpec", "example_bundle", "examples", "pinned_skill"]
