"""Each benchmark starts from the same process state, whatever the test before it left behind:
torch's thread count (``torch.set_num_threads`` in a benchmark) and a torch profiler left
running."""

from __future__ import annotations

import json

import pytest

THREADS_MODULE = """
import json, os, pytest, torch

@pytest.mark.benchmark
def test_a_sets_threads():
    torch.set_num_threads(2)
    torch.ones(4) + 1

def test_b_measures(benchmark):
    seen = []
    def fn():
        seen.append(torch.get_num_threads())
        return torch.ones(4) * 2
    benchmark(fn)
    with open("threads.json", "w") as out:
        json.dump({"during_b": sorted(set(seen))}, out)

def test_c_plain():
    with open("threads_c.json", "w") as out:
        json.dump(torch.get_num_threads(), out)
"""


def test_set_num_threads_in_a_benchmark_does_not_leak(bench) -> None:
    bench.pytester.makepyfile(test_bench=THREADS_MODULE)
    result = bench.run("--bench-mode=ops", "-p", "no:randomly")
    assert result.ret == 0, result.stdout.str()
    seen = json.loads((bench.path / "threads.json").read_text())
    assert seen["during_b"] == [1], seen  # measured with the 1 thread its fingerprint records
    assert (
        json.loads((bench.path / "threads_c.json").read_text()) == 1
    )  # restored after the benchmark
    # the fingerprint and what ran agree
    assert "num_threads" not in result.stdout.str() or "not comparable" not in result.stdout.str()


PROFILER_MODULE = """
import pytest, torch

{marker}
def test_a_leaves_profiler_running():
    prof = torch.profiler.profile()
    prof.start()
    torch.ones(4) + 1

@pytest.mark.benchmark
def test_b_measured():
    torch.ones(4) * 2

def test_c_profiles(bench_profiler):
    with bench_profiler as prof:
        torch.ones(4) - 1
"""


@pytest.mark.parametrize("mode", ["ops", "time"])
def test_profiler_left_running_is_stopped_with_one_warning(bench, mode: str) -> None:
    # a plain test: a benchmark that starts a profiler in its body cannot be measured by ops (one
    # profiler at a time), and fails itself with a clear error; here the NEXT tests are at stake
    bench.pytester.makepyfile(test_bench=PROFILER_MODULE.format(marker=""))
    result = bench.run(f"--bench-mode={mode}", "--bench-min-run-time=0.02", "-W", "default")
    out = result.stdout.str()
    assert result.ret == 0, out
    result.assert_outcomes(passed=3)
    assert out.count("left a torch profiler running") == 1, out
    assert "test_bench.py::test_a_leaves_profiler_running left a torch profiler running" in out


def test_profiler_left_running_plain_run(bench) -> None:
    """Without any --bench option a marked test is a plain test, but bench_profiler still works
    after it."""
    bench.pytester.makepyfile(test_bench=PROFILER_MODULE.format(marker="@pytest.mark.benchmark"))
    result = bench.run("-W", "default")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=3)
    assert result.stdout.str().count("left a torch profiler running") == 1
