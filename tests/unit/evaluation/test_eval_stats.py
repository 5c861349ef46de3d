"""The EvalRun's statistics against published worked examples and exact arithmetic.

Wilson intervals: Newcombe (1998), "Two-sided confidence intervals for the single
proportion: comparison of seven methods", Statistics in Medicine 17:857-872, Table I,
method 3 (score interval without continuity correction), printed to 4 decimals.
"""

from __future__ import annotations

import math

import pytest

from swarmkit_operator.builders import eval_stats as stats


@pytest.mark.parametrize(
    ("passed", "n", "low", "high"),
    [
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0000, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombes_table(passed: int, n: int, low: float, high: float) -> None:
    got = stats.wilson(passed, n)
    assert round(got[0], 4) == low
    assert round(got[1], 4) == high


def test_wilson_is_symmetric_and_bounded() -> None:
    low, high = stats.wilson(3, 10)
    mirror = stats.wilson(7, 10)
    assert math.isclose(low, 1 - mirror[1]) and math.isclose(high, 1 - mirror[0])
    assert stats.wilson(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        stats.wilson(1, 0)
    with pytest.raises(ValueError):
        stats.wilson(11, 10)


def test_exact_mcnemar_is_the_two_sided_binomial_sign_test() -> None:
    # 1 regressed, 9 fixed: 2 * P(X <= 1 | n=10, p=1/2) = 2 * 11/1024.
    assert math.isclose(stats.mcnemar_exact(1, 9), 22 / 1024)
    assert math.isclose(stats.mcnemar_exact(9, 1), 22 / 1024)
    assert math.isclose(stats.mcnemar_exact(0, 5), 2 / 32)
    assert stats.mcnemar_exact(3, 3) == 1.0  # capped
    assert stats.mcnemar_exact(0, 0) == 1.0


def test_percentile_interpolates_like_numpy() -> None:
    assert stats.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert stats.percentile([1.0, 2.0, 3.0, 4.0], 0) == 1.0
    assert stats.percentile([1.0, 2.0, 3.0, 4.0], 100) == 4.0
    assert math.isclose(stats.percentile([0.0, 10.0], 95), 9.5)


def test_paired_bootstrap_is_reproducible_with_its_seed() -> None:
    diffs = [1.0, 0.0, 0.0, -1.0, 1.0, 1.0, 0.0, 0.0]
    first = stats.paired_bootstrap(diffs, seed=7)
    assert stats.paired_bootstrap(diffs, seed=7) == first
    low, high = first
    assert low <= sum(diffs) / len(diffs) <= high
    assert -1.0 <= low < high <= 1.0


def test_paired_bootstrap_of_constant_differences_is_a_point() -> None:
    assert stats.paired_bootstrap([0.25] * 6, seed=1) == (0.25, 0.25)


def test_paired_bootstrap_stays_on_the_side_of_one_signed_differences() -> None:
    # Only improvements: no resample can have a negative mean.
    low, high = stats.paired_bootstrap([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], seed=0)
    assert low == 0.0 and high > 0.0
    # Four of six regressed: the whole interval is below zero.
    low, high = stats.paired_bootstrap([-1.0, -1.0, -1.0, -1.0, 0.0, 0.0], seed=0)
    assert high < 0.0


def test_weights_pull_the_mean() -> None:
    assert stats.weighted_mean([1.0, 0.0], [3.0, 1.0]) == 0.75
    _low, high = stats.paired_bootstrap([1.0, 0.0], [1.0, 0.0000001], seed=3)
    assert high == pytest.approx(1.0)
