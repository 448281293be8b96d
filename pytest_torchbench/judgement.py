"""Limits, significance and verdicts: pure functions over results, no I/O, no pytest.

How the gate decides (the README repeats this):

* time: a benchmark regressed when its fastest call (the fastest replicate block, per call) is
  slower than the baseline's by more than the limit (default 10%), and slower than the fastest
  call of every earlier saved run the baseline keeps by more than the limit. Why the fastest: other
  processes only ever add time, and on a loaded 2-core machine (CPU share 0.25-0.4) the A/A
  change of the fastest call of sub-100-us benchmarks stayed within +-3% where medians moved
  -35%..+55% (benchmarks/time_designs.py). Why several saved runs: the noise between runs
  (memory state, frequency) is what a gate must beat, and one run's replicates cannot show it.
  When either measurement had its CPU less than 90% of the time (other processes ran) and calls
  take 100 us or more, the slowdown must also exceed what the load alone explains,
  (1 + limit) / share - 1; below that the verdict is "noisy": reported, not failed.
* instructions: counts are deterministic, so no statistics: more than the limit (default 1%) above
  the baseline per run is a regression; more than the limit below is a stale baseline.
* ops: any change of an op's calls per iteration (default limit 0) fails.
* memory: peak bytes more than the limit (default 10%) above the baseline.
* A metric measured in a different environment (per-metric facts: torch version, CPU model,
  valgrind version, ...) is not comparable: reported, not failed, unless strictness is asked for.
"""
from __future__ import annotations

import dataclasses
import math
import re
from functools import lru_cache
from typing import Any, Mapping, Sequence

from .results import METRICS, BenchmarkResult, Environment

DEFAULT_LIMITS: dict[str, float] = {"time": 0.10, "instructions": 0.01, "ops": 0.0, "memory": 0.10}
DEFAULT_ALPHA = 0.001

#: Environment facts that must match for a metric to be comparable with its baseline.
#: Prefix of environment facts added by the pytest_torchbench_environment hook.
USER_FACT_PREFIX = "user."

COMPARABILITY_FACTS: dict[str, tuple[str, ...]] = {
    "time": (
        "python", "python_implementation", "torch", "torch_git", "torch_cuda", "cpu_model",
        "cpu_capability", "machine", "num_threads", "gpu",
    ),
    "instructions": (
        "python", "python_build", "python_compiler", "torch", "torch_git", "torch_debug",
        "cpu_capability", "machine", "libc", "pythonmalloc", "num_threads", "valgrind", "allocator",
        "pythonhashseed", "counting_method",
    ),
    "ops": ("torch", "torch_git", "gpu"),
    "memory": ("torch", "torch_git", "machine", "gpu", "pythonmalloc"),
}

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
        raise LimitSpecError(f"{where}: limit for {metric!r} must be a percentage like '5%', got {value!r}")
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
                f"{where}: limit {metric}:{value.strip()} has no '%'; write {metric}:{value.strip()}% "
                f"for {value.strip()} percent (a bare number is ambiguous: a fraction, a percent "
                "or seconds)"
            )
        fraction = number / (100.0 if match.group(2) else 1.0)
    else:
        raise LimitSpecError(f"{where}: limit for {metric!r} must be a percentage like '5%', got {value!r}")
    if not math.isfinite(fraction) or fraction < 0:
        raise LimitSpecError(f"{where}: limit for {metric!r} must be >= 0, got {value!r}")
    return fraction


def parse_limits(spec: str | Mapping[str, Any] | None, where: str = "--bench-fail") -> dict[str, float]:
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
                    f"e.g. 'instructions:1%,time:10%' (metrics: {', '.join(METRICS)})"
                )
            items.append((match.group(1), match.group(2) + match.group(3)))
        if not items:
            raise LimitSpecError(f"{where}: empty limits; write e.g. 'time:10%'")
    else:
        raise LimitSpecError(f"{where}: limits must be a string like 'time:10%' or a dict, got {spec!r}")
    limits: dict[str, float] = {}
    for metric, value in items:
        if metric not in METRICS:
            raise LimitSpecError(
                f"{where}: unknown metric {metric!r}; known metrics: {', '.join(METRICS)}"
            )
        limits[metric] = parse_limit_value(metric, value, where)
    return limits


