"""The compile metric's JSON and judgement, on exact values (no compiling here)."""

from __future__ import annotations

import pytest

from pytest_torchbench.common.vocabulary import IMPROVEMENT, REGRESSION, UNCHANGED, Policy
from pytest_torchbench.metrics import registry
from pytest_torchbench.metrics.compile import CompileMetric
from pytest_torchbench.metrics.metric import Metric

PRINT = (
    "Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print`"
)


def _value(
    graphs: int = 1,
    breaks: list[tuple[str, str, int]] | None = None,
    recompiles: list[tuple[str, str, int]] | None = None,
) -> CompileMetric:
    breaks, recompiles = breaks or [], recompiles or []
    return CompileMetric(
        graphs=graphs,
        graph_breaks=sum(n for *_, n in breaks),
        recompiles=sum(n for *_, n in recompiles),
        calls=3,
        breaks=breaks,
        recompile_reasons=recompiles,
    )


def _judge(current: CompileMetric, baseline: CompileMetric):  # type: ignore[no-untyped-def]
    return registry.get("compile", Metric).judge("t.py::test_f", current, baseline, 0.0, Policy())


def test_a_new_graph_break_is_a_regression_naming_reason_and_line() -> None:
    verdict = _judge(_value(2, breaks=[("model.py:42", PRINT, 1)]), _value(1))
    assert verdict.status == REGRESSION
    assert verdict.summary.startswith(f"graph breaks 0 -> 1: {PRINT} at model.py:42; graphs 1 -> 2")
    assert list(verdict.details) == [f"+ graph break: {PRINT} at model.py:42"]


def test_the_same_counts_are_unchanged_and_a_moved_break_is_shown_not_failed() -> None:
    value = _value(2, breaks=[("model.py:42", PRINT, 1)])
    assert _judge(value, value).status == UNCHANGED
    moved = _judge(_value(2, breaks=[("model.py:44", PRINT, 1)]), value)
    assert moved.status == UNCHANGED and list(moved.details) == [f"moved: {PRINT} at model.py:44"]


def test_a_recompile_more_is_a_regression_and_fewer_breaks_an_improvement() -> None:
    recompiled = _value(2, recompiles=[("model.py:3", "f: tensor 'x' size mismatch at index 0", 1)])
    verdict = _judge(recompiled, _value(1))
    assert (
        verdict.status == REGRESSION
        and "recompiles 0 -> 1: f: tensor 'x' size mismatch" in verdict.summary
    )
    better = _judge(_value(1), _value(2, breaks=[("model.py:42", PRINT, 1)]))
    assert better.status == IMPROVEMENT and list(better.details) == [
        f"- graph break: {PRINT} at model.py:42"
    ]


def test_code_that_stops_compiling_is_a_regression() -> None:
    assert _judge(_value(0), _value(1)).status == REGRESSION


def test_json_round_trip_and_bad_values() -> None:
    value = _value(2, breaks=[("model.py:42", PRINT, 2)], recompiles=[("m.py:1", "r", 1)])
    metric = registry.get("compile", Metric)
    assert metric.from_json(metric.to_json(value)) == value
    assert metric.invalid_number(metric.to_json(value)) is None
    data = metric.to_json(value)
    with pytest.raises(ValueError, match="compile.graphs"):
        metric.from_json({**data, "graphs": 1.5})
    with pytest.raises(ValueError, match="compile.breaks"):
        metric.from_json({**data, "breaks": [{"reason": 3, "where": "x"}]})
    assert "compile.calls" in (metric.invalid_number({**data, "calls": 0}) or "")


def test_the_cell_reads_as_words() -> None:
    metric = registry.get("compile", Metric)
    assert metric.cell(_value(1), 1.0) == "1 graph, 0 breaks, 0 recompiles"


def test_a_hand_edited_baseline_with_more_events_or_longer_text_than_a_save_writes_is_refused() -> (
    None
):
    """A save stores at most 50 events per kind, reasons of at most a few hundred characters: a
    file with thousands of them (6 MB of HTML report from one entry, before) was edited by hand."""
    metric = registry.get("compile", Metric)
    data = metric.to_json(_value())
    many = [{"reason": "r", "where": f"m.py:{i}", "count": 1} for i in range(51)]
    with pytest.raises(
        ValueError, match=r"compile.breaks has 51 entries; a save stores at most 50"
    ):
        metric.from_json({**data, "breaks": many})
    with pytest.raises(
        ValueError, match=r"compile.recompile_reasons entries: 'reason' is 5000 characters"
    ):
        metric.from_json({**data, "recompile_reasons": [{"reason": "x" * 5000, "where": "m.py:1"}]})
    kept = [{"reason": "x" * 1000, "where": f"m.py:{i}", "count": 1} for i in range(50)]
    assert len(metric.from_json({**data, "breaks": kept}).breaks) == 50


def test_report_columns_say_what_the_number_counts() -> None:
    """Markdown and HTML show the headline: bare, a compiled function's "0 | 0" read as nothing
    compiled."""
    from conftest import make_result

    from pytest_torchbench.reports import markdown

    verdict = _judge(_value(1), _value(1))
    result = make_result("t.py::test_f")
    result.metrics["compile"] = _value(1)
    text = markdown.render([result], [verdict], "main")
    assert "| compile | 0 breaks + recompiles | 0 breaks + recompiles |" in text
