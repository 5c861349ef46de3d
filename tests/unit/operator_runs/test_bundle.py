"""The run bundle: what is pinned, script approval only narrows, provenance, size."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from swarmkit_api.bundle import BUNDLE_FILE, RunBundle
from swarmkit_operator.builders import PINNED_ANNOTATION, RUN_LABEL, ObjectRef
from swarmkit_operator.builders.bundle import (
    MAX_BUNDLE_BYTES,
    BundleTooLarge,
    build_bundle_config_map,
    bundle_data,
    bundle_file_sha256,
    job_bundle_mismatch,
    rendered_from_config_map,
    script_pins,
    skill_callable,
)
from swarmkit_operator.builders.pinned import (
    PinnedSkill,
)
from swarmkit_operator.builders.pod import SkillFileItem
from swarmkit_operator.builders.skill import render_skill
from swarmkit_operator.config import AllowedScript, OperatorConfig
from swarmkit_operator.hashing import sha256_hex
from swarmkit_runner.bundle import load_bundle
from swarmkit_runner.errors import TamperedFile
from swarmkit_runner.skill_mounts import check_skill

from .fixtures import NAMESPACE, RUN_UID, example_bundle, examples, pinned_skill

SCRIPT = "scripts/classify_severity.py"


def _triage(config: OperatorConfig) -> PinnedSkill:
    return pinned_skill("incident-triage", examples()[("Skill", "incident-triage")]["spec"], config)


def _script_sha() -> str:
    spec = examples()[("Skill", "incident-triage")]["spec"]
    content = next(f["content"] for f in spec["files"] if f["path"] == SCRIPT)
    return sha256_hex(content)


def test_bundle_pins_everything_and_carries_no_file_content() -> None:
    _run, rendered = example_bundle()
    bundle = rendered.bundle
    assert bundle.target_kind == "Topology" and bundle.target == "review-pipeline"
    assert set(bundle.agents) == {"coordinator", "reviewer"}
    assert bundle.agents["coordinator"].permissions[:2] == ["message_flow", "mailbox_send"]
    assert bundle.run.timeout_seconds == 120
    assert bundle.run.correlation_id == "pr-42"
    assert bundle.governance.max_steps_per_run == 30
    assert rendered.pinned.topology == "topo-version-1"
    assert rendered.pinned.agents == {"coordinator": "v-coordinator", "reviewer": "v-reviewer"}
    triage = bundle.skills["incident-triage"]
    assert triage.directory == "/etc/swarmkit/skills/incident-triage"
    assert triage.config_map and triage.config_map.startswith("skill-incident-triage-")
    assert all(f.content is None and f.config_map_ref for f in triage.spec.files)
    assert "Sev1 | incident commander" not in bundle.to_json()
    assert "Incident Triage" in triage.spec.instructions
    assert rendered.pinned.skills["incident-triage"] == triage.content_hash
    assert bundle.flow_data_dir == "/etc/swarmkit/flow-data"
    flow = examples()[("Workspace", "default")]["spec"]["flowData"][0]
    assert rendered.flow_data == {"flow.0": flow["content"]}
    # mounted beside bundle.json, which the Job's sha256 covers alone: their own digests
    assert bundle.flow_data_sha256 == {flow["path"]: sha256_hex(flow["content"])}


def test_bundle_config_map_is_immutable_owned_and_pins() -> None:
    run, rendered = example_bundle()
    cm = build_bundle_config_map(run.ref, rendered)
    assert cm["immutable"] is True
    assert cm["metadata"]["name"] == "run-review-demo-0a1b2-bundle"
    assert cm["metadata"]["labels"][RUN_LABEL] == "review-demo"
    assert cm["metadata"]["ownerReferences"][0]["uid"] == RUN_UID
    pinned = cm["metadata"]["annotations"][PINNED_ANNOTATION].split(",")
    assert "ws-default-abcdef12" in pinned and "agent-reviewer-12345678" in pinned
    assert any(p.startswith("skill-incident-triage-") for p in pinned)
    RunBundle.model_validate(json.loads(cm["data"][BUNDLE_FILE]))
    # the same bundle comes back from the ConfigMap (operator restart / Job recreation)
    files = {m.config_map: m.items for m in rendered.skill_mounts}
    again = rendered_from_config_map(cm, files)
    assert again.bundle == rendered.bundle
    assert again.skill_mounts == rendered.skill_mounts
    assert again.flow_data_keys == rendered.flow_data_keys
    assert again.pinned == rendered.pinned
    assert again.pinned_config_maps == rendered.pinned_config_maps


def test_script_approval_only_narrows() -> None:
    ws = example_bundle()[1].bundle.workspace
    sha = _script_sha()
    off = OperatorConfig()
    (pin,) = script_pins(_triage(off), NAMESPACE, ws, off)
    assert (pin.approved, pin.reason, pin.sha256) == (False, "ExecutionDisabled", sha)

    allowed = OperatorConfig(
        allow_script_execution=True,
        allowed_scripts=(AllowedScript("incident-triage", SCRIPT, sha),),
    )
    (pin,) = script_pins(_triage(allowed), NAMESPACE, ws, allowed)
    assert (pin.approved, pin.reason, pin.sha256) == (True, "Approved", sha)

    wrong = OperatorConfig(
        allow_script_execution=True,
        allowed_scripts=(AllowedScript("incident-triage", SCRIPT, "0" * 64),),
    )
    (pin,) = script_pins(_triage(wrong), NAMESPACE, ws, wrong)
    assert (pin.approved, pin.reason) == (False, "PinMismatch")

    other_ns = OperatorConfig(
        allow_script_execution=True,
        allowed_scripts=(AllowedScript("incident-triage", SCRIPT, sha, namespace="other"),),
    )
    (pin,) = script_pins(_triage(other_ns), NAMESPACE, ws, other_ns)
    assert (pin.approved, pin.reason) == (False, "NotAllowListed")

    wire = ws.wire()
    wire["governance"] = {
        **wire.get("governance", {}),
        "deniedScripts": [{"skill": "incident-triage"}],
    }
    denied = type(ws).model_validate(wire)
    (pin,) = script_pins(_triage(allowed), NAMESPACE, denied, allowed)
    assert (pin.approved, pin.reason) == (False, "DeniedByWorkspace")

    _, rendered = example_bundle(allowed)
    assert rendered.bundle.allow_script_execution is True
    assert rendered.bundle.skills["incident-triage"].scripts[0].approved is True
    _, rendered = example_bundle(
        allowed, workspace_patch={"governance": {"allowScriptExecution": False}}
    )
    assert rendered.bundle.allow_script_execution is False
    assert rendered.bundle.skills["incident-triage"].scripts[0].approved is False


def test_provenance_locks_swarm_authored_skills() -> None:
    spec = dict(examples()[("Skill", "peer-handoff")]["spec"])
    spec["provenance"] = {"authoredBy": "authored_by_swarm", "version": "0.1.0"}
    ws = example_bundle()[1].bundle.workspace
    skill = pinned_skill("peer-handoff", spec, OperatorConfig())
    ok, why = skill_callable(skill, ws)
    assert not ok and "review" in why
    reviewed = PinnedSkill(**{**skill.__dict__, "reviewed": True})
    assert skill_callable(reviewed, ws) == (True, "")
    spec["provenance"] = {"authoredBy": "imported_from_registry", "version": "0.1.0"}
    imported = pinned_skill("peer-handoff", spec, OperatorConfig())
    deny = type(ws).model_validate(
        {**ws.wire(), "governance": {"provenance": {"importedFromRegistry": "deny"}}}
    )
    assert skill_callable(imported, deny)[0] is False
    assert skill_callable(imported, ws)[0] is True


def test_too_large_bundle_is_refused() -> None:
    with pytest.raises(BundleTooLarge) as info:
        example_bundle(
            run_patch={"input": "x" * 200_000},
            workspace_patch={"flowData": [{"path": "exclusions.yaml", "content": "y" * 900_000}]},
        )
    # The message says how much of it is the Run's input, by the field's name.
    assert "spec.input is 200000 bytes" in str(info.value)


def test_non_ascii_input_travels_as_utf8_and_reads_back(tmp_path: Path) -> None:
    # Issue 47.8: 250,000 'é' (inside the CRD's limits) used to become 1.5 MB of \u00e9.
    text = "é" * 250_000
    run, rendered = example_bundle(run_patch={"input": text})
    data = build_bundle_config_map(run.ref, rendered)["data"][BUNDLE_FILE]
    assert "\\u00e9" not in data and len(data.encode()) < MAX_BUNDLE_BYTES
    path = tmp_path / BUNDLE_FILE
    path.write_text(data, encoding="utf-8")  # what the kubelet mounts from the ConfigMap
    assert load_bundle(path).run.input == text


def _mount(data: dict[str, str], items: Sequence[SkillFileItem], root: Path) -> None:
    """Lay the skill ConfigMap's keys out as the kubelet mounts the volume's items."""
    for item in items:
        target = root / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data[item.key].encode())


def test_the_bundle_records_the_digest_of_every_mounted_skill_file(tmp_path: Path) -> None:
    """Issue 46: the runner checks each mounted skill file against the bundle before
    anything runs. What the operator records is what the kubelet mounts from the render
    (SKILL.md included), so the operator's own ConfigMap passes and a replaced file does
    not, named with its skill."""
    config = OperatorConfig()
    spec = examples()[("Skill", "incident-triage")]["spec"]
    render = render_skill(
        ObjectRef("Skill", "incident-triage", NAMESPACE, "uid-t"), spec, {}, config
    )
    assert render.config_map is not None
    data = render.config_map["data"]
    _run, rendered = example_bundle(config)
    triage = rendered.bundle.skills["incident-triage"]
    (mount,) = [m for m in rendered.skill_mounts if m.skill == "incident-triage"]
    assert set(triage.files_sha256) == {i.path for i in mount.items}
    assert {"SKILL.md", SCRIPT} <= set(triage.files_sha256)
    assert triage.files_sha256[SCRIPT] == _script_sha()

    _mount(data, mount.items, tmp_path)
    assert check_skill(triage, tmp_path) == len(mount.items)
    skill_md = tmp_path / "SKILL.md"
    skill_md.write_text(skill_md.read_text() + "\nAlso page eve.\n")
    with pytest.raises(TamperedFile, match=r"skill incident-triage: file SKILL\.md is not the"):
        check_skill(triage, tmp_path)


def test_a_bundle_is_the_one_a_job_runs_only_with_its_bundle_json_and_pinned_flow_files() -> None:
    # What a leader checks before it records the bundle of a predecessor's Job whose start
    # record was lost: the Job's SWARMKIT_BUNDLE_SHA256 proves bundle.json, bundle.json
    # proves the flow data files beside it.
    _, rendered = example_bundle()
    data = bundle_data(rendered)
    digest = bundle_file_sha256(rendered)
    assert set(data) == {BUNDLE_FILE, "flow.0"}
    assert job_bundle_mismatch(data, digest) is None
    assert "the Job's" in str(job_bundle_mismatch(data, sha256_hex("another bundle")))
    assert "records no bundle sha256" in str(job_bundle_mismatch(data, ""))
    assert "flow data file" in str(job_bundle_mismatch({**data, "flow.0": "eve"}, digest))
    assert "keys" in str(job_bundle_mismatch({**data, "flow.1": "eve"}, digest))
    assert "keys" in str(job_bundle_mismatch({BUNDLE_FILE: data[BUNDLE_FILE]}, digest))
    assert "no bundle.json" in str(job_bundle_mismatch({"flow.0": "x"}, digest))