# --------------------------------------------------------------------------------------------------
# Mann-Whitney U
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------------

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
NEW = "new"
MISSING = "missing"
NOT_COMPARABLE = "not comparable"
#: time only: slower beyond the limit, but measured on a machine too busy to tell (reported, not failed)
NOISY = "noisy"


@dataclasses.dataclass
class Policy:
    """What the user asked of the gate."""

    limits: dict[str, float] = dataclasses.field(default_factory=lambda: dict(DEFAULT_LIMITS))
    alpha: float = DEFAULT_ALPHA
    strict_environment: bool = False  # a not-comparable baseline fails
    fail_stale: bool = False  # an improvement beyond the limit fails (baselines kept exact)

    def with_limits(self, overrides: Mapping[str, float]) -> Policy:
        return dataclasses.replace(self, limits={**self.limits, **overrides})


@dataclasses.dataclass
class Verdict:
    key: str
    metric: str
    status: str
    baseline: float | None = None
    current: float | None = None
    limit: float = 0.0
    p_value: float | None = None
    summary: str = ""
    details: list[str] = dataclasses.field(default_factory=list)
    failed: bool = False

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.current is None or self.baseline == 0:
            return None
        return self.current / self.baseline - 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "metric": self.metric,
            "status": self.status,
            "baseline": self.baseline,
            "current": self.current,
            "delta": self.delta,
            "limit": self.limit,
            "p_value": self.p_value,
            "summary": self.summary,
            "details": list(self.details),
            "failed": self.failed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


def environment_differences(metric: str, current: Environment | None, baseline: Environment | None) -> list[str]:
    if current is None or baseline is None:
        return []
    differences = []
    # Facts added by pytest_torchbench_environment hooks ("user." names) count for every metric:
    # the user added them because they decide comparability.
    user_facts = sorted(f for f in {*current.facts, *baseline.facts} if f.startswith(USER_FACT_PREFIX))
    for fact in (*COMPARABILITY_FACTS.get(metric, ()), *user_facts):
        now, then = current.facts.get(fact), baseline.facts.get(fact)
        if now != then:
            differences.append(f"{fact}: {then if then is not None else '-'} -> {now if now is not None else '-'}")
    return differences


def format_percent(fraction: float) -> str:
    return f"{fraction * 100:+.1f}%" if abs(fraction) >= 0.001 else f"{fraction * 100:+.3f}%"


def format_seconds(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds:.3g} s"  # pragma: no cover


#: A measuring thread that had a core less than this share of the wall time was disturbed by other
#: processes (load), so its times carry their noise (see time_disturbance).
QUIET_CPU_SHARE = 0.9


def time_reference(baseline: Any) -> tuple[float, list[float]]:
    """What a time is compared with: the slowest of the baseline's saved runs, and all of them.

    Each run is represented by its fastest call (see _judge_time). A baseline saved several times
    in the same environment keeps the earlier runs' values: their spread is the noise between
    runs (cache and memory state, CPU frequency, neighbours), which the replicates of one run do
    not show. Comparing with the slowest of them means a run fails only when it is slower than
    every run the baseline has seen, by more than the limit.
    """
    runs = [*baseline.history, baseline.fastest]
    return max(runs), runs


def time_disturbance(current: Any, baseline: Any) -> float | None:
    """The lowest CPU share of the two measurements when below QUIET_CPU_SHARE, else None.

    CPU share = the measuring thread's CPU time over the wall time of its measurement: 1.0 means
    it had a core all the time; 0.4 means other processes had it 60% of the time, and then they
    also share its caches and memory bandwidth, which slows even its fastest calls.
    """
    shares = [m.cpu_share for m in (current, baseline) if getattr(m, "cpu_share", None) is not None]
    lowest = min(shares, default=None)
    return lowest if lowest is not None and lowest < QUIET_CPU_SHARE else None


#: Calls at least this long touch enough memory that other processes' cache and memory traffic
#: slow even the fastest of them; shorter calls have a fastest call no neighbour can move (measured
#: at CPU share 0.13-0.40: A/A within 1% of benchmarks, +15% caught; see benchmarks/time_designs.py).
SHORT_CALL = 100e-6


