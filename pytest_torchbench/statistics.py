"""Statistics the judges use, pure and dependency-free (scipy is optional, so it is not used).

Why here, low down: a metric's judge (``metrics/time.py``) may need a significance test, and a
metric imports only the shared vocabulary and this; ``judgement`` re-exports it for callers.
"""
from __future__ import annotations

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


class RoundStats:
    """pytest-benchmark's ``Stats`` of per-call times (seconds), with its field names and its
    definitions (quartiles by Wikipedia's methods 2 and 3, Tukey fences, ``ops`` = calls per
    second): suites that read ``benchmark.stats.stats.mean``, and tools that read its JSON, get
    the numbers they were written for. One datum per replicate block here (per-call time of the
    block), where pytest-benchmark has one per round.
    """

    fields = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
              "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total")

    def __init__(self, data: Sequence[float]) -> None:
        if not data:
            raise ValueError("RoundStats needs at least one time")
        self.data = [float(value) for value in data]
        self.sorted_data = sorted(self.data)

    def __bool__(self) -> bool:
        return bool(self.data)

    def as_dict(self) -> dict[str, float | int | str]:
        return {field: getattr(self, field) for field in self.fields}

    @property
    def rounds(self) -> int:
        return len(self.data)

    @property
    def total(self) -> float:
        return math.fsum(self.data)

    @property
    def min(self) -> float:
        return self.sorted_data[0]

    @property
    def max(self) -> float:
        return self.sorted_data[-1]

    @property
    def mean(self) -> float:
        return self.total / self.rounds

    @property
    def stddev(self) -> float:
        if self.rounds < 2:
            return 0.0
        mean = self.mean
        return math.sqrt(math.fsum((value - mean) ** 2 for value in self.data) / (self.rounds - 1))

    @property
    def median(self) -> float:
        return _median(self.sorted_data)

    @property
    def q1(self) -> float:
        data, rounds = self.sorted_data, self.rounds
        if rounds == 1:
            return data[0]
        if rounds % 2:
            n, q = rounds // 4, rounds % 4
            return 0.25 * data[n - 1] + 0.75 * data[n] if q == 1 else 0.75 * data[n] + 0.25 * data[n + 1]
        return _median(data[: rounds // 2])

    @property
    def q3(self) -> float:
        data, rounds = self.sorted_data, self.rounds
        if rounds == 1:
            return data[0]
        if rounds % 2:
            n, q = rounds // 4, rounds % 4
            if q == 1:
                return 0.75 * data[3 * n] + 0.25 * data[3 * n + 1]
            return 0.25 * data[3 * n + 1] + 0.75 * data[3 * n + 2]
        return _median(data[rounds // 2:])

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def ld15iqr(self) -> float:
        """Tukey's lowest datum within 1.5 IQR under Q1."""
        fence = self.q1 - 1.5 * self.iqr
        return next(value for value in self.sorted_data if value >= fence)

    @property
    def hd15iqr(self) -> float:
        """Tukey's highest datum within 1.5 IQR over Q3."""
        fence = self.q3 + 1.5 * self.iqr
        return next(value for value in reversed(self.sorted_data) if value <= fence)

    @property
    def iqr_outliers(self) -> int:
        low, high = self.q1 - 1.5 * self.iqr, self.q3 + 1.5 * self.iqr
        return sum(1 for value in self.data if value < low or value > high)

    @property
    def stddev_outliers(self) -> int:
        low, high = self.mean - self.stddev, self.mean + self.stddev
        return sum(1 for value in self.data if value < low or value > high)

    @property
    def outliers(self) -> str:
        return f"{self.stddev_outliers};{self.iqr_outliers}"

    @property
    def ops(self) -> float:
        return self.rounds / self.total if self.total else 0.0


def _median(sorted_values: Sequence[float]) -> float:
    middle = len(sorted_values) // 2
    if len(sorted_values) % 2:
        return float(sorted_values[middle])
    return (sorted_values[middle - 1] + sorted_values[middle]) / 2.0
