"""The operator/runner contract: the bundle the operator renders for the repository's
examples, mounted the way the Job mounts it, runs with the Job's own arguments."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from swarmkit_api.bundle import BUNDLE_FILE, BUNDLE_MOUNT
from swarmkit_devcluster.testing import run_with_mounts
from swarmkit_operator.builders import ObjectRef
from swarmkit_operator.builders.job import FLOW_DATA_MOUNT
from swarmkit_operator.builders.skill import render_skill
from swarmkit_operator.config import OperatorConfig
from tests.support.runner import parse_audit, runner_env
from tests.unit.operator_runs.fixtures import NAMESPACE, example_bundle, examples


def mount_like_the_job(root: Path) -> None:
    """Materialize bundle, skill ConfigMaps (with their items) and flow data under ``root``."""
    _, rendered = example_bundle()
    bundle_dir = root / BUNDLE_MOUNT.lstrip("/")
    bundle_dir.mkdir(parents=True)
    (bundle_dir / BUNDLE_FILE).write_text(rendered.bundle.to_json())
    config = OperatorConfig()
    data_by_config_map: dict[str, dict[str, str]] = {}
    for (kind, name), doc in examples().items():
        if kind == "Skill":
            ref = ObjectRef("Skill", name, NAMESPACE, f"uid-{name}")
            cm = render_skill(ref, doc["spec"], {}, config).config_map
            assert cm is not None
            data_by_config_map[cm["metadata"]["name"]] = cm["data"]
    for mount in rendered.skill_mounts:
        directory = root / mount.directory.lstrip("/")
        for item in mount.items:
            target = directory / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(data_by_config_map[mount.config_map][item.key])
    flow_dir = root / FLOW_DATA_MOUNT.lstrip("/")
    for key, path in rendered.flow_data_keys.items():
        (flow_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (flow_dir / path).write_text(rendered.flow_data[key])
    (root / "scratch").mkdir()
    (root / "dev").mkdir()


def test_the_operators_example_bundle_runs_with_the_jobs_arguments(tmp_path: Path) -> None:
    files = tmp_path / "files"
    mount_like_the_job(files)
    (files / "dev/termination-log").touch()
    work = tmp_path / "ns"
    work.mkdir()
    proc = run_with_mounts(  # each tree at its real path, as the Job's pod mounts them
        [sys.executable, "-m", "swarmkit_runner", "run", "--bundle", BUNDLE_MOUNT],
        {
            str(files / "etc/swarmkit"): "/etc/swarmkit",
            str(files / "scratch"): "/scratch",
            str(files / "dev/termination-log"): "/dev/termination-log",
        },
        work_dir=work,
        env=runner_env({}),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((files / "dev/termination-log").read_text())
    assert result["outcome"] == "Succeeded"
    assert "verdict is pass" in result["output"]
    audit = parse_audit(proc.stdout)
    loads = [e for e in audit if e["event"] == "skill.load"]
    assert [e["skill"] for e in loads] == ["incident-triage"]
    loaded = next(e for e in audit if e["event"] == "tool.call" and e["tool"] == "load_skill")
    assert "reference/escalation-matrix.md" in loaded["output"]
    delegated = next(e for e in audit if e.get("tool") == "delegate_to_reviewer")
    assert delegated["output"]["verdict"] == "pass"
