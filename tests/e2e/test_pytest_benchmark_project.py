"""Done means (issue 10): a suite written in pytest-benchmark's style runs unchanged in plain,
time, ops and instructions modes, with pytest-benchmark installed and not disabled."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip(
    "pytest_benchmark", reason="the two-plugins tests need pytest-benchmark installed"
)

PROJECT = Path(__file__).parent / "projects" / "pytest_benchmark_style"
BENCHMARKS = 7  # 4 test_add + convnet + augmentation + pedantic; plus one unit test


@pytest.fixture
def project(bench):
    shutil.copytree(PROJECT, bench.path, dirs_exist_ok=True)
    return bench


def _run(project, *args, timeout=300):
    # no -p no:benchmark: pytest-benchmark is installed and active
    return project.pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=timeout)


def _benchmarks(project, name="out.json"):
    return {b["key"]: b for b in json.loads((project.path / name).read_text())["benchmarks"]}


def test_plain_run_is_pytest_benchmark(project):
    result = _run(project, "--benchmark-max-time=0.05", "--benchmark-columns=min,rounds")
    result.assert_outcomes(passed=BENCHMARKS + 1)
    result.stdout.fnmatch_lines(["*benchmark 'augment'*", "*benchmark 'pedantic'*"])  # its table


def test_time_mode(project):
    result = _run(
        project,
        "--bench-mode=time",
        "--bench-min-run-time=0.02",
        "--bench-json=out.json",
        "--bench-save=main",
    )
    result.assert_outcomes(passed=BENCHMARKS + 1)
    found = _benchmarks(project)
    assert len(found) == BENCHMARKS
    assert found["test_vision.py::test_add[torch.float32-16]"]["group"] == "elementwise"
    assert found["test_vision.py::test_add[torch.float64-32]"]["extra_info"] == {"numel": 1024}
    assert found["test_vision.py::test_convnet_forward"]["group"] == "model"
    pedantic = found["test_vision.py::test_pedantic_inplace_relu"]
    assert (pedantic["group"], pedantic["extra_info"]) == ("pedantic", {"inplace": True})
    assert len(pedantic["metrics"]["time"]["raw_times"]) == 20
    saved = project.load("main", "test_vision.json")["benchmarks"]
    assert saved["test_vision.py::test_pedantic_inplace_relu"]["extra_info"] == {"inplace": True}


def test_ops_mode_save_then_compare_is_clean(project):
    result = _run(project, "--bench-mode=ops", "--bench-json=out.json", "--bench-save=main")
    result.assert_outcomes(passed=BENCHMARKS + 1)
    first = {k: v["metrics"]["ops"]["ops"] for k, v in _benchmarks(project).items()}
    assert "aten::conv2d" in first["test_vision.py::test_convnet_forward"]
    result = _run(project, "--bench-mode=ops", "--bench-json=out.json", "--bench-compare=main")
    result.assert_outcomes(passed=BENCHMARKS + 1)  # A/A, random augmentation included
    assert {k: v["metrics"]["ops"]["ops"] for k, v in _benchmarks(project).items()} == first


@pytest.mark.slow
def test_instructions_mode(project):
    """A few small benchmarks of the suite (valgrind: each costs seconds), save then compare."""
    subset = ("-k", "add and float32-16 or random_augmentation or pedantic")
    result = _run(
        project,
        "--bench-mode=instructions",
        *subset,
        "--bench-json=out.json",
        "--bench-save=main",
        timeout=400,
    )
    assert result.ret == 0 and result.parseoutcomes()["passed"] == 3  # xdist workers deselect
    found = _benchmarks(project)
    assert found["test_vision.py::test_random_augmentation"]["group"] == "augment"
    assert all(b["metrics"]["instructions"]["instructions_per_run"] > 0 for b in found.values())
    result = _run(
        project, "--bench-mode=instructions", *subset, "--bench-compare=main", timeout=400
    )
    assert result.ret == 0 and result.parseoutcomes()["passed"] == 3  # xdist workers deselect
