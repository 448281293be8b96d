"""The ``gpu_time`` metric: device time per call, from the kernels' own durations (needs a GPU).

Why beside wall time: a launch-bound benchmark (small kernels, the device idle most of the call)
takes as long as the host needs to launch its kernels, and that moves with the CPU, the driver
and the process by tens of percent, so a wall-time limit cannot gate it. The time the device spent
in the call's kernels, memcpys and memsets does not move that way: it is what the GPU work costs.
The value is the device's busy time in each of many profiled calls (the union of the call's
activity spans, ``engines/profiler/kernels``): the fastest call is judged, as time mode judges its
fastest call, because a compute-bound kernel's time follows the GPU's clock, which drops under
sustained load and power limits and comes back after idling; the fastest call is the one at the
clock the device reaches in every run. The median and IQR are shown beside it. The host's span of
each call and the number of launches are kept too, so a verdict can say when a benchmark is
launch-bound.

Marker keyword ``flush_l2=True`` overwrites the L2 cache before every call (as triton's
``do_bench`` does): for benchmarks whose inputs would otherwise stay in the cache across calls.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from ..common.vocabulary import (
    IMPROVEMENT,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED,
    Policy,
    Verdict,
    format_percent,
    format_seconds,
    round_sig,
)
from .display import SecondsDisplay
from .measuring import MeasureContext
from .metric import Metric

#: Calls profiled per benchmark: as many as fit in about this many seconds of wall time...
_TARGET_SECONDS = 0.3
#: ... but at least / at most this many ...
_LEAST_CALLS, _MOST_CALLS = 20, 200
#: ... except that calls slower than this budget allows get fewer (never under 3).
_SLOW_BUDGET_SECONDS = 2.0
#: Sustained calls before profiling, so every run measures at the clock sustained work gets: at
#: least this long, and where the SM clock can be read, until it stops moving (at most the second).
_SUSTAINED_SECONDS, _SETTLE_MOST_SECONDS = 0.3, 4.0
#: SM clocks of the baseline and this run further apart than this are weighed (``clock_bounds``)...
CLOCK_TOLERANCE = 0.02
#: ... unless they are further apart than this factor, which no clock state explains (a hand-edited
#: baseline, another GPU): then the change is judged as usual, the clocks shown.
CLOCK_RATIO_LIMIT = 2.0
#: The SM clocks a baseline may hold (MHz); anything else is an error in the file.
CLOCK_RANGE_MHZ = (10.0, 10000.0)
#: Below this share of the host's time per call spent busy on the device, a benchmark is
#: launch-bound.
LAUNCH_BOUND_SHARE = 0.5
#: About how far the wall time of a launch-bound benchmark was seen to move between processes with
#: the same code (docs/design/gpu.md): a wall-time slowdown up to this, with the device time
#: unchanged, is the host's noise as far as a saved baseline can tell; beyond it, it stands.
HOST_NOISE = 0.8


@dataclasses.dataclass
class GpuTimeMetric:
    """Device time per call (the fastest of ``calls`` profiled calls, and their median), with what
    explains it."""

    device_seconds: float
    device_median: float
    device_iqr: float
    host_seconds: float
    launches: float
    calls: int
    flush_l2: bool = False
    #: The SM clock while the calls were profiled (MHz: the mean of NVML's readings at the end of
    #: the sustained calls and right after the profiled ones); None where it could not be read.
    sm_clock_mhz: float | None = None

    @property
    def busy_share(self) -> float | None:
        """The share of the host's time per call that the device was busy (None without a host
        time)."""
        return self.device_seconds / self.host_seconds if self.host_seconds > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "device_seconds": round_sig(self.device_seconds),
            "device_median": round_sig(self.device_median),
            "device_iqr": round_sig(self.device_iqr),
            "host_seconds": round_sig(self.host_seconds),
            "launches_per_call": round_sig(self.launches),
            "calls": int(self.calls),
            "flush_l2": bool(self.flush_l2),
            **({} if self.sm_clock_mhz is None else {"sm_clock_mhz": round_sig(self.sm_clock_mhz)}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GpuTimeMetric:
        flush = data.get("flush_l2", False)
        if not isinstance(flush, bool):
            raise ValueError("gpu_time.flush_l2 must be true or false")

        def number(field: str) -> float:
            value = data.get(field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"gpu_time.{field} must be a number, got {type(value).__name__}")
            try:
                number = float(value)
            except OverflowError:
                raise ValueError(
                    f"gpu_time.{field} must be a finite number >= 0, got a number too large"
                ) from None
            if not math.isfinite(number) or number < 0:
                raise ValueError(f"gpu_time.{field} must be a finite number >= 0, got {number!r}")
            return number

        calls = number("calls")
        if calls < 1 or calls != int(calls):
            raise ValueError(f"gpu_time.calls must be a whole number >= 1, got {calls!r}")
        clock = number("sm_clock_mhz") if data.get("sm_clock_mhz") is not None else None
        if clock is not None and not CLOCK_RANGE_MHZ[0] <= clock <= CLOCK_RANGE_MHZ[1]:
            raise ValueError(
                f"gpu_time.sm_clock_mhz must be between {CLOCK_RANGE_MHZ[0]:g} and "
                f"{CLOCK_RANGE_MHZ[1]:g} (MHz), got {clock!r}"
            )
        return cls(
            number("device_seconds"),
            number("device_median"),
            number("device_iqr"),
            number("host_seconds"),
            number("launches_per_call"),
            int(calls),
            flush,
            clock,
        )


def describe_launch_bound(value: GpuTimeMetric) -> str | None:
    """One line saying that ``value``'s benchmark is launch-bound, or None when it is not."""
    share = value.busy_share
    if share is None or share >= LAUNCH_BOUND_SHARE or value.launches == 0:
        return None
    overhead = max(0.0, value.host_seconds - value.device_seconds)
    return (
        f"launch-bound: the device is busy {format_seconds(value.device_seconds)} of the call's "
        f"{format_seconds(value.host_seconds)} on the host ({share * 100:.0f}%), "
        f"{value.launches:g} launches per call, about {format_seconds(overhead)} of host overhead "
        "per call; its wall time follows the host, gate it on gpu_time"
    )


