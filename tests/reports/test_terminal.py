"""The terminal table: rows never merged across modules, groups, hostile text, non-finite
numbers."""

from __future__ import annotations

import math

from pytest_torchbench.common.vocabulary import REGRESSION, UNCHANGED, Verdict
from pytest_torchbench.judging.results import (
    BenchmarkResult,
    InstructionsMetric,
    MemoryMetric,
    OpsMetric,
    TimeMetric,
)
from pytest_torchbench.reports import terminal


def _ops(
    key: str, module: str, label: str, calls: float, sub_label: str = "", **extras: object
) -> BenchmarkResult:
    return BenchmarkResult(
        key,
        module,
        label,
        sub_label,
        "",
        {"ops": OpsMetric({"aten::add": calls})},
        extras=dict(extras),
    )


def test_same_named_tests_in_two_modules_are_two_rows() -> None:
    """Issue 10: two ``test_resize`` in different files collapsed into one row (the second value
    won)."""
    results = [
        _ops("a/test_x.py::test_resize", "a/test_x.py", "test_resize", 3),
        _ops("b/test_x.py::test_resize", "b/test_x.py", "test_resize", 7),
    ]
    lines = terminal.render_tables(results, [], None)
    text = "\n".join(lines)
    assert "[ test_resize ]  (a/test_x.py)" in text and "[ test_resize ]  (b/test_x.py)" in text
    assert sum(1 for line in lines if line.strip() in ("3", "7")) == 2


def test_one_module_without_the_module_in_the_heading() -> None:
    results = [
        _ops("t.py::test_a[1]", "t.py", "test_a", 1, "1"),
        _ops("t.py::test_a[2]", "t.py", "test_a", 2, "2"),
    ]
    text = "\n".join(terminal.render_tables(results, [], None))
    assert "[ test_a ]\n" in text and "(t.py)" not in text


def test_colliding_cells_in_one_block_keep_both_rows() -> None:
    # Two recordings of one test with the same description and sub-label (keys "t" and "t #2").
    results = [_ops("t.py::t", "t.py", "t", 1), _ops("t.py::t #2", "t.py", "t", 2)]
    lines = [line.split() for line in terminal.render_tables(results, [], None)]
    assert ["t.py::t", "1"] in lines and ["t.py::t", "#2", "2"] in lines


def test_groups_head_their_blocks() -> None:
    results = [
        _ops("t.py::test_a", "t.py", "test_a", 1, group="resize"),
        _ops("t.py::test_b", "t.py", "test_b", 2),
    ]
    text = "\n".join(terminal.render_tables(results, [], None))
    assert "[ resize / test_a ]" in text and "[ test_b ]" in text


def test_hostile_text_is_escaped_on_every_line() -> None:
    evil = "\x1b[2J\n::error title=pwned::forged"
    result = BenchmarkResult(
        "t.py::t[" + evil + "]", "t.py", evil, evil, evil, {"ops": OpsMetric({"aten::add": 1})}
    )
    verdict = Verdict(
        result.key, "ops", REGRESSION, 1, 2, summary=evil, details=[evil, "::warning::x"]
    )
    lines = [
        *terminal.render_tables([result], [verdict], "::error::base"),
        *terminal.render_verdict_lines([verdict]),
        *terminal.render_profiles(
            [
                BenchmarkResult(
                    result.key,
                    "t.py",
                    "t",
                    "",
                    "",
                    {},
                    extras={
                        "profiles": [
                            {
                                "source": evil,
                                "trace": evil,
                                "top_ops": [{"name": evil, "calls": 1, "self_cpu_time_us": 1.0}],
                            }
                        ]
                    },
                )
            ]
        ),
    ]
    for line in lines:
        assert "\x1b" not in line and "\n" not in line, line
        assert not line.lstrip().startswith(("::", "##[")), line


