"""Benchmark metrics as JUnit XML test properties (``--junitxml``).

Why: many CI dashboards (GitLab, Jenkins, Azure, test-report actions) read JUnit XML and show
``<property>`` entries of a test case, but know nothing of our JSON. So each benchmark's headline
numbers and verdicts go into ``item.user_properties`` — the same list ``record_property`` fills —
under stable dotted names such as ``torchbench.time.median_s`` or ``torchbench.verdict.time``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..common.text import safe_text
from ..common.vocabulary import ACCEPTED, Verdict
from ..judging.results import BenchmarkResult, round_sig
from ..metrics import registry
from ..metrics.display import Display


def properties(
    result: BenchmarkResult, verdicts: Sequence[Verdict], qualify: bool = False
) -> list[tuple[str, object]]:
    """``(name, value)`` pairs for one result; ``qualify`` adds the description when a test
    recorded several results, so the names stay unique within the test case."""
    prefix = "torchbench."
    if qualify and result.description:
        prefix += safe_text(result.description).replace(" ", "_") + "."
    out: list[tuple[str, object]] = []
    for name, metric in sorted(result.metrics.items()):
        found = registry.find(name, Display)
        if found is not None:
            out += found.junit_properties(metric, prefix)
    for verdict in verdicts:
        out.append(
            (
                f"{prefix}verdict.{verdict.metric}",
                safe_text(verdict.status) + (" (failed)" if verdict.failed else ""),
            )
        )
        if verdict.delta is not None:
            out.append((f"{prefix}delta.{verdict.metric}", round_sig(verdict.delta, 4)))
        if verdict.status == ACCEPTED and verdict.details:  # why, and where the change says so
            out.append((f"{prefix}accepted.{verdict.metric}", safe_text(verdict.details[0])))
    return out
