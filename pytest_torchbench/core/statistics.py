"""Statistics shared by the engines and the metrics, pure and dependency-free.

Why here, low down: the profiler's engines and the Python-calls engine (which must not import torch)
both pick a representative iteration; time mode gives pytest-benchmark's ``Stats``; and a metric
imports only the shared vocabulary and this.
"""
from __future__ import annotations

import collections
import math
from typing import Sequence


def representative(counters: list[collections.Counter[str]]) -> collections.Counter[str]:
    """The per-iteration count to report: the counts most iterations agree on (ties go to the later
    iteration, which had more warm-up). For deterministic code every iteration agrees; taking a
    whole iteration's counts, rather than a per-op mean, keeps the numbers integers and consistent
    with each other when one iteration took a one-off path (a cache fill, a lazy init)."""
    frozen = [tuple(sorted(c.items())) for c in counters]
    tally = collections.Counter(frozen)
    best = max(range(len(frozen)), key=lambda i: (tally[frozen[i]], i))
    return counters[best]


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


class PairedRatios:
    """Head/base ratios of a figure measured alternately, one pair per round (duet benchmarking).

    Why ratios of pairs: base and head of one round ran seconds apart on the same machine, so
    what the machine did to both (a slower minute, a neighbour, the clock) divides out of each
    ratio, and what remains is the change of the code plus the noise between two processes.
    ``median`` is the paired estimate of the change (one strange round cannot move it);
    ``spread`` is half the range of the ratios over their median: every round lay within
    ``median x (1 +- spread)`` and a change smaller than that cannot be told from the noise.
    """

    def __init__(self, pairs: Sequence[tuple[float, float]]) -> None:
        usable = [(float(b), float(h)) for b, h in pairs if b > 0 and h > 0 and math.isfinite(b) and math.isfinite(h)]
        if not usable:
            raise ValueError("PairedRatios needs at least one pair of positive figures")
        self.pairs = usable
        self.ratios = [h / b for b, h in usable]

    @property
    def rounds(self) -> int:
        return len(self.ratios)

    @property
    def median(self) -> float:
        return _median(sorted(self.ratios))

    @property
    def low(self) -> float:
        return min(self.ratios)

    @property
    def high(self) -> float:
        return max(self.ratios)

    @property
    def spread(self) -> float:
        return (self.high - self.low) / 2.0 / self.median

    @property
    def base_median(self) -> float:
        return _median(sorted(b for b, _ in self.pairs))
