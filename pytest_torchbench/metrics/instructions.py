"""The ``instructions`` metric: Callgrind instruction counts of the measured region, per call.

Counts are deterministic, so no statistics: more than the limit (default 1%) above the baseline
is a regression, more than the limit below a stale baseline. The failure names the functions
whose exclusive counts changed most (``FunctionCounts.delta`` of baseline vs current), which also
explain a regression of any other metric of the same benchmark. Counting happens in pytest-xdist
workers that pytest-torchbench launched under valgrind (``valgrind.py``); this module counts one
region in such a worker (``engines/callgrind``).
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Callable, Mapping

from ..text import finite, safe_number
from ..vocabulary import (
    IMPROVEMENT, REGRESSION, UNCHANGED, Bars, Heading, Plot, Policy, Verdict, format_percent, round_sig,
)
from .base import MeasureContext, Metric

#: Bump when a change to the counting procedure moves counts (see Instructions.environment_facts).
COUNTING_METHOD = "per-region-toggle-in-loop/1"

#: Tells a counted worker where its Callgrind dumps go (set in the counted environment).
DUMP_DIR_VARIABLE = "TORCHBENCH_CALLGRIND_DIR"


def count_instructions(fn: Callable[[], Any], *, number: int, warmup: int, task_spec: Any,
                       before_region: Callable[[], None] | None = None) -> Any:
    """Count ``fn`` in this counted worker; torch's CallgrindStats back (total over ``number``)."""
    from ..engines.callgrind import collect as callgrind

    dump_dir = os.environ.get(DUMP_DIR_VARIABLE)
    if not dump_dir:
        raise callgrind.NotUnderValgrind(
            "instruction counting runs in workers that pytest-torchbench launches under valgrind; "
            "this process was not (run pytest with --bench-mode=instructions)"
        )
    return callgrind.measure(fn, number=number, warmup=warmup, task_spec=task_spec, out_dir=dump_dir,
                             per_region=True, before_region=before_region)


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
    """Callgrind counts of the measured region; ``functions`` are exclusive counts per run."""

    instructions_per_run: float
    number_per_run: int
    functions: dict[str, float]  # standardized function name -> exclusive instructions per run
    stats: Any = None  # torch CallgrindStats, when measured in this process

    #: Functions kept in baselines: the largest, until they cover this share of the total.
    COVERAGE = 0.99

    @classmethod
    def from_stats(cls, stats: Any) -> InstructionsMetric:
        """From torch's CallgrindStats: names standardized (``as_standardized``), counts per run."""
        number = int(stats.number_per_run)
        exclusive = stats.as_standardized().stats(inclusive=False).transform(_stable_function_name)
        total = stats.counts()
        functions: dict[str, float] = {}
        covered = 0
        for count, name in sorted(exclusive, key=lambda fc: (-abs(fc.count), fc.function)):
            if total > 0 and covered >= cls.COVERAGE * total:
                break
            functions[name] = functions.get(name, 0.0) + count / number
            covered += count
        return cls(instructions_per_run=total / number, number_per_run=number,
                   functions=functions, stats=stats)

    def to_json(self) -> dict[str, Any]:
        return {
            "instructions_per_run": round_sig(self.instructions_per_run, 9),
            "number_per_run": self.number_per_run,
            "functions": {k: round_sig(v, 7) for k, v in sorted(self.functions.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InstructionsMetric:
        functions = data.get("functions", {})
        if not isinstance(functions, Mapping):
            raise ValueError("instructions.functions must be an object")
        return cls(
            instructions_per_run=float(data["instructions_per_run"]),
            number_per_run=int(data["number_per_run"]),
            functions={str(k): float(v) for k, v in functions.items()},
        )

    def function_counts(self) -> Any:
        """The per-function counts as torch's FunctionCounts, so ``delta``/``filter`` work on baselines."""
        from .._compat import function_counts_from_dict

        return function_counts_from_dict({name: int(round(count)) for name, count in self.functions.items()})


def top_function_changes(current: Mapping[str, float], baseline: Mapping[str, float], top: int = 8) -> list[str]:
    """The functions whose exclusive counts per run changed most, as ``FunctionCounts.delta`` shows."""
    changes: dict[str, float] = {}
    for name in set(current) | set(baseline):
        change = current.get(name, 0.0) - baseline.get(name, 0.0)
        if round(change) != 0:
            changes[name] = change
    ordered = sorted(changes.items(), key=lambda item: (-abs(item[1]), item[0]))[:top]
    width = max((len(f"{round(c):+,}") for _, c in ordered), default=0)
    return [f"{round(change):>+{width},}  {name}" for name, change in ordered]


class Instructions(Metric):
    name = "instructions"
    value_type = InstructionsMetric
    help = "Callgrind"
    default_limit = 0.01
    comparability_facts = (
        "python", "python_build", "python_compiler", "torch", "torch_git", "torch_debug",
        "cpu_capability", "machine", "libc", "pythonmalloc", "num_threads", "valgrind", "allocator",
        "pythonhashseed", "counting_method",
    )
    excludes = ("time",)
    positive_fields = ("instructions_per_run",)
    table_title = "instructions per call"
    explains = "Functions (instructions per run)"

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> InstructionsMetric:
        from torch.utils.benchmark.utils.common import TaskSpec

        naming, options = context.naming, context.options
        task_spec = TaskSpec(stmt=naming.nodeid, setup="", label=naming.label, sub_label=naming.sub_label,
                             description=naming.description, num_threads=options.num_threads)
        stats = count_instructions(fn, number=options.number, warmup=options.warmup, task_spec=task_spec,
                                   before_region=context.before_region)
        return InstructionsMetric.from_stats(stats)

    def environment_facts(self) -> Mapping[str, str]:
        from ..engines import callgrind

        # How regions are counted (toggles, warm-up, per-region instrumentation) moves counts
        # too: a baseline from another method is not comparable, not a regression.
        return {**callgrind.counting_fingerprint(), "counting_method": COUNTING_METHOD}

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        now, then = current.instructions_per_run, baseline.instructions_per_run
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
                details = ["top functions by change (instructions per run):", *changes]
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
        title = Heading(f"instructions per run: {self.format_value(baseline.instructions_per_run)} \u2192 "
                        f"{self.format_value(current.instructions_per_run)} ({safe_number(total, '+,.0f')})")
        if not changed:  # a benchmark that did not change needs no function bars
            return [[title]]
        changes = {
            name: current.functions.get(name, 0.0) - baseline.functions.get(name, 0.0)
            for name in set(current.functions) | set(baseline.functions)
        }
        ordered = sorted(((n, c) for n, c in changes.items() if finite(c) and round(c) != 0),
                         key=lambda i: (-abs(i[1]), i[0]))
        return [[title, Bars([("total", total)], "instructions per run", label_width=120),
                 Heading("top changed functions (exclusive instructions per run)"),
                 Bars(ordered[:top], "instructions per run")]]
