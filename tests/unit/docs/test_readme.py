"""The README stays short and true: every command in it is one the project checks or runs.

Each line of the README's ``sh`` blocks must be recognized by a checker below, and pass it:
``make T`` names a Makefile target; ``kubectl swarmkit ...`` parses with the plugin's own
parser; ``helm install`` installs the chart the Helm integration test installs; ``kubectl
apply -f`` applies manifests the models accept; ``kubectl get`` names a kind or the
category of our CRDs. A new kind of command needs a checker here first.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from swarmkit_api.resources import CATEGORY, KINDS
from swarmkit_cli import main as cli_main
from swarmkit_cli.plugin import UsageError

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
MAKEFILE = (REPO / "Makefile").read_text()


def _commands() -> list[list[str]]:
    text = README.read_text()
    blocks = re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    return [shlex.split(line, comments=True) for b in blocks for line in b.splitlines() if line]


def _check_make(argv: list[str]) -> None:
    for target in argv[1:]:
        assert re.search(rf"^{re.escape(target)}:", MAKEFILE, re.MULTILINE), (
            f"README runs `make {target}`, which the Makefile does not define"
        )


def _check_plugin(argv: list[str]) -> None:
    _found, rest = cli_main.split_globals(argv[2:])
    cli_main.build_parser().parse_args(rest)  # UsageError on a usage error


def _check_helm(argv: list[str]) -> None:
    assert argv[1] == "install", argv
    chart = REPO / argv[3]
    assert (chart / "Chart.yaml").is_file(), f"no chart at {argv[3]}"
    helm_test = (REPO / "tests/integration/test_helm_install.py").read_text()
    assert chart.name in helm_test, "the Helm install test does not install this chart"


def _check_kubectl(argv: list[str]) -> None:
    kinds = {k.plural for k in KINDS} | {k.kind.lower() for k in KINDS} | {CATEGORY}
    if argv[1] == "apply":
        path = REPO / argv[argv.index("-f") + 1]
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        assert files, f"nothing to apply under {path}"
        by_kind = {k.kind: k for k in KINDS}
        for file in files:
            for doc in yaml.safe_load_all(file.read_text()):
                info = by_kind[doc["kind"]]
                info.spec.model_validate(doc["spec"])  # what admission would accept
    elif argv[1] == "get":
        assert argv[2] in kinds, f"`kubectl get {argv[2]}` names none of our kinds"
    else:
        pytest.fail(f"no checker for `{shlex.join(argv)}`")


def test_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 200


def test_every_readme_command_is_checked() -> None:
    commands = _commands()
    assert ["make", "demo"] in commands and ["make", "test"] in commands
    for argv in commands:
        if argv[0] == "make":
            _check_make(argv)
        elif argv[:2] == ["kubectl", "swarmkit"]:
            _check_plugin(argv)
        elif argv[0] == "helm":
            _check_helm(argv)
        elif argv[0] == "kubectl":
            _check_kubectl(argv)
        else:
            pytest.fail(f"README command with no checker: {shlex.join(argv)}")


def test_a_bad_command_would_fail() -> None:
    with pytest.raises(AssertionError):
        _check_make(["make", "no-such-target"])
    with pytest.raises(UsageError, match="invalid choice: 'frobnicate'"):
        _check_plugin(["kubectl", "swarmkit", "review", "frobnicate"])
    with pytest.raises(AssertionError):
        _check_kubectl(["kubectl", "get", "widgets"])


def test_every_readme_link_resolves() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        assert (REPO / target).exists(), f"README links to {target}, which does not exist"
