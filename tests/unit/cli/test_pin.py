"""``pin SKILL_DIR``: the Helm values snippet approving a skill's scripts."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import yaml

from swarmkit_codegen.chart_values import SecurityValues

from .support import INCIDENT_TRIAGE, run_cli


def test_pin_prints_skill_path_and_sha256_of_each_script() -> None:
    result = run_cli("pin", str(INCIDENT_TRIAGE))
    assert result.code == 0, result.err
    values = yaml.safe_load(result.out)
    script = INCIDENT_TRIAGE / "scripts" / "classify_severity.py"
    assert values == {
        "config": {
            "security": {
                "skills": {
                    "allowScriptExecution": True,
                    "allowed": [
                        {
                            "skill": "incident-triage",
                            "path": "scripts/classify_severity.py",
                            "sha256": hashlib.sha256(script.read_bytes()).hexdigest(),
                        }
                    ],
                }
            }
        }
    }


def test_pin_output_is_valid_chart_values() -> None:
    result = run_cli("pin", str(INCIDENT_TRIAGE), "-n", "team-a", "--with-namespace")
    values = yaml.safe_load(result.out)
    parsed = SecurityValues.model_validate(values["config"]["security"])
    (entry,) = parsed.skills.allowed
    assert entry.namespace == "team-a"


def test_pin_counts_executable_files_outside_scripts_as_scripts(tmp_path: Path) -> None:
    skill = tmp_path / "incident-triage"
    shutil.copytree(INCIDENT_TRIAGE, skill)
    tool = skill / "bin" / "collect.sh"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    result = run_cli("pin", str(skill))
    paths = [
        e["path"] for e in yaml.safe_load(result.out)["config"]["security"]["skills"]["allowed"]
    ]
    assert paths == ["bin/collect.sh", "scripts/classify_severity.py"]


def test_pin_of_a_skill_without_scripts_is_exit_1(tmp_path: Path) -> None:
    (tmp_path / "SKILL.md").write_text("---\nname: x\ndescription: y\n---\nbody\n")
    result = run_cli("pin", str(tmp_path))
    assert result.code == 1
    assert "no scripts to pin" in result.err
    assert result.out == ""


def test_pin_a_changed_script_changes_its_pin(tmp_path: Path) -> None:
    skill = tmp_path / "incident-triage"
    shutil.copytree(INCIDENT_TRIAGE, skill)
    before = run_cli("pin", str(skill)).out
    (skill / "scripts" / "classify_severity.py").write_text("print('Sev1')\n")
    after = run_cli("pin", str(skill)).out
    assert before != after
    assert hashlib.sha256(b"print('Sev1')\n").hexdigest() in after