_CLOCK_ADVICE = (
    "what to do: hold the GPU's clocks fixed while benchmarking (nvidia-smi --lock-gpu-clocks, "
    "as root), or judge this benchmark on the kernels mode (counts do not follow the clock)"
)


def _too_far_apart(one: float, other: float) -> bool:
    """Clocks further apart than CLOCK_RATIO_LIMIT, either way round: no clock state of one GPU."""
    return max(one, other) / min(one, other) > CLOCK_RATIO_LIMIT + 1e-9


def clock_bounds(current: GpuTimeMetric, baseline: GpuTimeMetric) -> tuple[float, float] | None:
    """The least and the most that the two runs' SM clocks alone can have multiplied the device
    time by, or None where the clocks are not weighed (either unknown, within CLOCK_TOLERANCE of
    each other, or further apart than CLOCK_RATIO_LIMIT).

    A kernel's device time follows the SM clock at most in proportion (a kernel limited by the SM
    alone) and at least not at all (one waiting on memory): a bf16 matmul on an H200 at its boost
    clock and at its power limit, and a copy, docs/design/gpu.md. So the same code measured at
    another clock reads anywhere between 1 and the clocks' ratio."""
    if current.sm_clock_mhz is None or baseline.sm_clock_mhz is None:
        return None
    if current.device_seconds == 0 and baseline.device_seconds == 0:
        return None  # no device work: the clock has nothing to act on
    ratio = baseline.sm_clock_mhz / current.sm_clock_mhz  # above 1: this run's clock is lower
    if max(ratio, 1.0 / ratio) - 1.0 <= CLOCK_TOLERANCE + 1e-9 or _too_far_apart(ratio, 1.0):
        return None
    return min(1.0, ratio), max(1.0, ratio)


def weigh_clocks(factor: float, limit: float, low: float, high: float) -> str | None:
    """The status of a device time multiplied by ``factor`` where the clocks alone multiply it by
    between ``low`` and ``high``: the code's own factor lies between ``factor / high`` and
    ``factor / low``. A regression where even the least of it exceeds the limit; None (not
    judged) where only the most of it does, since a regression beyond the limit may hide there;
    an improvement where even the most of it is below the limit; else unchanged. Only a possible
    regression is left unjudged: a possible improvement left unclaimed fails nothing."""
    least, most = factor / high, factor / low
    if least > 1.0 + limit:
        return REGRESSION
    if most > 1.0 + limit:
        return None
    if most < 1.0 - limit:
        return IMPROVEMENT
    return UNCHANGED


