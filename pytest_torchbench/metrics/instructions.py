"""The ``instructions`` metric: Callgrind instruction counts of the measured region, per call.

Counts are deterministic, so no statistics: more than the limit (default 1%) above the baseline
is a regression, more than the limit below a stale baseline. The failure names the functions
whose exclusive counts changed most (``FunctionCounts.delta`` of baseline vs current), which also
explain a regression of any other metric of the same benchmark.

Instructions mode lives here and in its engine (``engines/callgrind``): the engine launches the
counted workers (``worker.CallgrindLaunch``: valgrind's command line, the pinned and padded
environment, the deterministic allocator, reading a dump natively in the controller), hands them
the baseline's plans (``plans.py``) and shortens C++ names (``names.py``); here are counting one
region inside such a worker (:func:`count_region_for_controller`), what a dump's counts make
(:class:`InstructionsLaunch`), the fingerprint (:meth:`Instructions.environment_facts`) and the
judging and showing of the counts. The pytest glue that runs
tests in launched xdist workers (``pytest/workers.py``) is generic: it only asks
:meth:`Instructions.worker_launch`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..common.text import finite, safe_number
from ..common.vocabulary import (
    IMPROVEMENT,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED,
    Bars,
    Heading,
    Plot,
    Policy,
    Verdict,
    format_percent,
    round_sig,
)
from ..engines.callgrind.names import NOISE_FRAME, short_function_name
from ..engines.callgrind.plans import take_test_plan
from ..engines.callgrind.worker import TYPE_CACHE_MISS, CallgrindLaunch, DumpCounts, dump_dir
from .measuring import MeasureContext
from .metric import Metric

#: Bump when a change to the counting procedure moves counts (see Instructions.environment_facts);
#: what each bump changed is listed in CHANGELOG.md.
COUNTING_METHOD = "per-region-toggle-in-loop/12"

#: Beyond this relative change, a count over another number of calls than its baseline's is
#: judged, not "not comparable": the number moves a count per call by about a percent, while a
#: baseline's plan is not followed only for work that changed by about twice or more (it is then
#: more than one bucket away, collect.plan_followed), which a re-save would otherwise accept.
NUMBER_EFFECT_BOUND = 0.5


def count_region_for_controller(
    fn: Callable[[], Any],
    *,
    number: int | None,
    warmup: int | None,
    num_threads: int,
    context: MeasureContext | None = None,
    plan: tuple[int, int] | None = None,
) -> InstructionsMetric:
    """Count ``fn`` and hand the unread dump to the controller (``InstructionsMetric.dump``).

    Why: reading a dump (a pure-Python parse) under valgrind was most of the marginal cost of a
    small benchmark; the controller reads it natively, many times faster
    (docs/design/measurements.md, "Counting in the worker").
    ``number``/``warmup`` None: chosen from a probe call (``callgrind.plan_calls``), or the
    baseline's ``plan`` (``callgrind.count_region``). ``context``: its hooks run around the calls.
    """
    from ..engines.callgrind import collect

    hooks = None
    if context is not None:
        # Seeded once, before the warm-up (see callgrind.count_region); pedantic's setup before
        # both.
        hooks = collect.RegionHooks(
            before_warmup=context.seed,
            setup=context.setup,
            before_each=context.before_each,
        )
    region = collect.count_region(
        fn,
        number=number,
        warmup=warmup,
        out_dir=dump_dir(),
        num_threads=num_threads,
        hooks=hooks,
        plan=plan,
    )
    return InstructionsMetric.pending(str(region.dump), region.number, region.warmup)


_RECURSION_SUFFIX = re.compile(r"'\d+$")
_ANONYMOUS_CODE = re.compile(r"^\?\?\?:0x[0-9a-fA-F]+$")
_BUILD_PREFIX = re.compile(r"^/tmp/python-build\.[^/]+/Python-[^/]+/(?:\./)?")


def _stable_function_name(name: str) -> str:
    """Names that mean the same code in every run: no recursion depth (``f'2``), no address of
    anonymous code (an mmap'd trampoline lands elsewhere with another history), no build dir."""
    name = _RECURSION_SUFFIX.sub("", name)
    name = _BUILD_PREFIX.sub("", name)
    return "???:<anonymous code>" if _ANONYMOUS_CODE.match(name) else name


@dataclasses.dataclass
class InstructionsMetric:
    """Callgrind counts of the measured region; ``functions`` are exclusive counts per run.

    ``number_per_run`` (and ``warmup``) are recorded: counts per call depend a little on the
    number of calls, so a baseline made with another number is not comparable. ``dump`` is set
    only between a counted worker and its controller: the worker hands over the unread Callgrind
    dump and the controller, running natively, reads it (:meth:`from_counts`).
    """

    instructions_per_run: float
    number_per_run: int
    functions: dict[str, float]  # standardized function name -> exclusive instructions per run
    stats: Any = None  # torch CallgrindStats, when measured in this process
    warmup: int | None = None
    dump: str | None = None
    #: Instructions per run spent in type-cache misses (the inclusive cost of TYPE_CACHE_MISS),
    #: left out of ``instructions_per_run`` (but not out of ``functions``, which stay as counted).
    type_cache_misses: float = 0.0
    #: Instructions per run of the type-cache lookups' own code (TYPE_CACHE_LOOKUPS), left out too.
    type_cache_lookups: float = 0.0

    #: Functions kept in baselines: the largest, until they cover this share of the total, and
    #: at most MAX_FUNCTIONS of them; the rest is summed under OTHER. Why: a baseline entry with
    #: every function of a torch call is large (hundreds of long C++ names); the functions that
    #: change when code changes are nearly always among the largest, and a change elsewhere still
    #: shows as a change of OTHER (docs/design/measurements.md, "Counting in the worker").
    COVERAGE = 0.95
    MAX_FUNCTIONS = 64
    OTHER = "[other functions]"

    # torch's CallgrindStats.as_standardized, as plain regular expressions (same order), so that a
    # dump read without torch (the controller) gets the very same names.
    _STANDARDIZE = (
        (re.compile(r"^.+build/\.\./"), "build/../"),
        (re.compile(r"^.+/" + re.escape("build/aten/")), "build/aten/"),
        (re.compile(r"^.+/" + re.escape("Python/")), "Python/"),
        (re.compile(r"^.+/" + re.escape("Objects/")), "Objects/"),
        (re.compile(r"\s\[.+\]$"), ""),
    )

    @classmethod
    def standardized_name(cls, name: str) -> str:
        for pattern, replacement in cls._STANDARDIZE:
            name = pattern.sub(replacement, name)
        return _stable_function_name(name)

    @classmethod
    def from_counts(
        cls,
        exclusive: Mapping[str, int],
        total: int,
        number: int,
        warmup: int | None = None,
        type_cache_misses: int = 0,
        type_cache_lookups: int = 0,
    ) -> InstructionsMetric:
        """From raw exclusive counts over ``number`` calls (names as Callgrind's reader spells
        them); ``type_cache_misses`` and ``type_cache_lookups`` (over the ``number`` calls) are
        taken off the total."""
        merged: dict[str, int] = {}
        for name, count in exclusive.items():
            key = cls.standardized_name(name)
            merged[key] = merged.get(key, 0) + count
        functions: dict[str, float] = {}
        covered = 0
        ordered = sorted(merged.items(), key=lambda item: (-abs(item[1]), item[0]))
        for name, count in ordered:
            if total > 0 and covered >= cls.COVERAGE * total or len(functions) >= cls.MAX_FUNCTIONS:
                break
            functions[name] = count / number
            covered += count
        rest = sum(merged.values()) - covered
        if rest:
            functions[cls.OTHER] = rest / number
        misses = min(max(type_cache_misses, 0), total)
        lookups = min(max(type_cache_lookups, 0), total - misses)
        return cls(
            instructions_per_run=(total - misses - lookups) / number,
            number_per_run=number,
            functions=functions,
            warmup=warmup,
            type_cache_misses=misses / number,
            type_cache_lookups=lookups / number,
        )

    @classmethod
    def from_stats(cls, stats: Any, warmup: int | None = None) -> InstructionsMetric:
        """From torch's CallgrindStats: names standardized (``as_standardized``), counts per run."""
        exclusive = {fc.function: fc.count for fc in stats.stmt_exclusive_stats}
        metric = cls.from_counts(exclusive, stats.counts(), int(stats.number_per_run), warmup)
        metric.stats = stats
        return metric

    @classmethod
    def pending(cls, dump: str, number: int, warmup: int | None) -> InstructionsMetric:
        """A region counted in this process whose dump the controller will read."""
        return cls(
            instructions_per_run=0.0, number_per_run=number, functions={}, warmup=warmup, dump=dump
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "instructions_per_run": round_sig(self.instructions_per_run, 9),
            "number_per_run": self.number_per_run,
            "functions": {k: round_sig(v, 7) for k, v in sorted(self.functions.items())},
        }
        if self.warmup is not None:
            data["warmup"] = self.warmup
        if self.type_cache_misses:
            data["type_cache_misses"] = round_sig(self.type_cache_misses, 7)
        if self.type_cache_lookups:
            data["type_cache_lookups"] = round_sig(self.type_cache_lookups, 7)
        if self.dump is not None:
            data["dump"] = self.dump
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InstructionsMetric:
        functions = data.get("functions", {})
        if not isinstance(functions, Mapping):
            raise ValueError("instructions.functions must be an object")
        warmup = data.get("warmup")
        return cls(
            instructions_per_run=float(data["instructions_per_run"]),
            number_per_run=int(data["number_per_run"]),
            functions={str(k): float(v) for k, v in functions.items()},
            warmup=int(warmup) if warmup is not None else None,
            type_cache_misses=float(data.get("type_cache_misses", 0.0)),
            type_cache_lookups=float(data.get("type_cache_lookups", 0.0)),
        )

    def function_counts(self) -> Any:
        """The per-function counts as torch's FunctionCounts, so ``delta``/``filter`` work on
        baselines."""
        from ..common.compat import function_counts_from_dict

        return function_counts_from_dict(
            {name: int(round(count)) for name, count in self.functions.items()}
        )


# What the OTHER row means, where it shows: a cost spread over many small functions (a copy, a
# new op's dispatch) lands there, often at the top, and the bare name read as a function.
_OTHER_SHOWN = f"{InstructionsMetric.OTHER} (the functions outside those each run keeps, summed)"


def top_function_changes(
    current: Mapping[str, float], baseline: Mapping[str, float], top: int = 8
) -> list[str]:
    """The functions whose exclusive counts per run changed most, as ``FunctionCounts.delta`` shows.

    Ranked by the absolute change per run, largest first, leaving out lock/GIL/thread-local
    frames (``NOISE_FRAME``), which are summed on one last line; names shortened
    (:func:`short_function_name`).
    """
    changes: dict[str, float] = {}
    for name in set(current) | set(baseline):
        change = current.get(name, 0.0) - baseline.get(name, 0.0)
        if round(change) != 0:
            changes[name] = change
    noise = {name: change for name, change in changes.items() if NOISE_FRAME.search(name)}
    ordered = sorted(
        ((n, c) for n, c in changes.items() if n not in noise),
        key=lambda item: (-abs(item[1]), item[0]),
    )[:top]
    rows = [
        (
            round(change),
            _OTHER_SHOWN if name == InstructionsMetric.OTHER else short_function_name(name),
        )
        for name, change in ordered
    ]
    noise_total = round(sum(noise.values()))
    if noise and noise_total:
        names = [
            short_function_name(n, 40)
            for n, _ in sorted(noise.items(), key=lambda i: (-abs(i[1]), i[0]))
        ]
        listed = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
        rows.append((noise_total, f"in {len(noise)} lock/GIL/thread-local frame(s): {listed}"))
    width = max((len(f"{change:+,}") for change, _ in rows), default=0)
    return [f"{change:>+{width},}  {label}" for change, label in rows]


def type_cache_line(
    current: InstructionsMetric, baseline: InstructionsMetric, counted: float
) -> list[str]:
    """A line naming the type-cache misses when they moved by more than a thousandth of the count:
    they are not counted (their cost follows memory layout), but a reader of the function table
    above must know why dict lookups moved without the count moving."""
    moved = current.type_cache_misses - baseline.type_cache_misses
    if counted <= 0 or abs(moved) < counted * 0.001:
        return []
    return [
        f"type-cache misses (not counted: they follow memory layout, not the code): "
        f"{baseline.type_cache_misses:,.0f} -> {current.type_cache_misses:,.0f} instructions per "
        f"run in {TYPE_CACHE_MISS} and the dict lookups it makes"
    ]


def plans_of(entries: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """``(number, warmup)`` by node id of every test of ``entries`` (a baseline set's results by
    key) whose only instructions entry is keyed by its node id.

    Why only those: the worker uses a test's plan for the test's first count, which is the entry
    keyed by its node id when the test records once (``benchmark``, the marker, a Timer without
    a description); the recordings of a test that records several (``nodeid [description]``,
    ``nodeid #2``) may each have been counted over another number, and stay adaptive."""
    by_test: dict[str, list[tuple[str, InstructionsMetric]]] = {}
    for key, entry in entries.items():
        metric = entry.metrics.get("instructions")
        if isinstance(metric, InstructionsMetric):
            by_test.setdefault(entry.nodeid, []).append((key, metric))
    plans = {}
    for nodeid, recordings in by_test.items():
        (key, metric), *others = recordings
        if not others and key == nodeid and metric.warmup is not None:
            plans[nodeid] = (metric.number_per_run, metric.warmup)
    return plans


class InstructionsLaunch(CallgrindLaunch):
    """The counted workers of instructions mode: a dump's counts make an
    :class:`InstructionsMetric`, and the baseline's plans are those of :func:`plans_of`."""

    def value_json(self, counts: DumpCounts, number: int, warmup: int | None) -> dict[str, Any]:
        return InstructionsMetric.from_counts(
            counts.exclusive,
            counts.total,
            number,
            warmup,
            type_cache_misses=counts.type_cache_misses,
            type_cache_lookups=counts.type_cache_lookups,
        ).to_json()

    def plans(self, entries: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
        return plans_of(entries)


class Instructions(Metric):
    name = "instructions"
    value_type = InstructionsMetric
    help = "Callgrind"
    default_limit = 0.01
    comparability_facts = (
        "python",
        "python_build",
        "python_compiler",
        "torch",
        "torch_git",
        "torch_debug",
        "cpu_capability",
        "machine",
        "libc",
        "pythonmalloc",
        "num_threads",
        "valgrind",
        "allocator",
        "pythonhashseed",
        "counting_method",
    )
    positive_fields = ("instructions_per_run",)
    number_fields = ("instructions_per_run", "functions")
    table_title = "instructions per call"
    explains = "Functions (instructions per run)"
    timer_method = "collect_callgrind"
    fresh_code = True  # a heavy benchmark is counted after 2-3 calls: its code's history shows

    def before_first_call(self, fn: Callable[..., Any]) -> None:
        """A ``torch.compile``d function compiles in its first call: valgrind runs that several
        times faster with instrumentation off (``callgrind.collect.pause_instrumentation``).
        Functions imported since the last marking are marked to be quickened at their next call
        (``callgrind.quickening``), which is this first call."""
        from ..engines import dynamo
        from ..engines.callgrind import collect, quickening

        if dynamo.is_compiled(fn):
            collect.pause_instrumentation()  # a no-op where instrumentation is off (or no valgrind)
        # Modules imported since the worker's collection (by this test, or lazily by torch):
        # their functions too are specialised by the first call, not by the counted ones.
        quickening.quicken_new_modules()

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> InstructionsMetric:
        options = context.options
        # The baseline's number of calls, unless the marker fixes them (callgrind.count_region).
        plan = take_test_plan()
        if options.number is not None or options.warmup is not None:
            plan = None
        return count_region_for_controller(
            fn,
            number=options.number,
            warmup=options.warmup,
            num_threads=options.num_threads,
            context=context,
            plan=plan,
        )

    def worker_launch(self) -> InstructionsLaunch:
        return InstructionsLaunch()

    def measure_timer_call(
        self, fn: Callable[[], Any], number: int, task_spec: Any, context: MeasureContext
    ) -> tuple[Any, InstructionsMetric]:
        """``bench_timer(...).collect_callgrind()``: counted in this worker (seconds, not the tens
        of seconds of torch's own), and the dump read here, under valgrind, since the caller wants
        torch's ``CallgrindStats`` itself."""
        from ..engines.callgrind import collect

        stats = collect.measure(
            fn,
            number=number,
            warmup=context.options.warmup,
            task_spec=task_spec,
            out_dir=dump_dir(),
            before_warmup=context.seed,
        )
        return stats, InstructionsMetric.from_stats(stats)

    def environment_facts(self) -> Mapping[str, str]:
        from ..engines import callgrind

        # How regions are counted (toggles, warm-up, per-region instrumentation) moves counts
        # too: a baseline from another method is not comparable, not a regression.
        return {**callgrind.counting_fingerprint(), "counting_method": COUNTING_METHOD}

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        now, then = current.instructions_per_run, baseline.instructions_per_run
        delta = now / then - 1.0 if then > 0 else 0.0
        numbers_differ = current.number_per_run != baseline.number_per_run
        if numbers_differ and abs(delta) <= NUMBER_EFFECT_BOUND:
            # Counts per call depend a little on the number of calls (specialisation): never compare
            # across numbers. A benchmark is counted over its baseline's number (load_test_plan);
            # another one means the marker's number changed, the baseline's plan was not followed
            # (work more than one bucket away: collect.plan_followed), or it was not handed over
            # (a test with several recordings).
            summary = (
                f"instructions: counted over {current.number_per_run} calls, the baseline over "
                f"{baseline.number_per_run} (re-save the baseline)"
            )
            return Verdict(
                key,
                "instructions",
                NOT_COMPARABLE,
                then,
                now,
                limit,
                None,
                summary,
                [f"number_per_run: {baseline.number_per_run} -> {current.number_per_run}"],
            )
        status = REGRESSION if delta > limit else IMPROVEMENT if delta < -limit else UNCHANGED
        summary = (
            f"instructions {then:,.0f} -> {now:,.0f} per run ({format_percent(delta)}, "
            f"limit {limit * 100:g}%)"
        )
        details = []
        if status != UNCHANGED:
            changes = top_function_changes(current.functions, baseline.functions)
            if changes:
                details = [
                    "top functions by change (instructions per run, largest |change| first; "
                    "lock/GIL frames summed last):",
                    *changes,
                ]
        details += type_cache_line(current, baseline, then)
        if numbers_differ:
            details.insert(
                0,
                f"counted over {current.number_per_run} calls, the baseline over "
                f"{baseline.number_per_run}: a change far beyond what the number of calls moves",
            )
        return Verdict(key, "instructions", status, then, now, limit, None, summary, details)

    def headline(self, value: Any) -> float:
        return value.instructions_per_run  # type: ignore[no-any-return]

    def format_value(self, number: float) -> str:
        return safe_number(number, ",.0f")

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        return [(f"{prefix}instructions.per_run", round_sig(value.instructions_per_run, 9))]

    def figures(self, current: Any, baseline: Any | None, changed: bool, top: int) -> list[Plot]:
        if baseline is None:
            return []
        total = current.instructions_per_run - baseline.instructions_per_run
        title = Heading(
            f"instructions per run: {self.format_value(baseline.instructions_per_run)} \u2192 "
            f"{self.format_value(current.instructions_per_run)} ({safe_number(total, '+,.0f')})"
        )
        if not changed:  # a benchmark that did not change needs no function bars
            return [[title]]
        changes = {
            name: current.functions.get(name, 0.0) - baseline.functions.get(name, 0.0)
            for name in set(current.functions) | set(baseline.functions)
        }
        ordered = sorted(
            ((n, c) for n, c in changes.items() if finite(c) and round(c) != 0),
            key=lambda i: (-abs(i[1]), i[0]),
        )
        ordered = [
            (short_function_name(n), c) for n, c in ordered
        ]  # full names stay in the baseline
        return [
            [
                title,
                Bars([("total", total)], "instructions per run", label_width=120),
                Heading("top changed functions (exclusive instructions per run)"),
                Bars(ordered[:top], "instructions per run"),
            ]
        ]
