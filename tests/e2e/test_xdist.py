"""pytest -n 2: workers measure, the controller gathers and writes the baselines once."""

from __future__ import annotations

import json

from conftest import FAST

NOISY = "wall time measured by parallel xdist workers"


def test_xdist_save_writes_once_and_warns_once(bench):
    bench.pytester.makepyfile(
        test_bench="""
        import pytest, torch
        @pytest.mark.parametrize("n", range(6))
        @pytest.mark.benchmark(max_run_time=0.3)
        def test_add(n):
            torch.ones(16) + n
        def test_fixture(benchmark):
            benchmark(torch.ones, 4)
    """
    )
    result = bench.run(
        "-n",
        "2",
        "--bench-mode=time",
        "--bench-save=main",
        FAST,
        f"--bench-json={bench.path / 'run.json'}",
    )
    result.assert_outcomes(passed=7)
    out = result.stdout.str() + result.stderr.str()
    assert out.count(NOISY) == 1, out
    assert out.count("saved 7 benchmark result(s) to baseline set 'main'") == 1
    document = bench.load("main")
    assert sorted(document["benchmarks"]) == sorted(
        [f"test_bench.py::test_add[{n}]" for n in range(6)] + ["test_bench.py::test_fixture"]
    )
    assert len(document["environments"]) == 1
    run = json.loads((bench.path / "run.json").read_text())
    assert len(run["benchmarks"]) == 7
    # compare under xdist: verdicts come back from the workers; removed tests are missing
    bench.pytester.makepyfile(
        test_bench="""
        import pytest, torch
        @pytest.mark.parametrize("n", range(5))
        @pytest.mark.benchmark(max_run_time=0.3, limits="time:1000%")
        def test_add(n):
            torch.ones(16) + n
    """
    )
    result = bench.run("-n", "2", "--bench-compare=main", FAST)
    result.assert_outcomes(passed=5)
    out = result.stdout.str()
    assert "missing (2):" in out
    assert "test_bench.py::test_add[5]: time: in the baseline" in out
    assert "test_bench.py::test_fixture: time: in the baseline" in out


def test_the_summary_counts_what_the_workers_deselected(bench):
    """xdist collects in its workers and drops their deselected count; a benchmarking run keeps
    it."""
    bench.pytester.makepyfile(
        test_bench="""
        import pytest, torch
        @pytest.mark.parametrize("n", range(4))
        @pytest.mark.benchmark
        def test_add(n):
            torch.ones(16) + n
    """
    )
    result = bench.run("-n", "2", "--bench-mode=ops", "-k", "1 or 2")
    result.stdout.fnmatch_lines(["*= 2 passed, 2 deselected in *"])
