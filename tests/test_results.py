"""results: metrics from torch Measurements, JSON forms, environment ids."""

from __future__ import annotations

import json

import pytest
from torch.utils.benchmark import Timer

from pytest_torchbench.judging.results import (
    BenchmarkResult,
    Environment,
    TimeMetric,
    collect_environment,
    metric_from_json,
    round_sig,
)


def test_time_metric_from_a_real_measurement_and_back():
    measurement = Timer("x + 1", globals={"x": 1}).blocked_autorange(min_run_time=0.01)
    metric = TimeMetric.from_measurement(measurement)
    assert metric.number_per_run == measurement.number_per_run
    assert metric.median == pytest.approx(measurement.median)
    data = json.loads(json.dumps(metric.to_json()))
    again = TimeMetric.from_json(data)
    assert again.times == pytest.approx(metric.times, rel=1e-5)
    assert set(data) == {"number_per_run", "median", "iqr", "raw_times"}


@pytest.mark.parametrize(
    "data",
    [
        {"number_per_run": 1, "raw_times": []},
        {"number_per_run": 0, "raw_times": [1.0]},
        {"number_per_run": 1, "raw_times": "1.0"},
    ],
)
def test_time_metric_rejects_bad_json(data):
    with pytest.raises(ValueError):
        TimeMetric.from_json(data)


def test_unknown_metric():
    with pytest.raises(ValueError, match="unknown metric 'speed'"):
        metric_from_json("speed", {})


def test_round_sig():
    assert round_sig(0.00123456789) == 0.00123457
    assert round_sig(0.0) == 0.0
    assert round_sig(123456789.0, 3) == 123000000.0


def test_environment_id_is_content_based_and_order_free():
    a = Environment({"torch": "2", "python": "3.11"})
    b = Environment({"python": "3.11", "torch": "2"})
    assert a.id == b.id and len(a.id) == 12
    assert a.merged({"valgrind": "3.19"}).id != a.id
    assert Environment.from_json(a.to_json()) == a
    with pytest.raises(ValueError):
        Environment.from_json(["not", "a", "dict"])


def test_collect_environment_has_the_comparability_facts():
    import torch

    env = collect_environment(num_threads=3)
    for fact in ("python", "torch", "cpu_model", "cpu_capability", "machine", "num_threads"):
        assert env.facts[fact]
    assert env.facts["num_threads"] == "3" and env.facts["torch"] == torch.__version__


def test_benchmark_result_wire_form_round_trip():
    result = BenchmarkResult("m.py::t", "m.py", "t", "4", "d")
    result.metrics["time"] = TimeMetric(2, [2e-3, 2.2e-3])
    result.environments["time"] = Environment({"torch": "2"})
    result.extras["note"] = "x"
    again = BenchmarkResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again.to_json() == result.to_json()


def test_nodeid_is_its_own_field_and_old_keys_are_matched_to_collected_tests():
    from pytest_torchbench.judging.results import nodeid_among

    result = BenchmarkResult(
        key="t.py::test_p[a [b] [desc] #2",
        nodeid="t.py::test_p[a [b]",
        module="t.py",
        label="test_p",
        sub_label="a [b",
        description="desc",
    )
    assert (
        BenchmarkResult.from_json(json.loads(json.dumps(result.to_json()))).nodeid
        == "t.py::test_p[a [b]"
    )
    # results and files without the field: derived from the key as before
    assert (
        BenchmarkResult(
            key="t.py::test_q #2", module="t.py", label="", sub_label="", description=""
        ).nodeid
        == "t.py::test_q"
    )
    collected = {"t.py::test_p[a [b]", "t.py::test_p[a", "t.py::test_p[c #d]"}
    assert nodeid_among("t.py::test_p[a [b]", collected) == "t.py::test_p[a [b]"
    assert nodeid_among("t.py::test_p[a [b] [desc] #2", collected) == "t.py::test_p[a [b]"
    assert nodeid_among("t.py::test_p[c #d] #3", collected) == "t.py::test_p[c #d]"
    assert nodeid_among("t.py::gone [x]", collected) == "t.py::gone"


