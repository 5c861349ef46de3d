"""Statistics of an EvalRun (pure): intervals, the paired bootstrap, the exact sign test.

- :func:`wilson` — the Wilson score interval of a pass rate (95 %: z = 1.959964). Unlike
  the normal approximation it stays inside [0, 1] and is not degenerate at 0/n or n/n.
- :func:`paired_bootstrap` — the percentile interval of the weighted mean of per-case
  differences (candidate - baseline), resampling *cases* with replacement. The generator
  is ``random.Random(seed)`` (Mersenne Twister, whose ``random()`` sequence Python keeps
  stable across versions), so the same scores and seed give the same interval: a replayed
  EvalRun reproduces its numbers.
- :func:`mcnemar_exact` — the exact McNemar test: among the discordant cases (``b``
  regressed, ``c`` fixed) the two-sided binomial sign test with p = ½.
- :func:`percentile` — linear interpolation between closest ranks (numpy's default).
- :func:`cohen_kappa` — Cohen's (1960) kappa of two raters on a k-by-k table, with the
  large-sample standard error of Fleiss, Cohen & Everitt (1969) (the one Fleiss & Paik
  2003 give for an estimated kappa, not the null one) and kappa ± z·SE as its interval.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

#: The 97.5th percentile of the standard normal distribution (two-sided 95 %).
Z95 = 1.959963984540054
#: Bootstrap resamples: the percentile bounds move by well under 0.01 between seeds.
BOOTSTRAP_SAMPLES = 2000


def wilson(passed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``passed`` successes out of ``n`` (n ≥ 1)."""
    if n <= 0:
        raise ValueError("wilson: n must be at least 1")
    if not 0 <= passed <= n:
        raise ValueError("wilson: passed must be between 0 and n")
    p = passed / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # At 0/n and n/n the bound is exactly 0 or 1 (floating point leaves 1e-16 off).
    low = 0.0 if passed == 0 else max(0.0, centre - half)
    high = 1.0 if passed == n else min(1.0, centre + half)
    return low, high


def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    total = sum(weights)
    if total <= 0:
        raise ValueError("weights must sum to more than 0")
    return sum(v * w for v, w in zip(values, weights, strict=True)) / total


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of already sorted values, interpolated linearly."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    rank = (len(sorted_values) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def paired_bootstrap(
    differences: Sequence[float],
    weights: Sequence[float] | None = None,
    seed: int = 0,
    samples: int = BOOTSTRAP_SAMPLES,
) -> tuple[float, float]:
    """The 95 % percentile interval of the weighted mean difference, cases resampled."""
    n = len(differences)
    if n == 0:
        raise ValueError("paired_bootstrap: no pairs")
    w = list(weights) if weights is not None else [1.0] * n
    rng = random.Random(seed)
    means = []
    for _ in range(samples):
        # int(random() * n), not randrange: its algorithm is not promised across versions.
        picks = [int(rng.random() * n) for _ in range(n)]
        means.append(weighted_mean([differences[i] for i in picks], [w[i] for i in picks]))
    means.sort()
    return percentile(means, 2.5), percentile(means, 97.5)


def binomial_cdf(k: int, n: int) -> float:
    """P(X ≤ k) for X ~ Binomial(n, ½), exactly (integers until the one division)."""
    if k < 0:
        return 0.0
    return float(sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2**n)


def mcnemar_exact(regressed: int, fixed: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1.0 when none)."""
    n = regressed + fixed
    if n == 0:
        return 1.0
    return min(1.0, 2 * binomial_cdf(min(regressed, fixed), n))


@dataclass(frozen=True)
class Kappa:
    kappa: float
    standard_error: float
    low: float
    high: float
    observed: float  # p_o, the share of agreement
    chance: float  # p_e, the agreement expected from the margins alone


def cohen_kappa(table: Sequence[Sequence[int]], z: float = Z95) -> Kappa | None:
    """Kappa of the k-by-k counts ``table[i][j]`` (rater A said i, rater B said j); None
    when it is undefined: no items, or both raters always gave one same category (p_e = 1)."""
    k = len(table)
    n = sum(sum(row) for row in table)
    if n == 0 or any(len(row) != k for row in table):
        return None
    p = [[cell / n for cell in row] for row in table]
    rows = [sum(p[i]) for i in range(k)]
    cols = [sum(p[i][j] for i in range(k)) for j in range(k)]
    observed = sum(p[i][i] for i in range(k))
    chance = sum(rows[i] * cols[i] for i in range(k))
    if chance >= 1:
        return None
    kappa = (observed - chance) / (1 - chance)
    # Fleiss, Cohen & Everitt (1969): Var = (A + B - C) / (n (1 - p_e)^2).
    a = sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - kappa)) ** 2 for i in range(k))
    b = (1 - kappa) ** 2 * sum(
        p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(k) for j in range(k) if i != j
    )
    c = (kappa - chance * (1 - kappa)) ** 2
    se = math.sqrt(max(0.0, a + b - c) / (n * (1 - chance) ** 2))
    return Kappa(kappa, se, kappa - z * se, kappa + z * se, observed, chance)


__all__ = [
    "BOOTSTRAP_SAMPLES",
    "Z95",
    "Kappa",
    "binomial_cdf",
    "cohen_kappa",
    "mcnemar_exact",
    "paired_bootstrap",
    "percentile",
    "weighted_mean",
    "wilson",
]
