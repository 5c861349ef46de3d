"""Property-based fuzzing of every kind against the real apiserver and operator, the small
profile (issue 47 item 6; ``tests/chaos/test_fuzz.py`` runs it at full size).

Specs come from each CRD's own OpenAPI schema (:mod:`tests.support.crd_strategies`), some
with one hostile edit; each is refused at admission naming a field or gets its condition
within seconds, while a canary Skill in another namespace is Ready in its usual time and
the operator logs no traceback loop (:func:`tests.support.fuzzing.fuzz_kind`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from swarmkit_devcluster.testing import Kube, temp_namespace
from tests.support.crd_strategies import kinds
from tests.support.fuzzing import fuzz_kind

from .runs_support import OperatorProcess

#: Generated specs per kind in this profile.
EXAMPLES = 4


@pytest.fixture(scope="module")
def canary_namespace(kube: Kube) -> Iterator[str]:
    with temp_namespace(kube, "fuzz-canary") as ns:
        yield ns


@pytest.mark.parametrize("kind", sorted(kinds()))
def test_a_generated_spec_is_refused_or_conditioned_and_others_go_on(
    kube: Kube, namespace: str, canary_namespace: str, operator: OperatorProcess, kind: str
) -> None:
    result = fuzz_kind(
        kube, kind, (namespace, canary_namespace), EXAMPLES, operator.log_path, operator.tail
    )
    assert result.cases == EXAMPLES
    print(
        f"{kind}: {result.cases} cases, {len(result.admitted)} admitted, refused "
        f"{result.refused}, {result.seconds:.1f} s, canary {result.canary_seconds:.1f} s"
    )
