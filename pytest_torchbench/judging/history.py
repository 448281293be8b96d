"""The trend of every benchmark and metric across the commits that changed a baseline set
(``torchbench history``): steps, creep and environment breaks, computed from values only.

Why here, pure: reading the commits is storage's (``store/history.py``), drawing is the reports'
(``reports/history.py``); what counts as a step or as creep is judging, and is tested on numbers.

- A **step**: from one saved value to the next, what the gate would call a regression or an
  improvement (the metric's own judge, at the benchmark's limit): exact counts by name, so an op
  mix that changed at an equal total is a step too; in one environment.
- **Creep**: within one environment, the product of the changes that each stayed within the
  limit, beyond it: changes that pass the gate one by one, and add up.
- A **break**: the facts that decide the metric's comparability changed (another torch, another
  machine): the values on either side are not compared, and the line is drawn apart.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence

from ..common.vocabulary import IMPROVEMENT, REGRESSION, Environment, Policy
from ..metrics import registry
from ..metrics.identity import Identity
from .judgement import judge_result, limit_for
from .results import BenchmarkResult

__all__ = ["Commit", "Point", "Series", "series_of", "UP", "DOWN"]

UP, DOWN = "up", "down"


@dataclasses.dataclass(frozen=True)
class Commit:
    """A commit that changed the set: its id, when (seconds since the epoch) and its subject."""

    sha: str
    time: int
    subject: str


@dataclasses.dataclass(frozen=True)
class Point:
    """One saved value of a series: the commit, the headline value, its spread where the metric
    has one (time: the IQR), the environment's comparability facts, and what happened there."""

    commit: Commit
    value: float
    spread: float | None
    environment: tuple[tuple[str, str], ...]
    step: str | None = None  # UP / DOWN: beyond the limit from the previous point
    change: float | None = None  # against the previous point of the same environment
    breaks: bool = False  # the first point after an environment change


@dataclasses.dataclass(frozen=True)
class Series:
    """One benchmark's one metric over the commits, with its limit and its creep per environment."""

    key: str
    metric: str
    limit: float
    points: tuple[Point, ...]
    #: Per environment segment (first commit, last commit, change): drift beyond the limit made
    #: of changes that each stayed within it.
    creep: tuple[tuple[Commit, Commit, float], ...] = ()

    @property
    def steps(self) -> list[Point]:
        return [p for p in self.points if p.step is not None]


def _facts(metric: str, environment: Environment | None) -> tuple[tuple[str, str], ...]:
    found = registry.find(metric, Identity)
    facts = environment.facts if environment is not None else {}
    names = [
        *(found.comparability_facts if found is not None else ()),
        *sorted(f for f in facts if f.startswith("user.")),
    ]
    return tuple((name, str(facts.get(name, "-"))) for name in names)


def series_of(
    snapshots: Sequence[tuple[Commit, Mapping[str, BenchmarkResult]]],
    policy: Policy,
    keys: Iterable[str] | None = None,
) -> list[Series]:
    """The series of every (benchmark, metric) of the snapshots (oldest first), in natural order;
    ``keys``: only those benchmarks. A commit where a benchmark has no entry, or whose value is
    unreadable, leaves no point."""
    wanted = set(keys) if keys is not None else None
    raw: dict[tuple[str, str], list[tuple[Commit, BenchmarkResult]]] = {}
    for commit, entries in snapshots:
        for key, result in entries.items():
            if wanted is not None and key not in wanted:
                continue
            for metric in result.metrics:
                if registry.known(metric):
                    raw.setdefault((key, metric), []).append((commit, result))
    return [_series(key, metric, found, policy) for (key, metric), found in raw.items()]


def _series(
    key: str, metric: str, found: Sequence[tuple[Commit, BenchmarkResult]], policy: Policy
) -> Series:
    shown = registry.get(metric, Identity)
    newest = found[-1][1]
    limit = limit_for(metric, policy.with_limits(newest.limits) if newest.limits else policy)
    points: list[Point] = []
    creep: list[tuple[Commit, Commit, float]] = []
    within = 1.0
    segment_start: Point | None = None
    previous_result: BenchmarkResult | None = None
    for commit, result in found:
        value = result.metrics[metric]
        try:
            number = float(shown.headline(value))
        except (TypeError, ValueError, AttributeError, OverflowError):
            continue
        spread = getattr(value, "iqr", None)
        facts = _facts(metric, result.environments.get(metric))
        previous = points[-1] if points else None
        if previous is None or previous.environment != facts:
            if previous is not None and segment_start is not None:
                creep.extend(_creep(segment_start, previous, within, limit))
            point = Point(commit, number, spread, facts, breaks=previous is not None)
            segment_start, within = point, 1.0
        else:
            change = (
                number / previous.value - 1.0
                if previous.value
                else (0.0 if number == 0 else math.inf)
            )
            step = _step(result, previous_result, metric, limit)
            if step is None and math.isfinite(change):
                within *= 1.0 + change
            point = Point(commit, number, spread, facts, step=step, change=change)
        points.append(point)
        previous_result = result
    if points and segment_start is not None:
        creep.extend(_creep(segment_start, points[-1], within, limit))
    return Series(key, metric, limit, tuple(points), tuple(creep))


def _step(
    result: BenchmarkResult, previous: BenchmarkResult | None, metric: str, limit: float
) -> str | None:
    """UP or DOWN where the metric's judge calls ``result`` a regression or an improvement
    against ``previous`` at ``limit``; None where it does not (or cannot judge)."""
    if previous is None:
        return None
    try:
        verdicts = judge_result(result, previous, Policy(limits={metric: limit}))
    except (TypeError, ValueError, ArithmeticError, AttributeError, KeyError):
        return None
    status = next((v.status for v in verdicts if v.metric == metric), None)
    return UP if status == REGRESSION else DOWN if status == IMPROVEMENT else None


def _creep(
    start: Point, end: Point, within: float, limit: float
) -> list[tuple[Commit, Commit, float]]:
    drift = within - 1.0
    return [(start.commit, end.commit, drift)] if start is not end and abs(drift) > limit else []