def test_instructions_metric_keeps_the_largest_functions_and_an_other_bucket():
    from pytest_torchbench.judging.results import InstructionsMetric

    exclusive = {f"/build/x/lib.c:f{i:03d} [libx.so]": 1000 - i for i in range(300)}
    total = sum(exclusive.values())
    metric = InstructionsMetric.from_counts(exclusive, total, number=10, warmup=10)
    assert len(metric.functions) == InstructionsMetric.MAX_FUNCTIONS + 1
    assert metric.functions["/build/x/lib.c:f000"] == 100.0  # library suffix stripped, per call
    assert abs(sum(metric.functions.values()) - total / 10) < 1e-6  # nothing lost: other bucket
    data = metric.to_json()
    assert data["warmup"] == 10 and data["number_per_run"] == 10
    back = InstructionsMetric.from_json(data)
    assert back.functions == metric.functions and back.warmup == 10


def test_instructions_names_match_torchs_as_standardized():
    from torch.utils.benchmark.utils.common import TaskSpec
    from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import (
        CallgrindStats,
        FunctionCounts,
    )

    from pytest_torchbench.judging.results import InstructionsMetric

    raw = {
        "/usr/src/build/../aten/src/ATen/native/Copy.cpp:copy_ [libtorch_cpu.so]": 40,
        "/tmp/python-build.2024/Python-3.11.7/Python/ceval.c:_PyEval_EvalFrameDefault [python]": 50,
        "/opt/x/Objects/dictobject.c:lookdict'2": 10,
    }
    counts = FunctionCounts._from_dict(raw, inclusive=False)
    empty = FunctionCounts((), inclusive=False)
    stats = CallgrindStats(TaskSpec("s", ""), 1, False, empty, empty, counts, counts, None)
    ours = InstructionsMetric.from_counts(raw, 100, 1).functions
    theirs = {fc.function for fc in stats.as_standardized().stats(inclusive=False)}
    assert {InstructionsMetric.standardized_name(n) for n in theirs} == set(ours)
    assert set(ours) == {
        "build/../aten/src/ATen/native/Copy.cpp:copy_",
        "Python/ceval.c:_PyEval_EvalFrameDefault",
        "Objects/dictobject.c:lookdict",
    }


def test_time_metric_keeps_disturbance_and_history_in_json():
    metric = TimeMetric(2, [2e-3, 2.2e-3, 1.8e-3], cpu_share=0.4567, load=7.891, history=[1.2e-3])
    data = metric.to_json()
    assert data["cpu_share"] == 0.457 and data["load"] == 7.89 and data["history"] == [1.2e-3]
    again = TimeMetric.from_json(data)
    assert (again.cpu_share, again.load, again.history) == (0.457, 7.89, [1.2e-3])
    plain = TimeMetric(1, [1e-3]).to_json()  # nothing measured: the keys stay out of the file
    assert set(plain) == {"number_per_run", "median", "iqr", "raw_times"}
    with pytest.raises(ValueError, match="history"):
        TimeMetric.from_json({**data, "history": ["x"]})


def test_saving_over_a_time_metric_keeps_the_last_medians():
    first = TimeMetric(1, [1e-3])
    second = TimeMetric(1, [2e-3]).saved_over(first)
    assert second.history == [1e-3]
    third = TimeMetric(1, [3e-3]).saved_over(second)
    assert third.history == [1e-3, 2e-3]
    assert (
        TimeMetric(1, [3e-3]).saved_over(third).history == third.history
    )  # same run again: no change
    many = first
    for k in range(2, 9):
        many = TimeMetric(1, [k * 1e-3]).saved_over(many)
    assert many.history == [4e-3, 5e-3, 6e-3, 7e-3]  # the last TimeMetric.HISTORY runs


def test_measurement_metadata_becomes_cpu_share_and_load():
    from torch.utils.benchmark import Measurement
    from torch.utils.benchmark.utils.common import TaskSpec

    measurement = Measurement(
        1, [1e-3, 1e-3], TaskSpec("x", "pass"), metadata={"cpu_share": 0.9, "load": 1.5}
    )
    metric = TimeMetric.from_measurement(measurement)
    assert (metric.cpu_share, metric.load) == (0.9, 1.5)