def time_allowance(limit: float, disturbed_share: float | None, fastest_call: float = SHORT_CALL) -> float:
    """The slowdown a run must exceed to fail: the limit; on a disturbed machine, for calls of
    SHORT_CALL or more, what the load alone can explain: a thread that had its core a share s of
    the time can take 1/s as long with no change to the code, so (1 + limit) / s - 1 (s = 0.5:
    +120%; a 2x slowdown still fails above s = 0.55; measured, a gentler allowance of
    limit + (1 - s) still failed 4% of A/A comparisons at s = 0.13-0.40, this one 0.4%)."""
    if disturbed_share is None or fastest_call < SHORT_CALL:
        return limit
    return (1.0 + limit) / max(disturbed_share, 0.01) - 1.0


def _judge_time(key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
    """Compare the fastest call of each run (see the module docstring for why, with numbers)."""
    now, then = current.fastest, baseline.fastest
    delta = now / then - 1.0 if then > 0 else 0.0
    reference, runs = time_reference(baseline)
    over = now / reference - 1.0 if reference > 0 else 0.0
    disturbed = time_disturbance(current, baseline)
    allowed = time_allowance(limit, disturbed, then)
    status = UNCHANGED
    if over > limit:
        status = REGRESSION if over > allowed else NOISY
    elif delta < -limit and now < min(runs) * (1.0 - limit):
        status = IMPROVEMENT
    summary = (
        f"time {format_seconds(then)} -> {format_seconds(now)} ({format_percent(delta)}, "
        f"limit {limit * 100:g}%; fastest call of {len(baseline.raw_times)}/{len(current.raw_times)} "
        f"blocks, median {format_seconds(baseline.median)} -> {format_seconds(current.median)}"
    )
    if len(runs) > 1:
        summary += (f"; {len(runs)} saved runs {format_seconds(min(runs))}-{format_seconds(max(runs))}, "
                    f"{format_percent(over)} over the slowest")
    summary += ")"
    details = _time_conditions(current, baseline, disturbed if status != IMPROVEMENT else None,
                               allowed) if status != UNCHANGED else []
    if status == NOISY:
        summary += (f": the machine was busy, a slowdown must exceed {allowed * 100:.0f}% "
                    f"to fail; not failed, rerun on a quieter machine")
    return Verdict(key, "time", status, then, now, limit, None, summary, details)


def _time_conditions(current: Any, baseline: Any, disturbed: float | None, allowed: float) -> list[str]:
    """What the machine was like during both measurements, in numbers a user can check."""
    lines = []
    for name, metric in (("this run", current), ("baseline", baseline)):
        parts = []
        if getattr(metric, "cpu_share", None) is not None:
            parts.append(f"had a CPU {metric.cpu_share * 100:.0f}% of its wall time")
        if getattr(metric, "load", None) is not None:
            parts.append(f"load average {metric.load:.1f}")
        if parts:
            lines.append(f"{name}: {', '.join(parts)}")
    if disturbed is not None:
        if baseline.fastest < SHORT_CALL:
            lines.append(f"disturbed (CPU share {disturbed * 100:.0f}% < {QUIET_CPU_SHARE * 100:.0f}%), "
                         f"but calls under {format_seconds(SHORT_CALL)} have a fastest call other "
                         f"processes do not move: the limit applies")
        else:
            lines.append(f"disturbed (CPU share {disturbed * 100:.0f}% < {QUIET_CPU_SHARE * 100:.0f}%): "
                         f"slowdowns up to {allowed * 100:.0f}% are treated as noise")
    return lines


#: Frames whose counts move with locking and thread hand-over rather than with the benchmark's own
#: work (the GIL, mutexes, thread-local lookups): summed on one line after the functions that
#: changed, so that they never crowd those out.
_NOISE_FRAME = re.compile(
    r"(?:^|[:\s])(?:pthread_mutex_\w+|__pthread_mutex_\w+|pthread_cond_\w+|pthread_getspecific|"
    r"__tls_get_addr|take_gil|drop_gil|PyEval_SaveThread|PyEval_RestoreThread|"
    r"PyGILState_\w+|_PyThreadState_\w+|lll_\w+)(?:@|\b)"
)


def _collapse_brackets(text: str, opening: str, closing: str, keep_depth: int) -> str:
    """``a<b<c>, d>`` -> ``a<…>`` (keep_depth 0): nested argument lists folded beyond a depth."""
    out: list[str] = []
    depth = 0
    for char in text:
        if char == opening:
            depth += 1
            if depth == keep_depth + 1:
                out.append(opening + "…")
            elif depth <= keep_depth:
                out.append(char)
        elif char == closing and depth > 0:
            if depth == keep_depth + 1:
                out.append(closing)
            elif depth <= keep_depth:
                out.append(char)
            depth -= 1
        elif depth <= keep_depth:
            out.append(char)
    return "".join(out)


def short_function_name(name: str, width: int = 90) -> str:
    """A function name a person can read: file reduced to its base name, template and parameter
    lists folded (``direct_copy_kernel<…>(…)``), at most ``width`` characters. The full name stays
    in the baseline; this is for messages and reports only."""
    where, sep, function = name.partition(":")
    if not sep or "(" in where or "<" in where:
        where, function = "", name
    where = where.rsplit("/", 1)[-1]
    short = re.sub(r"@@?GLIBC_[0-9.]+$", "", function).replace("(anonymous namespace)", "{anon}")
    if len(short) > width // 2:
        short = _collapse_brackets(short, "<", ">", 0)
    if len(short) > width // 2:
        short = _collapse_brackets(short, "(", ")", 0)
    short = short.replace("{anon}", "(anonymous namespace)")
    if where and where != "???":
        short = f"{where}:{short}"
    return short if len(short) <= width else short[: width - 1] + "…"


def top_function_changes(current: Mapping[str, float], baseline: Mapping[str, float], top: int = 8) -> list[str]:
    """The functions whose exclusive counts per run changed most, as ``FunctionCounts.delta`` shows.

    Ranked by the absolute change per run, largest first, leaving out lock/GIL/thread-local
    frames (``_NOISE_FRAME``), which are summed on one last line; names shortened
    (:func:`short_function_name`).
    """
    changes: dict[str, float] = {}
    for name in set(current) | set(baseline):
        change = current.get(name, 0.0) - baseline.get(name, 0.0)
        if round(change) != 0:
            changes[name] = change
    noise = {name: change for name, change in changes.items() if _NOISE_FRAME.search(name)}
    ordered = sorted(((n, c) for n, c in changes.items() if n not in noise),
                     key=lambda item: (-abs(item[1]), item[0]))[:top]
    rows = [(round(change), short_function_name(name)) for name, change in ordered]
    noise_total = round(sum(noise.values()))
    if noise and noise_total:
        names = [short_function_name(n, 40) for n, _ in sorted(noise.items(), key=lambda i: (-abs(i[1]), i[0]))]
        listed = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
        rows.append((noise_total, f"in {len(noise)} lock/GIL/thread-local frame(s): {listed}"))
    width = max((len(f"{change:+,}") for change, _ in rows), default=0)
    return [f"{change:>+{width},}  {label}" for change, label in rows]


def _judge_instructions(key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
    now, then = current.instructions_per_run, baseline.instructions_per_run
    if current.number_per_run != baseline.number_per_run:
        # Counts per call depend a little on the number of calls (specialisation): never compare
        # across numbers. The adaptive rule picks the same number on every run of the same code;
        # a different one means the work per call moved across a bucket edge (or a marker changed).
        summary = (f"instructions: counted over {current.number_per_run} calls, the baseline over "
                   f"{baseline.number_per_run} (re-save the baseline)")
        verdict = Verdict(key, "instructions", NOT_COMPARABLE, then, now, limit, None, summary,
                          [f"number_per_run: {baseline.number_per_run} -> {current.number_per_run}"])
        verdict.failed = policy.strict_environment
        return verdict
    delta = now / then - 1.0 if then > 0 else 0.0
    status = REGRESSION if delta > limit else IMPROVEMENT if delta < -limit else UNCHANGED
    summary = (
        f"instructions {then:,.0f} -> {now:,.0f} per run ({format_percent(delta)}, "
        f"limit {limit * 100:g}%)"
    )
    details = []
    if status != UNCHANGED:
        changes = top_function_changes(current.functions, baseline.functions)
        if changes:
            details = ["top functions by change (instructions per run, largest |change| first; "
                       "lock/GIL frames summed last):", *changes]
    return Verdict(key, "instructions", status, then, now, limit, None, summary, details)


def _judge_ops(key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
    changed = []
    for op in sorted(set(current.ops) | set(baseline.ops)):
        now, then = current.ops.get(op, 0.0), baseline.ops.get(op, 0.0)
        relative = abs(now - then) / then if then else math.inf
        if now != then and relative > limit:
            changed.append(f"{op} {then:g} -> {now:g} per call")
    total_now, total_then = sum(current.ops.values()), sum(baseline.ops.values())
    if changed:
        status = REGRESSION if total_now >= total_then else IMPROVEMENT
        failed_anyway = True
    else:
        status, failed_anyway = UNCHANGED, False
    summary = f"ops {total_then:g} -> {total_now:g} calls per call ({len(changed)} op(s) changed)"
    verdict = Verdict(key, "ops", status, total_then, total_now, limit, None, summary, changed)
    verdict.failed = failed_anyway  # any change of op counts fails: they are exact
    return verdict


def _judge_memory(key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
    now, then = sum(current.peak_bytes.values()), sum(baseline.peak_bytes.values())
    delta = now / then - 1.0 if then > 0 else (math.inf if now > 0 else 0.0)
    status = REGRESSION if delta > limit else IMPROVEMENT if delta < -limit else UNCHANGED
    summary = f"peak memory {then:,} -> {now:,} bytes ({format_percent(delta) if math.isfinite(delta) else 'new'}, limit {limit * 100:g}%)"
    details = [
        f"{device}: {baseline.peak_bytes.get(device, 0):,} -> {current.peak_bytes.get(device, 0):,} bytes"
        for device in sorted(set(current.peak_bytes) | set(baseline.peak_bytes))
    ]
    return Verdict(key, "memory", status, float(then), float(now), limit, None, summary, details)


_JUDGES = {
    "time": _judge_time,
    "instructions": _judge_instructions,
    "ops": _judge_ops,
    "memory": _judge_memory,
}


def judge_metric(
    key: str,
    metric: str,
    current: Any,
    baseline: Any | None,
    policy: Policy,
    current_env: Environment | None = None,
    baseline_env: Environment | None = None,
) -> Verdict:
    limit = policy.limits.get(metric, DEFAULT_LIMITS[metric])
    if baseline is None:
        return Verdict(key, metric, NEW, limit=limit, summary=f"{metric}: no baseline (new benchmark)")
    differences = environment_differences(metric, current_env, baseline_env)
    if differences:
        verdict = Verdict(
            key, metric, NOT_COMPARABLE, limit=limit,
            summary=f"{metric}: baseline from a different environment ({'; '.join(differences)})",
            details=differences,
        )
        verdict.failed = policy.strict_environment
        return verdict
    verdict = _JUDGES[metric](key, current, baseline, limit, policy)
    if verdict.status == REGRESSION:
        verdict.failed = True
    elif verdict.status == IMPROVEMENT and policy.fail_stale and metric != "time":
        verdict.failed = True
    return verdict


def judge_result(result: BenchmarkResult, baseline: BenchmarkResult | None, policy: Policy) -> list[Verdict]:
    """One verdict per metric measured now; metrics only in the baseline are not judged here."""
    verdicts = []
    for metric, value in sorted(result.metrics.items()):
        base_value = baseline.metrics.get(metric) if baseline is not None else None
        verdicts.append(
            judge_metric(
                result.key, metric, value, base_value, policy,
                result.environments.get(metric),
                baseline.environments.get(metric) if baseline is not None else None,
            )
        )
    return verdicts


def missing_verdicts(
    baseline_entries: Mapping[str, BenchmarkResult], seen_keys: set[str], metrics: set[str],
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
            verdicts.append(Verdict(key, metric, MISSING, summary=f"{metric}: in the baseline, not measured in this run"))
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
        if verdict.metric == "ops" and verdict.status != NOT_COMPARABLE:
            headline = "op counts changed"
        lines.append(f"torchbench: {verdict.key}: {verdict.metric} {headline}: {verdict.summary}")
        lines.extend(f"    {line}" for line in verdict.details)
        if verdict.status == IMPROVEMENT and refresh_command:
            lines.append(f"    refresh the baselines with: {refresh_command}")
    return "\n".join(lines)
