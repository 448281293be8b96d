"""The ``time`` metric: wall time per call, from torch.utils.benchmark (engines/walltime): its value
(raw replicate times, CPU share, the fastest CPU time per call, load, the CPU count, the reference
workload's time), how it is measured and shown. How it is judged (the fastest call against a band
of saved runs, the machine's load, speed and state, alternated rounds, the fresh-process
confirmation) is the time gate's: ``metrics/time_gate.py`` and docs/design/time-gate.md.
"Fastest" ignores the fastest 2% of blocks (see low_quantile), so one lucky block cannot set it.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..common.text import finite, safe_number
from ..common.vocabulary import (
    Distribution,
    Heading,
    Plot,
    Policy,
    Verdict,
    round_sig,
)
from .display import SecondsDisplay
from .measuring import MeasureContext
from .metric import Metric
from .time_gate import confirm_time, judge_time, judge_time_rounds


@dataclasses.dataclass
class TimeMetric:
    """Wall time: the raw replicate block times are kept, because significance tests need samples.

    ``cpu_share`` (the measuring thread's CPU time over the measurement's wall time) and ``load``
    (the load average) say how disturbed the machine was, so a verdict can say so. ``history``
    holds the fastest per-call times of earlier saved runs of the same benchmark in the same
    environment (newest last): the spread between runs, which replicates of one run cannot show.
    """

    number_per_run: int
    raw_times: list[
        float
    ]  # seconds per block of ``number_per_run`` calls, as Measurement.raw_times
    measurement: Any = None  # torch.utils.benchmark.Measurement, when measured in this process
    cpu_share: float | None = None
    load: float | None = None
    history: list[float] = dataclasses.field(default_factory=list)
    #: This thread's CPU time per call in the block that gave the fastest call (see low_quantile);
    #: None where CPU time says nothing (threads, GPU) or it was not measured.
    cpu_fastest: float | None = None
    #: The machine's speed beside this measurement (engines/reference.py): the fastest seconds per
    #: call of a fixed reference workload, ``{"probe": version, "compute": s}``.
    reference: dict[str, float] | None = None
    #: Measured in turns with the other side of an alternated round (engines/duet.py): how many
    #: times this measurement handed the CPU over. None: measured alone.
    turns: int | None = None
    #: The machine's CPU count beside ``load``, so that the load can be read per core (the
    #: machine's state: see machine_state_difference). None: not recorded (older baselines).
    cpus: int | None = None
    #: The mean count of the machine's runnable threads during the measurement, this process's
    #: included (engines/walltime.py, RunnableSampler); None: not recorded.
    runnable: float | None = None

    #: How many earlier saved runs a baseline keeps.
    HISTORY = 4

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

    @property
    def fastest(self) -> float:
        """The fastest replicate block, per call, ignoring the fastest 2% (``low_quantile``): what
        the gate compares (other processes only ever add time, so this is the least disturbed
        estimate of the code's own speed)."""
        return low_quantile(self.times)

    @classmethod
    def from_measurement(cls, measurement: Any) -> TimeMetric:
        metadata = getattr(measurement, "metadata", None) or {}
        number = int(measurement.number_per_run)
        cpu_times = metadata.get("cpu_times")
        raw = [float(t) for t in measurement.raw_times]
        cpu_fastest = None
        if (
            cpu_times
            and len(cpu_times) == len(raw)
            and all(finite(float(t)) and t > 0 for t in cpu_times)
        ):
            # the CPU time of the block whose wall time is the fastest call: the least disturbed one
            # (the lowest CPU time would pick, for code that waits on a clock, the most preempted)
            order = sorted(range(len(raw)), key=raw.__getitem__)
            cpu_fastest = float(cpu_times[order[low_quantile_index(len(raw))]]) / number
        return cls(
            number_per_run=number,
            raw_times=[float(t) for t in measurement.raw_times],
            measurement=measurement,
            cpu_share=_optional_float(metadata.get("cpu_share")),
            load=_optional_float(metadata.get("load")),
            cpu_fastest=cpu_fastest,
            reference=_reference_or_none(metadata.get("reference")),
            turns=_optional_count(metadata.get("turns")),
            cpus=_optional_count(metadata.get("cpus")),
            runnable=_optional_float(metadata.get("runnable")),
        )

    def saved_over(self, previous: TimeMetric) -> TimeMetric:
        """This run saved where ``previous`` was (same environment): keep the earlier runs' fastest.

        Saving the very same samples again (the same run saved twice) is not a new run: the
        history stays as it was, so saving twice writes the same bytes.
        """
        if [round_sig(t) for t in self.raw_times] == [round_sig(t) for t in previous.raw_times]:
            return dataclasses.replace(self, history=list(previous.history))
        history = [*previous.history, round_sig(previous.fastest)][-self.HISTORY :]
        return dataclasses.replace(self, history=history)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "number_per_run": self.number_per_run,
            "median": round_sig(self.median),
            "iqr": round_sig(self.iqr),
            "raw_times": [round_sig(t) for t in self.raw_times],
        }
        if self.cpu_share is not None:
            data["cpu_share"] = round(self.cpu_share, 3)
        if self.load is not None:
            data["load"] = round(self.load, 2)
        if self.history:
            data["history"] = [round_sig(t) for t in self.history]
        if self.cpu_fastest is not None:
            data["cpu_fastest"] = round_sig(self.cpu_fastest)
        if self.reference is not None:
            data["reference"] = {
                name: (value if name == "probe" else round_sig(value))
                for name, value in self.reference.items()
            }
        if self.turns is not None:
            data["turns"] = self.turns
        if self.cpus is not None:
            data["cpus"] = self.cpus
        if self.runnable is not None:
            data["runnable"] = round(self.runnable, 2)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TimeMetric:
        raw = data["raw_times"]
        number = int(data["number_per_run"])
        if not isinstance(raw, list) or not raw or number < 1:
            raise ValueError("time needs a non-empty raw_times list and number_per_run >= 1")
        history = data.get("history", [])
        if not isinstance(history, list) or not all(
            isinstance(t, (int, float)) and t > 0 for t in history
        ):
            raise ValueError("time.history must be a list of positive times")
        cpu_fastest = _optional_float(data.get("cpu_fastest"))
        if cpu_fastest is not None and not (finite(cpu_fastest) and cpu_fastest > 0):
            raise ValueError("time.cpu_fastest must be a positive time")
        reference = data.get("reference")
        if (
            reference is not None
            and _reference_or_none(reference) is None
            and not _other_probe(reference)
        ):
            raise ValueError(
                'time.reference must be {"probe": version, "compute": seconds per call}'
            )
        turns = data.get("turns")
        if turns is not None and (
            isinstance(turns, bool) or not isinstance(turns, int) or turns < 0
        ):
            raise ValueError("time.turns must be a count (a whole number >= 0)")
        return cls(
            number_per_run=number,
            raw_times=[float(t) for t in raw],
            cpu_share=_optional_float(data.get("cpu_share")),
            load=_optional_float(data.get("load")),
            history=[float(t) for t in history],
            cpu_fastest=cpu_fastest,
            reference=_reference_or_none(reference),
            turns=turns,
            cpus=_optional_count(data.get("cpus")),  # Time.count_fields checked it
            runnable=_optional_float(data.get("runnable")),
        )


