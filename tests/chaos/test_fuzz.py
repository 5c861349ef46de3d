"""Property-based fuzzing of every kind at full size (issue 47 item 6): the integration
suite's profile (``tests/integration/test_fuzz_kinds.py``) with many more generated specs
per kind, all left in place while the next kind is fuzzed, against one operator watching
the poison namespace and the canary's.

Specs come from each CRD's own OpenAPI schema (:mod:`tests.support.crd_strategies`), some
with one hostile edit (a wrong type, a value nested 70-400 levels, a 300,000-character
string, a 5,000-item list, a 2,000-key object); each is refused at admission naming a field
or gets its condition within seconds, while a canary Skill in the other namespace is Ready
within its usual time and the operator logs no traceback loop. Cases per kind and the time
each took are recorded in ``bench/results/chaos.json`` (``fuzz_*``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swarmkit_devcluster.cluster import LocalCluster
from swarmkit_devcluster.testing import Kube, temp_namespace
from tests.support.crd_strategies import kinds
from tests.support.fuzzing import fuzz_kind

from .support import LEDGER, ChaosOperator, record, size

#: Generated specs per kind (``make test``: reduced; ``make chaos``: full).
EXAMPLES = size(8, 60)
RESULTS: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="module")
def namespaces(kept_namespaces: contextlib.ExitStack, kube: Kube) -> tuple[str, str]:
    poison = kept_namespaces.enter_context(temp_namespace(kube, "fuzz"))
    canary = kept_namespaces.enter_context(temp_namespace(kube, "fuzz-canary"))
    LEDGER.namespaces.extend([poison, canary])
    return poison, canary


@pytest.fixture(scope="module")
def operator(
    cluster: LocalCluster, crds: Any, namespaces: tuple[str, str]
) -> Iterator[ChaosOperator]:
    op = ChaosOperator(cluster.kubeconfig, {"watchNamespaces": list(namespaces)})
    op.start()
    started = time.monotonic()
    yield op
    record("fuzz_seconds", round(time.monotonic() - started, 1))
    record("fuzz_cases_per_kind", RESULTS)
    op.stop()


@pytest.mark.parametrize("kind", sorted(kinds()))
def test_every_generated_spec_is_refused_or_conditioned_and_others_go_on(
    kube: Kube, operator: ChaosOperator, namespaces: tuple[str, str], kind: str
) -> None:
    result = fuzz_kind(kube, kind, namespaces, EXAMPLES, Path(operator.log_path), operator.tail)
    assert result.cases == EXAMPLES
    assert operator.alive(), operator.tail()
    RESULTS[kind] = {
        "cases": result.cases,
        "admitted": len(result.admitted),
        "refused": sum(result.refused.values()),
        "refused_fields": len(result.refused),
        "seconds": round(result.seconds, 1),
        "canary_seconds": round(result.canary_seconds, 2),
    }
