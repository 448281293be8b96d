"""The calls metric's judge, JSON and the Python-level explanation of another metric's failure
(issue 26 points 2 and 3), on values as the engine makes them."""

from __future__ import annotations

from pytest_torchbench.common.vocabulary import (
    IMPROVEMENT,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED,
    Environment,
    Policy,
)
from pytest_torchbench.judging.judgement import judge_result
from pytest_torchbench.judging.results import BenchmarkResult
from pytest_torchbench.metrics import registry
from pytest_torchbench.metrics.calls import CallsMetric
from pytest_torchbench.metrics.instructions import InstructionsMetric
from pytest_torchbench.metrics.metric import Metric

BASE = {"lib/store.py:Box.get": 48.0, "lib/store.py:lookup_all": 1.0}


def _result(instructions: float, calls: dict[str, float], gpu: str = "") -> BenchmarkResult:
    env = Environment(
        {"python": "3.11.7", "torch": "2.13.0", "torch_git": "x", "gpu": gpu, "valgrind": "3.19"}
    )
    return BenchmarkResult(
        key="t.py::t",
        module="t.py",
        label="t",
        sub_label="",
        description="",
        metrics={
            "instructions": InstructionsMetric(
                instructions, 100, {"Python/ceval.c:_PyEval_EvalFrameDefault": instructions}
            ),
            "calls": CallsMetric(dict(calls)),
        },
        environments={"instructions": env, "calls": env},
    )


def test_any_changed_function_fails_either_way_and_is_named() -> None:
    calls = registry.get("calls", Metric)
    more = calls.judge(
        "k", CallsMetric({**BASE, "lib/store.py:normalise": 48.0}), CallsMetric(BASE), 0.0, Policy()
    )
    assert more.status == REGRESSION and more.failed
    assert more.summary == "calls 49 -> 97 calls per call (1 function(s) changed)"
    assert list(more.details) == ["lib/store.py:normalise 0 -> 48 per call"]
    fewer = calls.judge(
        "k", CallsMetric({"lib/store.py:lookup_all": 1.0}), CallsMetric(BASE), 0.0, Policy()
    )
    assert fewer.status == IMPROVEMENT and fewer.failed
    assert list(fewer.details) == ["lib/store.py:Box.get 48 -> 0 per call"]
    same = calls.judge("k", CallsMetric(dict(BASE)), CallsMetric(BASE), 0.0, Policy())
    assert same.status == UNCHANGED and not same.failed
    # a limit lets small relative changes pass, as for ops
    loose = calls.judge(
        "k", CallsMetric({**BASE, "lib/store.py:Box.get": 50.0}), CallsMetric(BASE), 0.05, Policy()
    )
    assert not loose.failed


def test_json_round_trip_and_bad_numbers() -> None:
    calls = registry.get("calls", Metric)
    value = CallsMetric({"b.py:f": 2.0, "a.py:g": 1.0})
    data = calls.to_json(value)
    assert list(data["calls"]) == ["a.py:g", "b.py:f"]  # sorted: baselines diff cleanly
    assert calls.from_json(data) == value
    assert (
        calls.invalid_number({"calls": {"a.py:g": -1}})
        == 'calls.calls["a.py:g"] is -1; it must be >= 0'
    )


def test_an_instructions_failure_lists_the_python_functions_whose_calls_changed_first() -> None:
    now = _result(66_000, {**BASE, "lib/store.py:normalise": 48.0, "lib/store.py:lookup_all": 2.0})
    verdicts = {v.metric: v for v in judge_result(now, _result(49_000, BASE), Policy())}
    instructions = verdicts["instructions"]
    assert instructions.failed and instructions.status == REGRESSION
    assert list(instructions.details[:3]) == [
        "Python functions whose calls changed (calls per call, 2 function(s)):",
        "+48  lib/store.py:normalise (0 -> 48)",
        " +1  lib/store.py:lookup_all (1 -> 2)",
    ]
    assert instructions.details[3].startswith("top functions by change")  # then the C functions
    assert list(verdicts["calls"].details) == [
        "lib/store.py:lookup_all 1 -> 2 per call",
        "lib/store.py:normalise 0 -> 48 per call",
    ]


def test_an_instructions_failure_with_unchanged_calls_says_the_python_calls_did_not_change() -> (
    None
):
    verdicts = {
        v.metric: v for v in judge_result(_result(50_000, BASE), _result(49_000, BASE), Policy())
    }
    assert verdicts["instructions"].failed
    assert verdicts["instructions"].details[0] == (
        "Python calls: unchanged (49 per call in 2 function(s)): the same Python functions "
        "ran as often as in the baseline"
    )


def test_no_python_lines_where_calls_are_not_comparable_or_instructions_did_not_fail() -> None:
    elsewhere = _result(49_000, BASE, gpu="H200")  # a fact of calls', not of instructions
    verdicts = {
        v.metric: v
        for v in judge_result(_result(66_000, {**BASE, "x.py:f": 1.0}), elsewhere, Policy())
    }
    assert verdicts["calls"].status == NOT_COMPARABLE
    assert verdicts["instructions"].failed
    assert not any("Python" in line for line in verdicts["instructions"].details)
    unchanged = {
        v.metric: v
        for v in judge_result(
            _result(49_000, {**BASE, "x.py:f": 1.0}), _result(49_000, BASE), Policy()
        )
    }
    assert not unchanged["instructions"].failed and list(unchanged["instructions"].details) == []
    assert unchanged["calls"].failed  # its own verdict still fails


def test_many_changed_functions_are_cut_to_the_largest() -> None:
    changed = {f"lib/m.py:f{i:02d}": float(i + 1) for i in range(12)}
    lines = registry.get("calls", Metric).explain_other(
        CallsMetric({**BASE, **changed}), CallsMetric(BASE)
    )
    assert lines[0] == "Python functions whose calls changed (calls per call, 12 function(s)):"
    assert lines[1] == "+12  lib/m.py:f11 (0 -> 12)"
    assert len(lines) == 10 and lines[-1] == "... and 4 more (the calls verdict lists them all)"


def test_metrics_that_disturb_the_others_are_measured_last() -> None:
    """calls' profile hook over its warm-up moved the instructions counted after it in the same
    test (a 48-key lookup: 414,947 -> 415,067 per call): the session measures it after the others,
    whatever order ``--bench-mode`` gives."""
    from pytest_torchbench.metrics.metric import Metric
    from pytest_torchbench.pytest.marker import BenchOptions
    from pytest_torchbench.pytest.session import BenchSession, Naming

    order: list[str] = []

    class Probe(Metric):
        value_type = CallsMetric
        seeded = False
        table_title = "probe"

        def measure(self, fn, context):  # type: ignore[no-untyped-def]
            order.append(self.name)
            return CallsMetric({})

        def headline(self, value):  # type: ignore[no-untyped-def]
            return 0.0

    class Early(Probe):
        name = "probe_early"

    class Late(Probe):
        name = "probe_late"
        measured_last = True

    added = registry.register_all([Early(), Late()])
    try:
        session = BenchSession(("probe_late", "probe_early"))
        result = session.measure(
            lambda: None, BenchOptions(), Naming("t.py::t", "t.py", "t", "", "")
        )
    finally:
        for name in added:
            registry.unregister(name)
    assert order == ["probe_early", "probe_late"] and set(result.metrics) == {
        "probe_early",
        "probe_late",
    }
    assert (
        registry.get("calls", Metric).measured_last
        and not registry.get("instructions", Metric).measured_last
    )