def low_quantile(values: Sequence[float]) -> float:
    """The k-th smallest value, k = 1 + len // 50: the fastest block for fewer than 50 blocks, the
    2nd percentile beyond. Why not simply the fastest: one block can be lucky (a timer tick, a
    fast path hit once), and with hundreds of blocks the 2nd percentile is as undisturbed
    (measured at load 4-6: A/A spreads of the minimum and the 2nd percentile were the same; the
    10th percentile was moved more by load)."""
    ordered = sorted(values)
    return ordered[low_quantile_index(len(ordered))]


def low_quantile_index(count: int) -> int:
    """Where low_quantile looks in ``count`` sorted values."""
    return min(count // 50, max(count - 1, 0))


def _reference_or_none(value: Any) -> dict[str, float] | None:
    """A well-formed reference of this version's probe (engines/reference.py), or None."""
    from ..engines.reference import PROBE

    if (
        not isinstance(value, Mapping)
        or set(value) != {"probe", "compute"}
        or value["probe"] != PROBE
    ):
        return None
    compute, probe = value["compute"], value["probe"]
    if (
        isinstance(compute, bool)
        or not isinstance(compute, (int, float))
        or not (finite(float(compute)) and compute > 0)
    ):
        return None
    if isinstance(probe, bool) or not isinstance(probe, int):
        return None
    return {"probe": probe, "compute": float(compute)}


def _other_probe(value: Any) -> bool:
    """A reference of another probe version (a later release's workload, whatever its fields): not
    an error, just nothing to compare with (PROBE is saved for exactly this)."""
    from ..engines.reference import PROBE

    probe = value.get("probe") if isinstance(value, Mapping) else None
    return isinstance(probe, int) and not isinstance(probe, bool) and probe != PROBE


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _optional_count(value: Any) -> int | None:
    return None if value is None else int(value)


def time_spec(
    options: Any, naming: Any, min_run_time: float | None = None, share: float = 1.0
) -> Any:
    """The time engine's settings from the marker (pytest-benchmark's keywords mapped in) and the
    session's ``--bench-min-run-time``; ``share`` of the least and the most run time
    (``MeasureContext.share``)."""
    from ..engines import walltime

    defaults = walltime.TimeSpec()
    asked = options.min_run_time or min_run_time  # "at least this long" (marker, then session)
    most = max(options.max_run_time, asked) if asked else options.max_run_time
    return walltime.TimeSpec(
        label=naming.label,
        sub_label=naming.sub_label,
        description=naming.description,
        num_threads=options.num_threads,
        threshold=options.threshold,
        min_run_time=(asked or defaults.min_run_time) * share,
        max_run_time=most * share,
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


class Time(SecondsDisplay, Metric):
    name = "time"
    value_type = TimeMetric
    help = "wall time, default"
    default_limit = 0.10
    comparability_facts = (
        "python",
        "python_implementation",
        "torch",
        "torch_git",
        "torch_cuda",
        "cpu_model",
        "cpu_capability",
        "machine",
        "num_threads",
        "gpu",
        "huge_pages",
        "time_blocks",
    )
    seeded = False  # time mode never seeds: it measures the code as users run it
    excludes = {"instructions": "wall time under valgrind means nothing"}
    stale_fails = False  # wall time is never exact
    alternates = True  # against a measured base: rounds of base and head, judged in pairs
    positive_fields = ("raw_times", "median", "history", "reference")
    count_fields = ("number_per_run", "cpus")
    number_fields = (
        "raw_times",
        "median",
        "iqr",
        "history",
        "cpu_share",
        "load",
        "cpu_fastest",
        "runnable",
    )
    fraction_fields = ("cpu_share",)
    table_title = "median \u00b1 IQR per call, {unit}"

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> TimeMetric:
        from ..engines import walltime

        spec = time_spec(context.options, context.naming, context.min_run_time, context.share)
        fixed = context.rounds
        if fixed is not None:  # benchmark.pedantic: the author's rounds, no calibration
            return TimeMetric.from_measurement(
                walltime.measure_rounds(
                    fixed.target,
                    fixed.arguments,
                    rounds=fixed.rounds,
                    iterations=fixed.iterations,
                    warmup_rounds=fixed.warmup_rounds,
                    teardown=fixed.teardown,
                    spec=spec,
                )
            )
        if context.options.time_warmup:
            time_warm_up(fn, context.options.warmup_iterations, spec.max_run_time)
        return TimeMetric.from_measurement(walltime.measure(fn, spec))

    def confirm(self, suspect: Verdict, again: Verdict | None, problem: str | None) -> Verdict:
        return confirm_time(suspect, again, problem)

    def judge_rounds(
        self,
        key: str,
        rounds: Sequence[tuple[Any, Any]],
        limit: float,
        policy: Policy,
        strict: bool = False,
    ) -> Verdict:
        return judge_time_rounds(key, rounds, limit, strict)

    def prepare_process(self) -> None:
        from ..engines import walltime

        walltime.prefer_huge_pages()

    def environment_facts(self) -> Mapping[str, str]:
        from ..engines import walltime

        # huge pages or not, and the way blocks are timed, moved memory-bound calls: not
        # comparable across either (docs/design/time-gate.md)
        return {"huge_pages": walltime.huge_pages_fact(), "time_blocks": walltime.BLOCKS}

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        return judge_time(key, current, baseline, limit, policy)

    def headline(self, value: Any) -> float:
        return value.median  # type: ignore[no-any-return]

    def cell(self, value: Any, scale: float) -> str:
        median, iqr = value.median, value.iqr
        digits = _sig_digits(median, iqr, len(value.raw_times))
        return f"{_trim(median / scale, digits)} \u00b1 {_trim(iqr / scale, 2)}"

    def judged_cell(self, value: Any, scale: float) -> str | None:
        with warnings.catch_warnings():  # a hand-edited NaN sample: shown as nan, not warned about
            warnings.simplefilter("ignore", RuntimeWarning)
            fastest, iqr = value.fastest, value.iqr
        return f"fastest {_trim(fastest / scale, _sig_digits(fastest, iqr, len(value.raw_times)))}"

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        return [
            (f"{prefix}time.median_s", round_sig(value.median)),
            (f"{prefix}time.iqr_s", round_sig(value.iqr)),
            (f"{prefix}time.replicates", len(value.raw_times)),
            (f"{prefix}time.number_per_run", value.number_per_run),
        ]

    def figures(self, current: Any, baseline: Any | None, changed: bool, top: int) -> list[Plot]:
        return [
            [
                Heading("wall time per call: baseline vs current"),
                Distribution(current.times, baseline.times if baseline is not None else None),
            ]
        ]
