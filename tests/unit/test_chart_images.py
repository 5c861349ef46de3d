"""operator/Dockerfile: what can be checked without Docker.

Static: multi-stage, both bases pinned by digest, the final stage is distroless with no
RUN (no shell, package manager or compiler), non-root with the uid the chart runs it as,
the ports the chart probes, and the entry point the process node maps the image to.
Dynamic: the Dockerfile's own install command, run in a clean target directory from a
build context holding only what the Dockerfile copies, gives a working
`python -m swarmkit_operator`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "operator" / "Dockerfile"
VALUES = yaml.safe_load((REPO / "charts" / "swarmkit-operator" / "values.yaml").read_text())


@dataclass
class Stage:
    base: str
    name: str = ""
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [arg for o, arg in self.instructions if o == op]


def parse() -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages of the Dockerfile (continuations joined)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "ARG" and not stages:
            key, _, default = rest.partition("=")
            args[key] = default
        elif op == "FROM":
            parts = rest.split()
            stages.append(Stage(parts[0], parts[2] if len(parts) > 2 else ""))
        else:
            stages[-1].instructions.append((op, rest))
    return args, stages


def test_multi_stage_with_both_bases_pinned_by_digest() -> None:
    args, stages = parse()
    assert [s.base for s in stages] == ["${BUILD_BASE}", "${RUN_BASE}"]
    assert stages[0].name == "build"
    digest = re.compile(r"^[\w./-]+:[\w.-]+@sha256:(REPLACE_WITH_DIGEST|[0-9a-f]{64})$")
    for name in ("BUILD_BASE", "RUN_BASE"):
        assert digest.match(args[name]), f"{name}={args[name]} is not pinned by digest"
    # Same CPython minor in both (the build stage's wheels and bytecode are cp311).
    assert "python:3.11-" in args["BUILD_BASE"]
    assert "python3-debian12" in args["RUN_BASE"]  # Debian 12's python3 is 3.11


def test_final_stage_is_minimal_non_root_and_matches_the_chart() -> None:
    _, stages = parse()
    final = stages[-1]
    assert final.all("RUN") == [], "the final stage must not run anything (no shell in it)"
    assert final.all("COPY") == ["--from=build /opt/swarmkit /opt/swarmkit"]
    (user,) = final.all("USER")
    uid, gid = (int(x) for x in user.split(":"))
    assert uid != 0 and gid != 0
    assert uid == VALUES["podSecurityContext"]["runAsUser"]
    assert gid == VALUES["podSecurityContext"]["runAsGroup"]
    (expose,) = final.all("EXPOSE")
    assert {int(p) for p in expose.split()} == {VALUES["health"]["port"], VALUES["metrics"]["port"]}
    (entrypoint,) = final.all("ENTRYPOINT")
    assert yaml.safe_load(entrypoint) == ["/usr/bin/python3", "-m", "swarmkit_operator"]
    assert not final.all("CMD")  # the chart passes args; the process node keeps them too
    build_tools = ("apt-get", "apk ", "gcc", "build-essential", "curl", "wget")
    for op, arg in final.instructions:
        assert not any(tool in arg for tool in build_tools), (op, arg)


def _build_context(tmp: Path) -> Path:
    """A build context holding exactly what the build stage COPYs from the repository."""
    _, stages = parse()
    ctx = tmp / "context"
    for arg in stages[0].all("COPY"):
        *sources, _dest = arg.split()
        for src in sources:
            path = REPO / src.rstrip("/")
            target = ctx / src.rstrip("/")
            if path.is_dir():
                shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    return ctx


def _dockerfile_install_command() -> list[str]:
    _, stages = parse()
    (run,) = stages[0].all("RUN")
    pip = run.split("&&")[0].strip()
    assert pip.startswith("pip install --target /opt/swarmkit"), pip
    return shlex.split(pip)


def test_the_dockerfile_install_gives_a_working_entry_point(tmp_path: Path) -> None:
    ctx = _build_context(tmp_path)
    target = tmp_path / "opt-swarmkit"
    cmd = _dockerfile_install_command()
    cmd[cmd.index("/opt/swarmkit")] = str(target)
    # Dependencies come from this venv (they are wheels either way); the project itself is
    # built from the trimmed context exactly as in the image.
    cmd = [sys.executable, "-m", *cmd, "--no-deps"]
    res = subprocess.run(cmd, cwd=ctx, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    installed = sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info"))
    assert {"swarmkit_api", "swarmkit_operator"} <= set(installed)
    assert "swarmkit_runner" not in installed and "swarmkit_devcluster" not in installed
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = (
        "import swarmkit_operator, sys; "
        f"assert swarmkit_operator.__file__.startswith({str(target)!r}), swarmkit_operator.__file__"
    )
    subprocess.run([sys.executable, "-c", probe], env=env, check=True, timeout=60)
    res = subprocess.run(
        [sys.executable, "-m", "swarmkit_operator", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    # What the chart passes (templates/_helpers.tpl, swarmkit-operator.args).
    for flag in ("--liveness", "--metrics-port", "--leader-elect", "--log-format", "--verbose"):
        assert flag in res.stdout, f"`python -m swarmkit_operator --help` lacks {flag}"


@pytest.mark.parametrize("script", ["hack/kind-e2e.sh"])
def test_kind_e2e_script_is_valid_bash(script: str) -> None:
    path = REPO / script
    assert os.access(path, os.X_OK), f"{script} is not executable"
    subprocess.run(["bash", "-n", str(path)], check=True, timeout=30)


@pytest.mark.parametrize("dockerfile", ["operator/Dockerfile", "runtime_image/Dockerfile"])
def test_kind_e2e_passes_every_placeholder_base_of_the_dockerfiles(dockerfile: str) -> None:
    # A base left at its placeholder digest fails `docker build`: the script must resolve
    # and pass each such build-arg (it once looked for the operator's names in the runtime's).
    script = (REPO / "hack/kind-e2e.sh").read_text()
    placeholders = [
        line.split()[1].split("=", 1)[0]
        for line in (REPO / dockerfile).read_text().splitlines()
        if line.startswith("ARG ") and ("sha256:0000" in line or "REPLACE_WITH_DIGEST" in line)
    ]
    assert placeholders, f"{dockerfile}: no placeholder base found (test out of date?)"
    for name in placeholders:
        assert f'--build-arg "{name}=' in script, f"kind-e2e.sh does not pass {name}"
