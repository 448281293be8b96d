"""A synthetic suite the size of a real library's (310 benchmarks), for the reports' size and
layout.

Realistic where it matters for size: wall times with the replicate counts our time engine keeps
(blocks of about 1 ms, so a 10 us benchmark has thousands of samples; skewed, with a few
preemption outliers), per-function instruction counts of a few hundred functions, op counts;
same-named tests in several modules; groups; a few regressions, improvements, new and missing
benchmarks. Deterministic (seeded), no measuring.

``python tests/reports/synthetic.py [OUT.html]`` prints the HTML and Markdown sizes
(the README figure).
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

from pytest_torchbench.common.vocabulary import Policy
from pytest_torchbench.judging.judgement import judge_result, missing_verdicts
from pytest_torchbench.judging.results import (
    BenchmarkResult,
    InstructionsMetric,
    OpsMetric,
    TimeMetric,
)

#: Replicates per benchmark, cycled: trivial (10 us) benchmarks get thousands of 1 ms blocks.
SAMPLE_COUNTS = (4000, 2500, 1200, 400, 120, 30)
OPS = (
    "aten::add",
    "aten::mul",
    "aten::empty",
    "aten::copy_",
    "aten::to",
    "aten::conv2d",
    "aten::clamp",
    "aten::sum",
    "aten::mean",
    "aten::index",
)


def _times(rng: random.Random, median: float, count: int, number: int) -> list[float]:
    """Block times (seconds per ``number`` calls): log-normal spread, 1% preemption outliers."""
    out = []
    for _ in range(count):
        value = median * math.exp(rng.gauss(0, 0.03))
        if rng.random() < 0.01:
            value *= 1 + rng.random() * 3
        out.append(value * number)
    return out


def suite(
    n: int = 310, modes: tuple[str, ...] = ("time",), seed: int = 0, groups: bool = True
) -> tuple[list[BenchmarkResult], list, dict[str, BenchmarkResult]]:
    """(current results, verdicts, baseline entries) for ``n`` benchmarks: every 37th regressed by
    30%, every 43rd improved by 20%, two new and two missing."""
    rng = random.Random(seed)
    baseline: dict[str, BenchmarkResult] = {}
    current: list[BenchmarkResult] = []
    for index in range(n + 2):
        module = f"tests/test_{('color', 'geometry', 'filters', 'augment', 'losses')[index % 5]}.py"
        name = (
            f"test_{('resize', 'rotate', 'blur', 'flip', 'normalize', 'crop', 'warp')[index % 7]}"
        )
        size = (32, 64, 128, 256)[(index // 7) % 4]
        dtype = ("float32", "float64")[(index // 28) % 2]
        key = f"{module}::{name}[{size}-{dtype}-cpu-{index}]"
        factor = 1.3 if index % 37 == 7 else 0.8 if index % 43 == 11 else 1.0
        extras = {"group": name.removeprefix("test_")} if groups else {}

        def result(scale: float, which: int) -> BenchmarkResult:
            metrics: dict = {}
            if "time" in modes:
                median = 10e-6 * (1 + index % 50) if index % 3 else 10e-6
                count = SAMPLE_COUNTS[index % len(SAMPLE_COUNTS)]
                number = max(1, int(1e-3 / median))
                metrics["time"] = TimeMetric(number, _times(rng, median * scale, count, number))
            if "instructions" in modes:
                functions = {
                    f"lib{f % 7}.so:function_{index}_{f}(at::Tensor const&)": 1000.0 * (f + 1)
                    for f in range(250)
                }
                functions["aten::add_impl"] = 5_000_000 * scale
                metrics["instructions"] = InstructionsMetric(
                    sum(functions.values()), 100, functions
                )
            if "ops" in modes:
                metrics["ops"] = OpsMetric(
                    {
                        op: 1.0 + (which if op == "aten::copy_" and scale > 1 else 0)
                        for op in OPS[: 3 + index % 7]
                    }
                )
            return BenchmarkResult(
                key, module, name, f"{size}-{dtype}-cpu-{index}", "", metrics, extras=dict(extras)
            )

        if index != n + 1:  # the last one is new: no baseline
            baseline[key] = result(1.0, 0)
        if index < n - 1 or index == n + 1:  # two missing (n - 1, n)
            current.append(result(factor, 1))
    policy = Policy()
    verdicts: list = []
    for entry in current:
        verdicts += judge_result(entry, baseline.get(entry.key), policy)
    verdicts += missing_verdicts(baseline, {r.key for r in current}, set(modes))
    return current, verdicts, baseline


def main(argv: list[str]) -> None:
    from pytest_torchbench.reports import html, markdown

    for modes in (("time",), ("instructions", "ops")):
        current, verdicts, base = suite(modes=modes)
        samples = sum(
            len(r.metrics["time"].raw_times)
            for r in [*current, *base.values()]
            if "time" in r.metrics
        )
        page = html.render(current, verdicts, base, "main", "git main")
        summary = markdown.render(current, verdicts, "main", "git main")
        print(
            f"{','.join(modes)}: {len(current)} benchmarks, {samples} time samples: "
            f"HTML {len(page.encode()):,} bytes, "
            f"Markdown {len(summary.encode()):,} bytes"
        )
        if argv and modes == ("time",):
            Path(argv[0]).write_text(page, encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
