"""The CLI never prints a traceback (issue 47 item 7): every wrong argument or environment
gets ONE line on stderr and exit 2 (usage) or 1 (runtime). Each case runs the installed
``kubectl-swarmkit`` as a subprocess, as a user would; no case needs a cluster (an API
server that refuses connections stands for one that is down)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXE = Path(sys.executable).parent / "kubectl-swarmkit"
SKILL_MD = "---\nname: s\ndescription: Use when testing.\n---\nbody\n"
DOWN_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""

# (argv, exit code, a phrase of the one line); {d} is the case's own directory.
CASES = [
    (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    ([], 2, "the following arguments are required: COMMAND"),
    (["pin"], 2, "the following arguments are required"),
    (["pin", "skill/"], 2, "'' is not a Skill name"),
    (["pin", "skill/a/b"], 2, "'a/b' is not a Skill name"),
    (["status", "-o", "yaml"], 2, "invalid choice: 'yaml'"),
    (["-n"], 2, "expected one argument"),
    (["import"], 2, "the following arguments are required: PATH"),
    (["import", "{d}/skills", "--workspace", "Bad_Name"], 2, "must be lowercase-kebab"),
    (["review", "approve"], 2, "needs the Review's name"),
    (["logs", "run/"], 2, "missing the Run's name"),
    (["import", "{d}/nope"], 1, "no such file or directory"),
    (["import", "{d}/skills", "-o", "{d}/a-file/out"], 1, "a-file/out: Not a directory"),
    (["import", "{d}/skills", "-o", "/proc/no-such-dir/out"], 1, "No such file or directory"),
    (["status", "--kubeconfig", "{d}/nope.yaml"], 1, "not found"),
    (["status", "--kubeconfig", "{d}/bad.yaml"], 1, "kubeconfig"),
    (["status", "--kubeconfig", "{d}/down.yaml"], 1, "cannot reach the Kubernetes API"),
    (["pin", "s", "--kubeconfig", "{d}/down.yaml"], 1, "cannot reach the Kubernetes API"),
    (["logs", "run/x", "--kubeconfig", "{d}/down.yaml"], 1, "cannot reach the Kubernetes"),
    (["inbox", "--kubeconfig", "{d}/down.yaml"], 1, "cannot reach the Kubernetes API"),
    (["status", "--kubeconfig", "{d}/down.yaml", "--context", "nope"], 1, "'nope' not found"),
]


@pytest.fixture(scope="module")
def case_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    (d / "skills/s").mkdir(parents=True)
    (d / "skills/s/SKILL.md").write_text(SKILL_MD)
    (d / "a-file").write_text("not a directory")
    (d / "bad.yaml").write_text("a: [unclosed\n")
    (d / "down.yaml").write_text(DOWN_KUBECONFIG)
    return d


@pytest.mark.parametrize(("argv", "code", "phrase"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_bad_invocation_is_one_line_and_an_exit_code(
    case_dir: Path, argv: list[str], code: int, phrase: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    env |= {"HOME": str(case_dir), "NO_COLOR": "1"}  # no ~/.kube/config of the machine
    proc = subprocess.run(
        [str(EXE), *(a.replace("{d}", str(case_dir)) for a in argv)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=case_dir,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines
    assert phrase in lines[0], lines
    assert proc.returncode == code, (proc.returncode, lines)
