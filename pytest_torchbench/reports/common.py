"""What every report needs the same way: the order of verdicts, groups, headline values, counts.

Why one place: the terminal, Markdown and HTML reports must agree on what comes first
(regressions), what a benchmark's group is, and what "3 regressed" counts (tests, not verdicts).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ..common.text import finite, safe_number
from ..common.vocabulary import (
    ACCEPTED,
    IMPROVEMENT,
    MISSING,
    NEW,
    NOISY,
    NOT_COMPARABLE,
    REGRESSION,
    TOO_NOISY,
    UNCHANGED,
    Verdict,
    as_float,
)
from ..judging.results import BenchmarkResult, nodeid_of
from ..metrics import registry
from ..metrics.display import Display

#: Reading order: bad news first.
STATUS_ORDER = (
    REGRESSION,
    TOO_NOISY,
    NOISY,
    ACCEPTED,
    IMPROVEMENT,
    NOT_COMPARABLE,
    NEW,
    MISSING,
    UNCHANGED,
)


def waived(verdict: Verdict) -> bool:
    """A regression that does not fail: only a ``pytest_torchbench_verdict`` hook makes one (the
    verdict path fails every regression; an accepted one has its own status)."""
    return verdict.status == REGRESSION and not verdict.failed


def status_rank(status: str) -> int:
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER)


def metric_rank(metric: str) -> int:
    """Metrics in registration order (the built-in ones first)."""
    return registry.rank(metric)


def group_of(result: BenchmarkResult | None) -> str:
    """A benchmark's group (pytest-benchmark's ``benchmark.group`` or the marker's ``group=``):
    a ``group`` attribute of the result when the model has one, else ``extras["group"]``; "" if
    none."""
    if result is None:
        return ""
    group = getattr(result, "group", None)
    if not group and isinstance(result.extras, Mapping):
        group = result.extras.get("group")
    return str(group) if group else ""


def metric_value(metric_name: str, metric: Any) -> float:
    """The one number a table shows for a metric (per call / per run): the metric's headline."""
    return as_float(registry.get(metric_name, Display).headline(metric))


def unjudged(
    results: Iterable[BenchmarkResult], verdicts: Iterable[Verdict]
) -> list[tuple[BenchmarkResult, Verdict]]:
    """Metrics measured but not judged (no baseline compared), as "measured" verdicts, so that the
    tables of a save run list them beside the judged ones."""
    judged = {(v.key, v.metric) for v in verdicts}
    found = []
    for result in results:
        for name, metric in result.metrics.items():
            if (result.key, name) not in judged:
                try:
                    value: float | None = metric_value(name, metric)
                except (KeyError, AttributeError, TypeError, ValueError):
                    value = None
                found.append((result, Verdict(result.key, name, "measured", current=value)))
    return found


def profiles_of(result: BenchmarkResult) -> list[Mapping[str, Any]]:
    """The profiles recorded for a result (``extras["profiles"]``: ``--bench-profile`` runs and
    ``bench_profiler`` blocks, one shape, see ``engines.profiler.ProfileSummary.record``);
    entries that are not objects are skipped, so a hand-edited JSON cannot break a report."""
    extras = result.extras if isinstance(result.extras, Mapping) else {}
    profiles = extras.get("profiles")
    if not isinstance(profiles, (list, tuple)):
        return []
    return [p for p in profiles if isinstance(p, Mapping)]


def top_ops_of(profile: Mapping[str, Any], top: int = 5) -> list[tuple[str, str, str]]:
    """(name, calls, self CPU us) of a profile's top ops, as text (never raises)."""
    rows = []
    ops = profile.get("top_ops")
    for op in ops[:top] if isinstance(ops, list) else []:
        if isinstance(op, Mapping):
            rows.append(
                (
                    str(op.get("name", "?")),
                    safe_number(op.get("calls", 0)),
                    safe_number(op.get("self_cpu_time_us", 0), ".1f"),
                )
            )
    return rows


def format_value(metric: str, value: float | None) -> str:
    """A headline value as text; never raises (NaN, inf and huge numbers included)."""
    if value is None:
        return "-"
    if not finite(value):
        return safe_number(value)
    found = registry.find(metric, Display)
    return found.format_value(value) if found is not None else safe_number(value, "g")


def format_delta(delta: float | None) -> str:
    if delta is None:
        return "-"
    if not finite(delta):
        return safe_number(delta)
    return f"{delta * 100:+.1f}%" if abs(delta) >= 0.001 else f"{delta * 100:+.3f}%"


def safe_delta(verdict: Verdict) -> float | None:
    """``verdict.delta`` that never raises (a NaN or inf baseline gives NaN, not an exception)."""
    try:
        return verdict.delta
    except (ArithmeticError, TypeError):
        return None


def verdicts_by_key(verdicts: Iterable[Verdict]) -> dict[str, list[Verdict]]:
    by_key: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        by_key.setdefault(verdict.key, []).append(verdict)
    return by_key


def worst_status(verdicts: Sequence[Verdict]) -> str:
    """The status a benchmark is listed under: its worst verdict's; "measured" with no verdict."""
    if not verdicts:
        return "measured"
    return min((v.status for v in verdicts), key=status_rank)


#: The status of a benchmark test that failed or errored in pytest before it measured anything.
FAILED_BEFORE_MEASURING = "failed before measuring"


def count_tests(
    results: Sequence[BenchmarkResult],
    verdicts: Sequence[Verdict],
    failed_tests: Collection[str] = (),
) -> dict[str, int]:
    """How many tests (node ids, not verdicts, not recordings) are in each state: a test counts
    once, under its worst verdict; ``failed`` counts tests with at least one failing verdict and
    the benchmark tests pytest failed (``failed_tests``: an assertion, a fixture error, a
    teardown error), so that a report never says "passed" of a run that pytest failed. A failed
    test that measured nothing counts under :data:`FAILED_BEFORE_MEASURING`."""
    by_test: dict[str, list[Verdict]] = {}
    for result in results:
        by_test.setdefault(nodeid_of(result.key), [])
    for verdict in verdicts:
        by_test.setdefault(nodeid_of(verdict.key), []).append(verdict)
    counts: dict[str, int] = {}
    for test_verdicts in by_test.values():
        status = worst_status(test_verdicts)
        counts[status] = counts.get(status, 0) + 1
    unmeasured = {nodeid for nodeid in failed_tests if nodeid not in by_test}
    if unmeasured:
        counts[FAILED_BEFORE_MEASURING] = len(unmeasured)
    counts["failed"] = sum(
        1 for nodeid, vs in by_test.items() if nodeid in failed_tests or any(v.failed for v in vs)
    ) + len(unmeasured)
    counts["tests"] = len(by_test) + len(unmeasured)
    return counts


def unmeasured_failures(
    results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict], failed_tests: Collection[str]
) -> list[str]:
    """The failed benchmark tests that have no result and no verdict (sorted): listed by name in
    the reports, which otherwise show only what was measured."""
    known = {nodeid_of(r.key) for r in results} | {nodeid_of(v.key) for v in verdicts}
    return sorted(set(failed_tests) - known)
