"""Statistics the judges use, pure and dependency-free (scipy is optional, so it is not used).

Why here, low down: a metric's judge (``metrics/time.py``) may need a significance test, and a
metric imports only the shared vocabulary and this; ``judgement`` re-exports it for callers.
"""
from __future__ import annotations

import collections
import math
from functools import lru_cache
from typing import Sequence


def _rank_with_ties(values: Sequence[float]) -> tuple[list[float], list[int]]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    tie_sizes: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        average = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = average
        tie_sizes.append(j - i + 1)
        i = j + 1
    return ranks, tie_sizes


@lru_cache(maxsize=64)
def _exact_u_distribution(m: int, n: int) -> tuple[float, ...]:
    """P(U = u) for u in 0..m*n under H0, no ties (the classic counting recurrence)."""
    # counts[j][u]: arrangements of i items of the first sample among j of the second with U = u.
    previous = [[1] + [0] * (m * n) for _ in range(n + 1)]  # i = 0: U is 0
    for i in range(1, m + 1):
        current = [[0] * (m * n + 1) for _ in range(n + 1)]
        current[0][0] = 1
        for j in range(1, n + 1):
            for u in range(m * n + 1):
                # the largest item is from sample one (contributes j to U) or from sample two
                value = current[j - 1][u]
                if u >= j:
                    value += previous[j][u - j]
                current[j][u] = value
        previous = current
    total = math.comb(m + n, m)
    return tuple(c / total for c in previous[n])


def mann_whitney_greater(current: Sequence[float], baseline: Sequence[float]) -> float:
    """One-sided p-value that ``current`` is stochastically greater than ``baseline``.

    Exact when a sample has at most 8 values and there are no ties, otherwise the normal
    approximation with tie and continuity corrections (scipy.stats.mannwhitneyu's 'auto').
    """
    m, n = len(current), len(baseline)
    if m == 0 or n == 0:
        return 1.0
    ranks, tie_sizes = _rank_with_ties(list(current) + list(baseline))
    u_current = sum(ranks[:m]) - m * (m + 1) / 2.0
    has_ties = any(t > 1 for t in tie_sizes)
    if min(m, n) <= 8 and not has_ties:
        distribution = _exact_u_distribution(m, n)
        start = math.ceil(u_current - 1e-9)
        return min(1.0, sum(distribution[start:]))
    total = m + n
    tie_term = sum(t**3 - t for t in tie_sizes) / (total * (total - 1))
    variance = m * n / 12.0 * ((total + 1) - tie_term)
    if variance <= 0:
        return 1.0
    z = (u_current - m * n / 2.0 - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def representative(counters: list[collections.Counter[str]]) -> collections.Counter[str]:
    """The per-iteration count to report: the counts most iterations agree on (ties go to the later
    iteration, which had more warm-up). Here, below the engines, because both the profiler's
    engines and the Python-calls engine (which must not import torch) use it. For deterministic code every iteration agrees; taking a
    whole iteration's counts, rather than a per-op mean, keeps the numbers integers and consistent
    with each other when one iteration took a one-off path (a cache fill, a lazy init)."""
    frozen = [tuple(sorted(c.items())) for c in counters]
    tally = collections.Counter(frozen)
    best = max(range(len(frozen)), key=lambda i: (tally[frozen[i]], i))
    return counters[best]
