"""The baseline's numbers of calls handed to the counting processes (metrics/instructions.py):
written by the run's main process, read by a worker by node id, ignored when not two integers."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchbench.core.results import BenchmarkResult
from pytest_torchbench.metrics.instructions import PLANS_VARIABLE, InstructionsMetric, planned_calls, write_plans


def entry(key: str, number: int, warmup: int | None, nodeid: str = "") -> BenchmarkResult:
    metric = InstructionsMetric(1000.0, number, {}, warmup=warmup)
    return BenchmarkResult(key=key, nodeid=nodeid, module="t.py", label=key, sub_label="", description="",
                           metrics={"instructions": metric})


@pytest.fixture
def plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(PLANS_VARIABLE, str(tmp_path))
    return tmp_path


def test_each_tests_plan_is_read_back_by_its_node_id(plans: Path) -> None:
    odd = "t.py::test_x[\u00e9\\n/../\x1b[31m" + "p" * 300 + "]"
    entries = {e.key: e for e in [entry("t.py::test_a", 2, 2), entry("t.py::test_b", 100, 100), entry(odd, 1, 1)]}
    assert write_plans(plans, entries) == 3
    assert planned_calls("t.py::test_a") == (2, 2)
    assert planned_calls("t.py::test_b") == (100, 100)
    assert planned_calls(odd) == (1, 1)
    assert planned_calls("t.py::test_c") is None  # no baseline: adaptive
    assert all(len(path.name) == 32 for path in plans.iterdir())  # names of any node id fit a folder


def test_a_test_with_several_recordings_or_an_old_baseline_gets_no_plan(plans: Path) -> None:
    entries = {e.key: e for e in [entry("t.py::test_a", 2, 1), entry("t.py::test_a [second]", 100, 100,
                                                                     nodeid="t.py::test_a"),
                                  entry("t.py::test_old", 4, None)]}
    assert write_plans(plans, entries) == 0
    assert planned_calls("t.py::test_a") is None and planned_calls("t.py::test_old") is None


def test_without_the_variable_or_with_a_mangled_file_there_is_no_plan(plans: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    write_plans(plans, {"t.py::test_a": entry("t.py::test_a", 2, 1)})
    (file,) = [path for path in plans.iterdir()]
    for text in [b"", b"2", b"2 1 3", b"two one", b"\xff\xfe", b"2.5 1"]:
        file.write_bytes(text)
        assert planned_calls("t.py::test_a") is None, text
    file.write_bytes(b"2 1\n")
    assert planned_calls("t.py::test_a") == (2, 1)
    monkeypatch.setenv(PLANS_VARIABLE, "")  # a save: the variable is there, empty
    assert planned_calls("t.py::test_a") is None
    monkeypatch.delenv(PLANS_VARIABLE)
    assert planned_calls("t.py::test_a") is None
