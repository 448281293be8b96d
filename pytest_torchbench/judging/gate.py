"""The gate: results + a baseline set + a policy (+ the verdict hook) -> verdicts. Pure.

Why one function: the plugin's controller (at the end of each test, and once at the end of the
session for missing benchmarks) and ``torchbench compare`` (two stored sets) must never disagree
on the same two sets. Both call this module; neither judges on its own. Per-test limits travel
with each result (``BenchmarkResult.limits``, from the marker's ``limits=``, stored in baselines
too), so the CLI applies the same limits a pytest run did. The verdict hook is passed in as a
callable (the controller passes the ``pytest_torchbench_verdict`` hook, the CLI nothing), so this
module knows nothing of pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from ..common.vocabulary import Policy, Verdict
from .judgement import judge_result, missing_verdicts
from .results import BenchmarkResult, nodeid_among

#: The verdicts of one result as the user's hook leaves them: (result, its verdicts, its baseline
#: entry) -> the verdicts, changed or not.
Review = Callable[[BenchmarkResult, Sequence[Verdict], "BenchmarkResult | None"], list[Verdict]]


def policy_for(result: BenchmarkResult, policy: Policy) -> Policy:
    """The run's policy with the result's own limits (marker ``limits=``) over the global ones."""
    return policy.with_limits(result.limits) if result.limits else policy


def judge(
    result: BenchmarkResult,
    baseline: Mapping[str, BenchmarkResult] | None,
    policy: Policy,
    review: Review | None = None,
    rounds: Mapping[str, Sequence[tuple[Any, Any]]] | None = None,
    strict_rounds: bool = False,
) -> list[Verdict]:
    """The verdicts of one result: none without a baseline set; one per measured metric with one
    (new, not comparable, regression, ...), each seen by ``review`` before anyone acts on it.
    ``rounds``: per metric, (base, head) values measured alternately (``--bench-rounds``): a
    metric that alternates (time) is judged on those pairs instead of on one run against one
    (strictly with ``strict_rounds``: ``judgement.judge_metric``)."""
    if baseline is None:
        return []
    entry = baseline.get(result.key)
    verdicts = judge_result(result, entry, policy_for(result, policy), rounds, strict_rounds)
    return verdicts if review is None else review(result, verdicts, entry)


def missing(
    baseline: Mapping[str, BenchmarkResult], seen: Iterable[str], metrics: Iterable[str]
) -> list[Verdict]:
    """Baseline entries (of those given: the caller decides which are in scope) that no result
    had, for the metrics measured now."""
    return missing_verdicts(baseline, set(seen), set(metrics))


def missing_scope(
    baseline: Mapping[str, BenchmarkResult],
    modules_run: AbstractSet[str],
    nodeids_run: AbstractSet[str],
    collected: AbstractSet[str],
    narrowed: AbstractSet[str] = frozenset(),
) -> dict[str, BenchmarkResult]:
    """The baseline entries a pytest run answers for: those of a test module that ran, whose test
    either ran (and recorded nothing of that name) or no longer exists. Tests deselected with
    -k/-m were collected, did not run, and are not missing. ``narrowed``: modules of which the
    run collected only some nodes (``file.py::test_x`` on the command line); a test of theirs
    that was not collected was left out, not removed, and is not missing either. The node id is
    stored with each entry; files written before it was are matched against the collected tests
    (a parametrize id may contain " [" or " #")."""
    known = set(collected) | set(nodeids_run)
    scope = {}
    for key, entry in baseline.items():
        nodeid = entry.nodeid if entry.nodeid in known else nodeid_among(key, known)
        removed = nodeid not in collected and entry.module not in narrowed
        if entry.module in modules_run and (nodeid in nodeids_run or removed):
            scope[key] = entry
    return scope


def gate(
    results: Sequence[BenchmarkResult],
    baseline: Mapping[str, BenchmarkResult],
    policy: Policy,
    review: Review | None = None,
    in_scope: Mapping[str, BenchmarkResult] | None = None,
    metrics: Iterable[str] | None = None,
) -> list[Verdict]:
    """Every result judged (in key order), then the missing ones.

    ``in_scope``: the baseline entries that count as missing when absent (default: all of them;
    the plugin narrows it to the modules that ran, without deselected tests). ``metrics``: the
    metrics measured (default: those the results carry)."""
    verdicts: list[Verdict] = []
    for result in sorted(results, key=lambda r: r.key):
        verdicts.extend(judge(result, baseline, policy, review))
    measured = set(metrics) if metrics is not None else {m for r in results for m in r.metrics}
    verdicts.extend(
        missing(baseline if in_scope is None else in_scope, (r.key for r in results), measured)
    )
    return verdicts
