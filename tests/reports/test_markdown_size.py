"""The Markdown summary stays under GitHub's comment limit on a suite of about 300 benchmarks and
leads with the changes (issue 25, point 6), whatever it has to leave out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_torchbench.common.vocabulary import REGRESSION, Policy
from pytest_torchbench.judging.judgement import judge_result
from pytest_torchbench.judging.results import BenchmarkResult, InstructionsMetric
from pytest_torchbench.reports import markdown

sys.path.insert(0, str(Path(__file__).parent))
from synthetic import suite  # noqa: E402

GITHUB_LIMIT = 65_536


@pytest.mark.parametrize("modes", [("time",), ("instructions", "ops"), ("ops",)])
def test_a_300_benchmark_summary_fits_a_pull_request_comment(modes: tuple[str, ...]) -> None:
    current, verdicts, _ = suite(n=300, modes=modes)
    text = markdown.render(current, verdicts, "main", "git main")
    assert len(text) < GITHUB_LIMIT
    body = text.split("\n", 4)[4]
    assert body.startswith("### Regressions and other changes"), text[:500]
    regressed = {v.key for v in verdicts if v.status == REGRESSION}
    assert regressed and all(markdown._escape(key) in text for key in regressed)


def _wide(n: int, regress: bool) -> tuple[list[BenchmarkResult], list]:  # type: ignore[type-arg]
    """``n`` benchmarks with long names and 400 functions each, all regressed when ``regress``."""
    current, verdicts = [], []
    for index in range(n):
        key = (
            f"tests/test_{'very_long_module_name_' * 3}{index}.py::"
            f"test_case[{'parameter-' * 8}{index}]"
        )
        functions = {
            (
                f"libtorch_cpu.so:at::native::kernel_{index}_{f}(at::Tensor const&, c10::Scalar)"
            ): 1000.0 * (f + 1)
            for f in range(400)
        }
        then = InstructionsMetric(sum(functions.values()), 100, functions)
        grown = {name: count * (1.5 if regress else 1.0) for name, count in functions.items()}
        now = InstructionsMetric(sum(grown.values()), 100, grown)
        result = BenchmarkResult(
            key, "tests/t.py", "test_case", str(index), "", {"instructions": now}
        )
        base = BenchmarkResult(
            key, "tests/t.py", "test_case", str(index), "", {"instructions": then}
        )
        current.append(result)
        verdicts += judge_result(result, base, Policy())
    return current, verdicts


def test_what_does_not_fit_is_cut_from_the_end_and_said() -> None:
    """300 regressions with long explanations: the table of changes comes first and whole (as many
    explanations as fit follow), and one line says what was left out and where it is."""
    current, verdicts = _wide(300, regress=True)
    text = markdown.render(current, verdicts, "main", "git main")
    assert len(text) <= markdown.MAX_CHARS
    assert "### Regressions and other changes" in text
    assert "Left out to stay under GitHub's 65,536-character limit:" in text
    assert "`--bench-html` and `--bench-json` reports hold everything" in text
    assert text.index("### Regressions") < text.index("Left out")
    assert text.splitlines()[2].startswith(":x: **failed**: 300 test(s)")


def test_small_summaries_are_untouched() -> None:
    current, verdicts = _wide(3, regress=True)
    assert "Left out" not in markdown.render(current, verdicts, "main")
    assert markdown.render(current, verdicts, "main") == markdown._render(
        current, verdicts, "main", None, "torchbench", ()
    )
