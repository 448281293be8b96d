"""The ``time`` metric: wall time per call, measured with torch.utils.benchmark (engines/walltime).

A benchmark regressed when its median per-call time is more than the limit (default 10%) above
the baseline's AND a one-sided Mann-Whitney U test on the raw replicate times gives p < alpha
(0.001): the ratio alone flags noise on a busy machine, the test alone differences too small to
matter (asv uses the same conjunction). Raw replicate times are kept for that reason.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping, Sequence

from ..statistics import mann_whitney_greater
from ..text import finite, safe_number
from ..vocabulary import (
    IMPROVEMENT, REGRESSION, UNCHANGED, Distribution, Heading, Plot, Policy, Verdict, format_percent,
    format_seconds, round_sig,
)
from .base import MeasureContext, Metric


@dataclasses.dataclass
class TimeMetric:
    """Wall time: the raw replicate block times are kept, because significance tests need samples."""

    number_per_run: int
    raw_times: list[float]  # seconds per block of ``number_per_run`` calls, as Measurement.raw_times
    measurement: Any = None  # torch.utils.benchmark.Measurement, when measured in this process

    @property
    def times(self) -> list[float]:
        """Seconds per single call, one value per replicate."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        import numpy as np

        return float(np.median(self.times))

    @property
    def iqr(self) -> float:
        import numpy as np

        q1, q3 = np.quantile(self.times, [0.25, 0.75])
        return float(q3 - q1)

    @classmethod
    def from_measurement(cls, measurement: Any) -> TimeMetric:
        return cls(
            number_per_run=int(measurement.number_per_run),
            raw_times=[float(t) for t in measurement.raw_times],
            measurement=measurement,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "number_per_run": self.number_per_run,
            "median": round_sig(self.median),
            "iqr": round_sig(self.iqr),
            "raw_times": [round_sig(t) for t in self.raw_times],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TimeMetric:
        raw = data["raw_times"]
        number = int(data["number_per_run"])
        if not isinstance(raw, list) or not raw or number < 1:
            raise ValueError("time needs a non-empty raw_times list and number_per_run >= 1")
        return cls(number_per_run=number, raw_times=[float(t) for t in raw])


def time_spec(options: Any, naming: Any, min_run_time: float | None = None) -> Any:
    """The time engine's settings from the marker (pytest-benchmark's keywords mapped in) and the
    session's ``--bench-min-run-time``."""
    from ..engines import walltime

    defaults = walltime.TimeSpec()
    return walltime.TimeSpec(
        label=naming.label,
        sub_label=naming.sub_label,
        description=naming.description,
        num_threads=options.num_threads,
        threshold=options.threshold,
        min_run_time=options.min_run_time or min_run_time or defaults.min_run_time,
        max_run_time=options.max_run_time,
        block_time=max(defaults.block_time, options.min_time or 0.0),
        min_replicates=max(defaults.min_replicates, options.min_rounds or 0),
        timer=options.timer,
    )


def time_warm_up(fn: Callable[[], Any], max_calls: int | None, max_time: float) -> None:
    """pytest-benchmark's ``warmup=True``: call ``fn`` up to ``warmup_iterations`` times (default
    100,000, as there) but for no longer than ``max_time``, before timing."""
    import time

    deadline = time.perf_counter() + max_time
    for _ in range(100_000 if max_calls is None else max_calls):
        fn()
        if time.perf_counter() >= deadline:
            break


_TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def _sig_digits(median: float, iqr: float, n: int) -> int:
    """As Measurement.significant_figures: the digits the median's confidence interval supports."""
    if not finite(median) or not finite(iqr) or median <= 0:
        return 2
    ci = max(1.645 * (iqr / 1.349) / math.sqrt(max(n, 1)), 25e-9)
    ratio = median / ci
    if not finite(ratio):
        return 4
    return min(max(int(math.floor(math.log10(ratio))), 2), 4)


def _trim(value: float, digits: int) -> str:
    """``value`` with ``digits`` significant digits; NaN, inf and huge values never raise."""
    if not finite(value):
        return safe_number(value)
    if value == 0:
        return "0"
    magnitude = int(math.floor(math.log10(abs(value))))
    if magnitude >= 15:
        return f"{value:.{max(digits - 1, 0)}e}"
    decimals = max(digits - magnitude - 1, 0)
    return f"{round(value, decimals):.{decimals}f}"


class Time(Metric):
    name = "time"
    value_type = TimeMetric
    help = "wall time, default"
    default_limit = 0.10
    comparability_facts = (
        "python", "python_implementation", "torch", "torch_git", "torch_cuda", "cpu_model",
        "cpu_capability", "machine", "num_threads", "gpu",
    )
    seeded = False  # time mode never seeds: it measures the code as users run it
    excludes = ("instructions",)
    excludes_reason = "wall time under valgrind means nothing"
    stale_fails = False  # wall time is never exact
    positive_fields = ("raw_times", "median")
    table_title = "median \u00b1 IQR per call, {unit}"

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> TimeMetric:
        from ..engines import walltime

        spec = time_spec(context.options, context.naming, context.min_run_time)
        if context.options.time_warmup:
            time_warm_up(fn, context.options.warmup_iterations, spec.max_run_time)
        return TimeMetric.from_measurement(walltime.measure(fn, spec))

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        now, then = current.median, baseline.median
        delta = now / then - 1.0 if then > 0 else 0.0
        if delta > limit:
            p_value = mann_whitney_greater(current.times, baseline.times)
            significant = p_value < policy.alpha
            status = REGRESSION if significant else UNCHANGED
        elif delta < -limit:
            p_value = mann_whitney_greater(baseline.times, current.times)
            significant = p_value < policy.alpha
            status = IMPROVEMENT if significant else UNCHANGED
        else:
            p_value, significant, status = None, False, UNCHANGED
        summary = (
            f"time {format_seconds(then)} -> {format_seconds(now)} ({format_percent(delta)}, "
            f"limit {limit * 100:g}%"
        )
        if p_value is not None:
            summary += (
                f", Mann-Whitney p={p_value:.2g} {'<' if significant else '>='} {policy.alpha:g}, "
                f"n={len(current.raw_times)}/{len(baseline.raw_times)}"
            )
        summary += ")"
        return Verdict(key, "time", status, then, now, limit, p_value, summary)

    def headline(self, value: Any) -> float:
        return value.median  # type: ignore[no-any-return]

    def format_value(self, number: float) -> str:
        return format_seconds(number)

    def table_scale(self, headlines: Sequence[float]) -> tuple[str, float]:
        smallest = min((v for v in headlines if finite(v) and v > 0), default=1.0)
        for unit, scale in _TIME_UNITS:
            if smallest >= scale:
                return unit, scale
        return "ns", 1e-9

    def cell(self, value: Any, scale: float) -> str:
        median, iqr = value.median, value.iqr
        digits = _sig_digits(median, iqr, len(value.raw_times))
        return f"{_trim(median / scale, digits)} \u00b1 {_trim(iqr / scale, 2)}"

    def cell_delta(self, delta: float) -> str:
        return f" ({delta * 100:+.1f}%)"

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        return [
            (f"{prefix}time.median_s", round_sig(value.median)),
            (f"{prefix}time.iqr_s", round_sig(value.iqr)),
            (f"{prefix}time.replicates", len(value.raw_times)),
            (f"{prefix}time.number_per_run", value.number_per_run),
        ]

    def figures(self, current: Any, baseline: Any | None, changed: bool, top: int) -> list[Plot]:
        return [[Heading("wall time per call: baseline vs current"),
                 Distribution(current.times, baseline.times if baseline is not None else None)]]
