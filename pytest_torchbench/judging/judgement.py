"""Limits and verdicts: pure functions over results, no I/O, no pytest.

The generic rules live here (limits, which environment facts make a baseline not comparable,
new, missing, failing, the failure message); each metric's own comparison is its ``judge``
(``metrics/<name>.py``), found through the registry. How the built-in metrics decide
(docs/modes.md and docs/design/time-gate.md say the same for users and with the figures):

* time: a benchmark regressed when its fastest call (the fastest replicate block, per call,
  ignoring the fastest 2% of blocks) is
  slower than the baseline's by more than the limit (default 10%), and slower than the fastest
  call of every earlier saved run the baseline keeps by more than the limit. Why the fastest: other
  processes only ever add time, so on a loaded machine the fastest call of a short benchmark
  stays put where its median moves by tens of percent (benchmarks/time_designs.py). Why several
  saved runs: the noise between runs (memory state, frequency) is what a gate must beat, and one
  run's replicates cannot show it. When either measurement had its CPU less than 90% of the time
  (other processes ran) and calls take 100 us or more, the CPU time per call decides instead (other
  processes take wall time, not CPU time): it must rise more than a limit growing from the limit at
  share 0.9 to 50% at 0.5 (without CPU times: the wall time more than (1 + limit) / share - 1);
  below that the verdict is "noisy": reported, not failed.
* instructions: counts are deterministic, so no statistics: more than the limit (default 1%) above
  the baseline per run is a regression; more than the limit below is a stale baseline.
* ops: any change of an op's calls per iteration (default limit 0) fails.
* calls: any change of a Python function's calls per call (default limit 0) fails; a failed
  instructions or time verdict of the same benchmark lists the Python functions whose calls changed.
* memory: peak bytes more than the limit (default 10%) above the baseline.
* A metric measured in a different environment (per-metric facts: torch version, CPU model,
  valgrind version, ...) is not comparable: reported, not failed, unless strictness is asked for.

The verdict path. A ``Verdict`` is frozen; each step returns a new one, in this order:

1. :func:`judge_metric`: new, not comparable, or the metric's own ``judge`` (``judge_rounds`` on
   alternated rounds), then :func:`decide`: ``failed`` from the status and the policy;
2. :func:`judge_result`: explained by the benchmark's other metrics (the Python calls that changed
   first), then excused as noisy where an unchanged metric says the slowdown is the machine's;
3. in the pytest glue, per test: not judged where the test failed at the base revision, settled by
   a fresh process (``Metric.confirm``), accepted by a ``Bench-Accept`` trailer (``accept.py``),
   explained by a re-run (call sites); each returns new verdicts by (key, metric);
4. last, the user's ``pytest_torchbench_verdict`` hook (``gate.judge``'s ``review``, called by the
   controller), which returns a changed copy; explanations of tests run in other processes arrive
   at the end of the session from a child run that applied the same steps, and the controller
   keeps only the last.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..common.text import safe_text
from ..common.vocabulary import (
    IMPROVEMENT,
    MISSING,
    NEW,
    NOISY,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED,
    USER_FACT_PREFIX,
    Environment,
    Policy,
    Verdict,
)
from ..metrics import registry
from ..metrics.explaining import Explaining
from ..metrics.identity import Identity
from ..metrics.judge import Judging
from .results import BenchmarkResult

_LIMIT_ITEM = re.compile(r"^\s*([a-z_]+)\s*:\s*([0-9]*\.?[0-9]+)\s*(%?)\s*$")


class LimitSpecError(ValueError):
    """A malformed limits specification; the message says what is wrong and how to write it."""


def parse_limit_value(metric: str, value: Any, where: str) -> float:
    """``"5%"`` -> 0.05, ``0.05`` -> 0.05 (a Python number is a fraction), ``"0"`` -> 0.0.

    In text a number needs its '%': ``time:5`` could mean 5% or 500% (a fraction, as it did
    here before) or 5 seconds (pytest-benchmark's bare numbers), so it is an error that shows
    the percent spelling instead of a guess. ``0`` needs no unit: it means the same in all of them.
    """
    if isinstance(value, bool):
        raise LimitSpecError(
            f"{where}: limit for {metric!r} must be a percentage like '5%', got {value!r}"
        )
    if isinstance(value, (int, float)):
        fraction = float(value)
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", value)
        if not match:
            raise LimitSpecError(
                f"{where}: limit for {metric!r} must be a percentage like '5%', got {value!r}"
            )
        number = float(match.group(1))
        if not match.group(2) and number != 0:
            raise LimitSpecError(
                f"{where}: limit {metric}:{value.strip()} has no '%'; write "
                f"{metric}:{value.strip()}% for {value.strip()} percent (a bare number is "
                "ambiguous: a fraction, a percent or seconds)"
            )
        fraction = number / (100.0 if match.group(2) else 1.0)
    else:
        raise LimitSpecError(
            f"{where}: limit for {metric!r} must be a percentage like '5%', got {value!r}"
        )
    if not math.isfinite(fraction) or fraction < 0:
        raise LimitSpecError(f"{where}: limit for {metric!r} must be >= 0, got {value!r}")
    return fraction


def parse_limits(
    spec: str | Mapping[str, Any] | None, where: str = "--bench-fail"
) -> dict[str, float]:
    """Parse ``"instructions:1%,time:10%"`` (or a mapping) into metric -> fraction."""
    if spec is None:
        return {}
    items: list[tuple[str, Any]]
    if isinstance(spec, Mapping):
        items = list(spec.items())
    elif isinstance(spec, str):
        items = []
        for part in filter(None, (p.strip() for p in spec.split(","))):
            match = _LIMIT_ITEM.match(part)
            if not match:
                raise LimitSpecError(
                    f"{where}: cannot read {part!r}; write METRIC:PERCENT[,...], "
                    f"e.g. 'instructions:1%,time:10%' (metrics: {', '.join(registry.names())})"
                )
            items.append((match.group(1), match.group(2) + match.group(3)))
        if not items:
            raise LimitSpecError(f"{where}: empty limits; write e.g. 'time:10%'")
    else:
        raise LimitSpecError(
            f"{where}: limits must be a string like 'time:10%' or a dict, got {spec!r}"
        )
    limits: dict[str, float] = {}
    for metric, value in items:
        if not registry.known(metric):
            raise LimitSpecError(
                f"{where}: unknown metric {metric!r}; known metrics: {', '.join(registry.names())}"
            )
        if metric in limits:  # 'time:5%,time:6%': which one was meant? (the later silently won)
            raise LimitSpecError(f"{where}: metric {metric!r} has two limits; give each metric one")
        limits[metric] = parse_limit_value(metric, value, where)
    return limits


# --------------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------------


def environment_differences(
    metric: str, current: Environment | None, baseline: Environment | None
) -> list[str]:
    if current is None or baseline is None:
        return []
    found = registry.find(metric, Identity)
    differences = []
    # Facts added by pytest_torchbench_environment hooks ("user." names) count for every metric:
    # the user added them because they decide comparability.
    user_facts = sorted(
        f for f in {*current.facts, *baseline.facts} if f.startswith(USER_FACT_PREFIX)
    )
    for fact in (*(found.comparability_facts if found is not None else ()), *user_facts):
        now, then = current.facts.get(fact), baseline.facts.get(fact)
        if now != then:
            differences.append(
                f"{fact}: {then if then is not None else '-'} -> {now if now is not None else '-'}"
            )
    return differences


def limit_for(metric: str, policy: Policy) -> float:
    """The user's limit for ``metric``, else the metric's own default."""
    if metric in policy.limits:
        return policy.limits[metric]
    found = registry.find(metric, Judging)
    return found.default_limit if found is not None else 0.0


@dataclasses.dataclass(frozen=True)
class AlternatedRounds:
    """The (base, head) values of one metric measured alternately in fresh processes
    (``--bench-rounds``); ``strict``: rounds that were to be measured again and were not."""

    pairs: Sequence[tuple[Any, Any]]
    strict: bool = False


def judge_metric(
    key: str,
    metric: str,
    current: Any,
    baseline: Any | None,
    policy: Policy,
    *,
    environments: tuple[Environment | None, Environment | None] = (None, None),
    rounds: AlternatedRounds | None = None,
) -> Verdict:
    """One metric of one benchmark judged: new, not comparable (``environments``: this run's and
    the baseline's), or the metric's own comparison (of the alternated ``rounds`` where the
    metric ``alternates``), then :func:`decide`."""
    limit = limit_for(metric, policy)
    if baseline is None:
        return Verdict(
            key, metric, NEW, limit=limit, summary=f"{metric}: no baseline (new benchmark)"
        )
    differences = environment_differences(metric, *environments)
    judged = registry.get(metric, Judging)
    if differences:
        verdict = Verdict(
            key,
            metric,
            NOT_COMPARABLE,
            limit=limit,
            summary=f"{metric}: baseline from a different environment ({'; '.join(differences)})",
            details=differences,
        )
    elif rounds and rounds.pairs and judged.alternates:
        verdict = judged.judge_rounds(key, rounds.pairs, limit, policy, strict=rounds.strict)
    else:
        verdict = judged.judge(key, current, baseline, limit, policy)
    return decide(verdict, policy)


def decide(verdict: Verdict, policy: Policy) -> Verdict:
    """Whether ``verdict`` fails, from its status and the policy: a regression fails; an
    improvement beyond the limit fails where the user keeps baselines exact (``--bench-fail-stale``)
    and the metric is exact; a baseline not comparable fails under ``--bench-strict``. A metric's
    judge may have decided a failure already (an exact count that changed either way)."""
    found = registry.find(verdict.metric, Judging)
    fails = (
        verdict.failed
        or verdict.status == REGRESSION
        or (
            verdict.status == IMPROVEMENT
            and policy.fail_stale
            and (found is None or found.stale_fails)
        )
        or (verdict.status == NOT_COMPARABLE and policy.strict_environment)
    )
    return verdict if fails == verdict.failed else verdict.replace(failed=fails)


def judge_result(
    result: BenchmarkResult,
    baseline: BenchmarkResult | None,
    policy: Policy,
    rounds: Mapping[str, Sequence[tuple[Any, Any]]] | None = None,
    strict_rounds: bool = False,
) -> list[Verdict]:
    """One verdict per metric measured now (metrics only in the baseline are not judged here), each
    explained by the benchmark's other metrics, then excused where they say it is noise.
    ``rounds``: per metric, the (base, head) values of an alternated measurement (judge_metric)."""
    verdicts = []
    for metric, value in sorted(result.metrics.items()):
        pairs = (rounds or {}).get(metric)
        verdicts.append(
            judge_metric(
                result.key,
                metric,
                value,
                baseline.metrics.get(metric) if baseline is not None else None,
                policy,
                environments=(
                    result.environments.get(metric),
                    baseline.environments.get(metric) if baseline is not None else None,
                ),
                rounds=AlternatedRounds(pairs, strict_rounds) if pairs else None,
            )
        )
    if baseline is None:
        return verdicts
    verdicts = _explained_across(result, baseline, verdicts)
    return _excused_across(result, baseline, verdicts, rounds or {})


_JUDGED = (REGRESSION, IMPROVEMENT, UNCHANGED)


def _explained_across(
    result: BenchmarkResult, baseline: BenchmarkResult, verdicts: list[Verdict]
) -> list[Verdict]:
    """A failed verdict gets the lines of every other metric of the same benchmark that explains it
    (``Metric.explains_metrics``: the Python functions whose calls changed, before the C functions
    of an instructions failure: the level a library author changes code at, and the terminal's
    summary shows a verdict's first lines only), from that metric's own values, where they were
    judged (comparable with the baseline's)."""
    judged = {v.metric for v in verdicts if v.status in _JUDGED}
    explained = []
    for verdict in verdicts:
        if verdict.failed and verdict.status in (REGRESSION, IMPROVEMENT):
            for other in registry.all_metrics(Explaining):
                if verdict.metric not in other.explains_metrics or other.name not in judged:
                    continue
                lines = other.explain_other(
                    result.metrics[other.name], baseline.metrics[other.name]
                )
                verdict = verdict.with_details(before=lines)  # first: the level code is changed at
        explained.append(verdict)
    return explained


def _excused_across(
    result: BenchmarkResult,
    baseline: BenchmarkResult,
    verdicts: list[Verdict],
    rounds: Mapping[str, Sequence[tuple[Any, Any]]],
) -> list[Verdict]:
    """A failed regression judged against a saved baseline (not in alternated rounds, which pair
    base and head against the same noise) becomes ``noisy`` (listed, not failed) where another
    metric of the same benchmark, judged unchanged, says why it is noise
    (``Metric.excuses_metrics``), and nothing else of that benchmark failed (an op, a call, a kernel
    more says the code changed)."""
    own = {v.metric: v for v in verdicts if v.status == UNCHANGED}
    failed = [v for v in verdicts if v.failed]
    if len(failed) != 1 or failed[0].status != REGRESSION or rounds.get(failed[0].metric):
        return verdicts
    verdict = failed[0]
    for other in registry.all_metrics(Explaining):
        if verdict.metric not in other.excuses_metrics or other.name not in own:
            continue
        reason = other.excuse_other(
            verdict, own[other.name], result.metrics[other.name], baseline.metrics[other.name]
        )
        if reason:
            excused = verdict.replace(
                status=NOISY,
                failed=False,
                summary=f"{verdict.summary}; noisy, not failed: {reason.split(':', 1)[0]}",
                details=(reason, *verdict.details),
            )
            return [excused if v is verdict else v for v in verdicts]
    return verdicts


def missing_verdicts(
    baseline_entries: Mapping[str, BenchmarkResult],
    seen_keys: set[str],
    metrics: set[str],
    selected_modules: set[str] | None = None,
) -> list[Verdict]:
    """Baseline benchmarks of the measured metrics that this run did not produce."""
    verdicts = []
    for key, entry in sorted(baseline_entries.items()):
        if key in seen_keys:
            continue
        if selected_modules is not None and entry.module not in selected_modules:
            continue
        for metric in sorted(set(entry.metrics) & metrics):
            verdicts.append(
                Verdict(
                    key,
                    metric,
                    MISSING,
                    summary=f"{metric}: in the baseline, not measured in this run",
                )
            )
    return verdicts


def failure_message(verdicts: Sequence[Verdict], refresh_command: str | None = None) -> str:
    """The text shown in the FAILED test's report."""
    lines = []
    for verdict in verdicts:
        if not verdict.failed:
            continue
        headline = {
            REGRESSION: "regressed",
            IMPROVEMENT: "improved beyond the limit (stale baseline)",
            NOT_COMPARABLE: "not comparable (strict environment)",
        }.get(verdict.status, verdict.status)
        found = registry.find(verdict.metric, Judging)
        if found is not None and found.failure_words and verdict.status != NOT_COMPARABLE:
            headline = found.failure_words
        # Keys, summaries and details quote baseline files (environment facts, function names):
        # escaped, they can neither rewrite the terminal nor forge a CI log or JUnit line.
        lines.append(
            safe_text(f"torchbench: {verdict.key}: {verdict.metric} {headline}: {verdict.summary}")
        )
        lines.extend(f"    {safe_text(line)}" for line in verdict.details)
        if verdict.status == IMPROVEMENT and refresh_command:
            lines.append(f"    refresh the baselines with: {refresh_command}")
    return "\n".join(lines)