def test_nan_inf_and_huge_numbers_never_raise() -> None:
    """Issue 8: ``torchbench show`` on a baseline with NaN/inf/huge numbers failed in the
    formatter."""
    nan, inf = math.nan, math.inf
    results = [
        BenchmarkResult("t.py::a", "t.py", "a", "", "", {"time": TimeMetric(1, [nan, nan])}),
        BenchmarkResult("t.py::b", "t.py", "b", "", "", {"time": TimeMetric(1, [inf, 1.0])}),
        BenchmarkResult(
            "t.py::c", "t.py", "c", "", "", {"time": TimeMetric(1, [1e308, 1e308, 1e308])}
        ),
        BenchmarkResult(
            "t.py::d",
            "t.py",
            "d",
            "",
            "",
            {
                "instructions": InstructionsMetric(nan, 100, {}),
                "ops": OpsMetric({"x": inf}),
                "memory": MemoryMetric({"cpu": 10**400}),
            },
        ),
    ]
    verdicts = [
        Verdict("t.py::a", "time", UNCHANGED, nan, nan),
        Verdict("t.py::b", "time", REGRESSION, inf, 1.0),
        Verdict("t.py::d", "instructions", REGRESSION, 0.0, nan),
    ]
    text = "\n".join(terminal.render_tables(results, verdicts, "main"))
    assert "nan" in text and "inf" in text
    assert "e+308" in text


def test_a_compared_time_cell_shows_the_judged_fastest_call_beside_the_median() -> None:
    """Issue 27 item 19: the cell showed median ± IQR with the delta of the fastest call, which
    read as the median's delta."""
    times = [1.2e-5, 1.0e-5, 1.4e-5, 1.1e-5, 1.3e-5] * 4
    result = BenchmarkResult("t.py::t", "t.py", "t", "", "", {"time": TimeMetric(1, times)})
    verdict = Verdict(result.key, "time", REGRESSION, 0.9e-5, 1.0e-5)
    lines = terminal.render_tables([result], [verdict], "main")
    assert "the fastest call (judged) and its delta vs baseline 'main'" in lines[0]
    assert any(line.strip() == "12 \u00b1 2.0, fastest 10 (+11.1%)!" for line in lines), lines


def test_changes_only_lists_the_changed_and_counts_the_rest() -> None:
    results = [_ops(f"t.py::test_{n}", "t.py", f"test_{n}", 1) for n in "abc"]
    verdicts = [
        Verdict("t.py::test_a", "ops", REGRESSION, 1, 2, failed=True),
        Verdict("t.py::test_b", "ops", UNCHANGED, 1, 1),
        Verdict("t.py::test_c", "ops", UNCHANGED, 1, 1),
    ]
    text = "\n".join(terminal.render_tables(results, verdicts, "main", only_changed=True))
    assert "[ test_a ]" in text and "test_b" not in text and "test_c" not in text
    assert terminal.render_counts(results, verdicts, "main") == (
        "torchbench: 3 benchmark(s) against baseline 'main': 1 regression, 2 unchanged; "
        "tables show the 1 changed (-v shows every benchmark)"
    )
    assert (
        terminal.render_tables(results, verdicts[1:] + [verdicts[1]], "main", only_changed=True)
        == []
    )
    assert terminal.render_counts(results, [], None).startswith(
        "torchbench: 3 benchmark(s): 3 measured; tables show the 0"
    )


def test_detail_lines_beyond_the_terminals_share_are_counted_not_dropped_in_silence() -> None:
    """A too noisy time benchmark judged on 12 rounds showed 9 round lines under "over 12
    alternated rounds", with nothing saying where the other three were."""
    rounds = [f"round {n} (base first): base 3 ms, head 3 ms (+0.0%)" for n in range(1, 13)]
    twelve = terminal.render_verdict_lines(
        [Verdict("t.py::t", "time", REGRESSION, 1, 2, details=rounds)]
    )
    assert [line.strip() for line in twelve[2:]] == rounds
    more = rounds + [
        "round 13 (base first): base 3 ms, head 3 ms (+0.0%)",
        "round 14 (head first): x",
    ]
    lines = terminal.render_verdict_lines(
        [Verdict("t.py::t", "time", REGRESSION, 1, 2, details=more)]
    )
    assert [line.strip() for line in lines[2:14]] == rounds
    assert lines[14].strip() == "... 2 more line(s): every line is in --bench-json and --bench-html"
    assert len(lines) == 15