class GpuTime(SecondsDisplay, Metric):
    name = "gpu_time"
    value_type = GpuTimeMetric
    help = "device time per call from the kernels' durations (needs a GPU)"
    default_limit = 0.05
    # The device, its driver and libraries choose the kernels; the torch build and CUDA version too.
    comparability_facts = ("torch", "torch_git", "torch_cuda", "gpu")
    count_fields = ("calls",)
    table_title = "device time per call, fastest (median \u00b1 IQR) ({unit})"
    # A wall-time failure of the same benchmark: the device's side of it, and for a launch-bound
    # benchmark whose device time held, noise rather than a failure (excuse_other).
    explains_metrics = ("time",)
    excuses_metrics = ("time",)

    def unavailable(self) -> str | None:
        from ..engines import profiler

        if profiler.cuda_usable():
            return None
        return (
            "--bench-mode=gpu_time measures device time, but there is no CUDA device here "
            "(torch.cuda.is_available() is False); run it on a machine with a GPU, or leave "
            "'gpu_time' out"
        )

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> GpuTimeMetric:
        from ..engines.profiler import kernels

        flush_l2 = bool(getattr(context.options, "flush_l2", False))
        if context.before_region is not None:
            context.before_region()
        each = getattr(context, "before_each", None)  # pedantic's setup: fresh arguments per call
        call: Callable[[], Any] = fn if each is None else (lambda: (each(), fn()))
        per_call = kernels.seconds_per_call(call)
        if per_call < _SUSTAINED_SECONDS:
            before = kernels.settle(call, _SUSTAINED_SECONDS, _SETTLE_MOST_SECONDS)
        else:  # a call this slow is sustained work itself
            before = kernels.sm_clock_mhz()
        readings: list[
            int | None
        ] = []  # the clock right after the profiled calls, before the profiler stops
        # As many calls as fit in _TARGET_SECONDS; for slow calls (a second and more) at least 3,
        # so a benchmark costs a few of its calls, not _LEAST_CALLS of them.
        least = max(
            3,
            min(
                _LEAST_CALLS, int(_SLOW_BUDGET_SECONDS / per_call) if per_call > 0 else _LEAST_CALLS
            ),
        )
        calls = max(
            least,
            min(_MOST_CALLS, int(_TARGET_SECONDS / per_call) if per_call > 0 else _MOST_CALLS),
        )
        profile = kernels.measure_device(
            fn,
            iterations=calls,
            warmup=1,
            before_region=context.before_region,
            before_each=each,
            flush_l2=flush_l2,
            after_calls=lambda: readings.append(kernels.sm_clock_mhz()),
        )
        device = [ns / 1e9 for ns in profile.device_ns()]
        median, iqr = kernels.median_and_iqr(device)
        host, _ = kernels.median_and_iqr([ns / 1e9 for ns in profile.host_ns()])
        launches = sum(profile.kernel_counts().values())
        after = readings[0] if readings else None
        clock = (before + after) / 2 if before is not None and after is not None else None
        return GpuTimeMetric(min(device), median, iqr, host, launches, calls, flush_l2, clock)

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        now, then = current.device_seconds, baseline.device_seconds
        if current.flush_l2 != baseline.flush_l2:
            # A cold cache against a warm one says nothing about the code: not comparable, as a
            # changed environment is (strict mode fails it).
            return Verdict(
                key,
                self.name,
                NOT_COMPARABLE,
                then,
                now,
                limit,
                None,
                f"gpu_time: measured with flush_l2={current.flush_l2}, the baseline with "
                f"flush_l2={baseline.flush_l2} (re-save the baseline)",
                [f"flush_l2: {baseline.flush_l2} -> {current.flush_l2}"],
            )
        if then > 0:
            delta = now / then - 1.0
        else:
            delta = math.inf if now > 0 else 0.0
        status = REGRESSION if delta > limit else IMPROVEMENT if delta < -limit else UNCHANGED
        clocks = clock_bounds(current, baseline) if math.isfinite(delta) else None
        weighed = weigh_clocks(1.0 + delta, limit, *clocks) if clocks is not None else status
        shown = format_percent(delta) if math.isfinite(delta) else "new"
        summary = (
            f"gpu_time {format_seconds(then)} -> {format_seconds(now)} per call "
            f"({shown}, limit {limit * 100:g}%; fastest of {current.calls} calls, median "
            f"{format_seconds(baseline.device_median)} -> {format_seconds(current.device_median)})"
        )
        details = [
            f"launches per call {baseline.launches:g} -> {current.launches:g}; host span per call "
            f"{format_seconds(baseline.host_seconds)} -> {format_seconds(current.host_seconds)}"
        ]
        if then == 0 and now == 0:
            details.append("no device work: the call launches no kernel, memcpy or memset")
        spread = current.device_iqr / current.device_median if current.device_median > 0 else 0.0
        if spread > limit / 2:
            details.append(
                f"noisy: the device time's IQR is {spread * 100:.1f}% of its median "
                f"over {current.calls} calls, against a {limit * 100:g}% limit"
            )
        bound = describe_launch_bound(current)
        if bound:
            details.append(bound)
        if weighed is not None and weighed != status:
            summary += f"; {weighed} once the SM clocks are weighed"
        if current.sm_clock_mhz is not None and baseline.sm_clock_mhz is not None:
            clock_line = f"SM clock {baseline.sm_clock_mhz:.0f} -> {current.sm_clock_mhz:.0f} MHz"
            if clocks is not None:
                reach = format_percent((clocks[1] if clocks[1] > 1.0 else clocks[0]) - 1.0)
                clock_line += f": the clock alone can change device time by 0 to {reach}"
            elif _too_far_apart(baseline.sm_clock_mhz, current.sm_clock_mhz):
                clock_line += ": too far apart for a clock state of one GPU; judged as measured"
            details.insert(0, clock_line)
        elif (current.sm_clock_mhz is None) != (baseline.sm_clock_mhz is None):
            details.insert(
                0,
                "SM clock not recorded in "
                + ("this run" if current.sm_clock_mhz is None else "the baseline")
                + " (NVML: pip install nvidia-ml-py)",
            )
        if weighed is None:
            return Verdict(
                key,
                self.name,
                NOT_COMPARABLE,
                then,
                now,
                limit,
                None,
                f"gpu_time {format_seconds(then)} -> {format_seconds(now)} per call ({shown}), not "
                f"judged: the GPU's SM clock was {current.sm_clock_mhz:.0f} MHz, against "
                f"{baseline.sm_clock_mhz:.0f} MHz in the baseline, and a slowdown beyond the "
                f"{limit * 100:g}% limit may hide behind that",
                [*details, _CLOCK_ADVICE],
            )
        return Verdict(key, self.name, weighed, then, now, limit, None, summary, details)

    def explain_other(self, current: Any, baseline: Any) -> list[str]:
        if current.flush_l2 != baseline.flush_l2:
            return []
        then, now = baseline.device_seconds, current.device_seconds
        change = format_percent(now / then - 1.0) if then > 0 else "new"
        return [
            f"device time per call {format_seconds(then)} -> {format_seconds(now)} ({change}, "
            f"gpu_time); launches per call {baseline.launches:g} -> {current.launches:g}"
        ]

    def excuse_other(
        self, failed: Verdict, own: Verdict, current: Any, baseline: Any
    ) -> str | None:
        # Launch-bound on both sides (a host slowdown can make a benchmark launch-bound), the same
        # launches per call, and a wall-time slowdown within what the host's noise was seen to do.
        # failed.delta is against the latest saved run's fastest block; time fails on the slowest
        # saved run, so the delta is at least what failed, and the bound errs on the strict side.
        if describe_launch_bound(current) is None or describe_launch_bound(baseline) is None:
            return None
        if current.launches != baseline.launches or current.flush_l2 != baseline.flush_l2:
            return None
        delta = failed.delta
        if delta is None or delta > HOST_NOISE:
            return None
        share = current.busy_share or 0.0
        return (
            f"launch-bound, device time unchanged (gpu_time): the device busy {share * 100:.0f}% "
            f"of the call's {format_seconds(current.host_seconds)} on the host and the launches "
            "per call the same, so the wall-time change is the host's, whose speed moved such "
            f"benchmarks by up to {HOST_NOISE * 100:.0f}% between processes with the same code. A "
            "slowdown of the host's own code up to that passes here too: gate the host's work on "
            "ops or calls, or judge wall time against a base measured alternately in the same job "
            "(--bench-base=measure with --bench-rounds of 2 or more)"
        )

    def headline(self, value: Any) -> float:
        return value.device_seconds  # type: ignore[no-any-return]

    def cell(self, value: Any, scale: float) -> str:
        text = (
            f"{value.device_seconds / scale:.4g} ({value.device_median / scale:.4g} "
            f"\u00b1 {value.device_iqr / scale:.2g})"
        )
        return text + (" (launch-bound)" if describe_launch_bound(value) else "")

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        return [
            (f"{prefix}gpu_time.device_seconds", round_sig(value.device_seconds)),
            (f"{prefix}gpu_time.host_seconds", round_sig(value.host_seconds)),
            (f"{prefix}gpu_time.launches_per_call", round_sig(value.launches)),
        ]
