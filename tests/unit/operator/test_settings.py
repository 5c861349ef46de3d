"""Settings are parsed once, at start-up, in one module (``swarmkit_operator/config.py``).

The lint half reads the product's source: no module outside the settings module reads the
process environment (``os.environ``, ``os.getenv``, ``os.environb``), apart from an
allow-list whose every entry says why it must stay; and no operator module reads it at
import time. The other half checks that what the environment says reaches the settings.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from swarmkit_operator.config import (
    ConfigError,
    LeaderElection,
    OperatorConfig,
    settings_from,
)
from swarmkit_operator.runtime import lease_settings

ROOT = Path(__file__).resolve().parents[3]
PRODUCT = (
    ROOT / "operator" / "swarmkit_operator",
    ROOT / "operator" / "swarmkit_api",
    ROOT / "operator" / "swarmkit_cli",
    ROOT / "runtime_image" / "swarmkit_runner",
)
SETTINGS_MODULE = "operator/swarmkit_operator/config.py"

#: Files (or whole packages, ending in "/") that may read the environment, and why.
ALLOWED = {
    "runtime_image/swarmkit_runner/": "the runner inside the pod: its configuration is the "
    "pod's environment, which the operator's builders write (one process per Job)",
    "operator/swarmkit_cli/": "the kubectl plugin runs in a user's shell: KUBECONFIG and its "
    "own switches are read once per invocation, like kubectl's",
    "operator/swarmkit_operator/k8s/client.py": "client-go's loading rules (KUBECONFIG, the "
    "kubelet-injected KUBERNETES_SERVICE_HOST/PORT), read by configure() at start-up, as "
    "every Kubernetes client does",
    "operator/swarmkit_operator/egress.py": "the kubelet-injected apiserver Service address "
    "(constant for the pod's life) for the egress policy; owned by the workload pipeline "
    "(issue 37 item 1), to move into Settings with it",
}


def _allowed(rel: str) -> bool:
    return rel == SETTINGS_MODULE or any(
        rel == entry or (entry.endswith("/") and rel.startswith(entry)) for entry in ALLOWED
    )


def _environment_reads(tree: ast.AST) -> list[tuple[int, bool]]:
    """(line, at module level) of every read of the process environment in ``tree``."""
    found: list[tuple[int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in ("environ", "getenv", "environb", "putenv")
        ):
            found.append((node.lineno, not in_function))
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in ("environ", "getenv", "environb") for a in node.names)
        ):
            found.append((node.lineno, not in_function))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return found


def _sources() -> list[tuple[str, ast.AST]]:
    out = []
    for package in PRODUCT:
        for path in sorted(package.rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            out.append((rel, ast.parse(path.read_text(), filename=rel)))
    return out


def test_only_the_settings_module_reads_the_environment() -> None:
    offenders = [
        f"{rel}:{line}"
        for rel, tree in _sources()
        if not _allowed(rel)
        for line, _ in _environment_reads(tree)
    ]
    assert offenders == [], (
        "configuration comes from swarmkit_operator.config.Settings (parsed once at start-up, "
        "passed to constructors), not from os.environ; add a reason to ALLOWED only for what "
        f"cannot: {offenders}"
    )


def test_no_operator_module_reads_the_environment_at_import_time() -> None:
    offenders = [
        f"{rel}:{line}"
        for rel, tree in _sources()
        if rel.startswith("operator/swarmkit_operator/")
        for line, module_level in _environment_reads(tree)
        if module_level
    ]
    assert offenders == []


def test_the_lint_finds_what_it_looks_for() -> None:
    """The scan is not vacuous: each way of reading the environment is found."""
    source = (
        "import os\nfrom os import getenv\nX = os.environ.get('A')\n"
        "def f():\n    return os.getenv('B')\n"
    )
    assert _environment_reads(ast.parse(source)) == [(2, True), (3, True), (5, False)]
    # The settings module is where it happens (and the allow-list has no stale entries).
    config = ROOT / SETTINGS_MODULE
    assert _environment_reads(ast.parse(config.read_text()))
    for entry in ALLOWED:
        assert (ROOT / entry).exists(), entry


def test_the_environment_reaches_the_settings() -> None:
    env = {
        "SWARMKIT_WORKERS": "3",
        "SWARMKIT_GC_GRACE_SECONDS": "1.5",
        "SWARMKIT_SCHEDULE_INTERVAL_SECONDS": "1",
        "SWARMKIT_POD_START_GRACE_SECONDS": "4",
        "SWARMKIT_RUNS_TRACE": "1",
        "SWARMKIT_WEBHOOK_MAX_ATTEMPTS": "2",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "POD_NAME": "operator-0",
        "POD_NAMESPACE": "swarmkit-system",
    }
    settings = settings_from(env, OperatorConfig(watch_namespaces=("team-a",)))
    assert settings.workers == 3 and settings.gc_grace_seconds == 1.5
    assert settings.runs.schedule_interval == 1.0
    assert settings.runs.pod_start_grace_seconds == 4.0 and settings.runs.trace
    assert settings.runs.webhook_max_attempts == 2
    assert dict(settings.runs.otel) == {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert settings.namespaces == ("team-a",)  # the file's, unless the command line names some
    assert settings.instance == "operator-0"
    assert lease_settings(settings) is None  # no leader election unless asked for
    lease = lease_settings(
        settings_from(env, OperatorConfig(), leader=LeaderElection(enabled=True))
    )
    assert lease is not None and lease.namespace == "swarmkit-system"
    assert lease.identity.startswith("operator-0_")


def test_a_bad_number_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"\$SWARMKIT_RESYNC_SECONDS: expected a number"):
        settings_from({"SWARMKIT_RESYNC_SECONDS": "often"}, OperatorConfig())
    with pytest.raises(ValueError, match="renew deadline"):
        lease_settings(
            settings_from(
                {}, OperatorConfig(), leader=LeaderElection(enabled=True, renew_deadline=1.0)
            )
        )
