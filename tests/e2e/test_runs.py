"""How a benchmark run behaves as a pytest run: interrupts and signals, plugins switched off,
subset runs, and pytest-benchmark habits (issue 27's pytest-run items)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BASE_ARGS, FAST, own_lines

OPS = "--bench-mode=ops"  # deterministic and fast: no timing noise, no valgrind

TWO = """
import pytest, torch

@pytest.mark.benchmark
def test_add():
    torch.ones(4) + 1

def test_mul(benchmark):
    benchmark(lambda: torch.ones(3) * 2)
"""


def test_runs_without_xdist(bench):
    """pytest-benchmark's docs tell users to switch xdist off (`-p no:xdist`), and it may not be
    installed: xdist's hooks must not be required then."""
    bench.pytester.makepyfile(test_bench=TWO)
    result = bench.run("-p", "no:xdist", OPS, "--bench-save=main")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=2)
    assert set(bench.load("main")["benchmarks"]) == {
        "test_bench.py::test_add",
        "test_bench.py::test_mul",
    }
    compared = bench.run("-p", "no:xdist", OPS, "--bench-compare=main")
    compared.assert_outcomes(passed=2)
    compared.stdout.fnmatch_lines(["no changes beyond the limits against baseline 'main'*"])
    # instructions mode needs xdist's workers: one line, exit 4
    needs = bench.run("-p", "no:xdist", "--bench-mode=instructions")
    assert needs.ret == pytest.ExitCode.USAGE_ERROR
    needs.stderr.fnmatch_lines(["*pytest-xdist is disabled or missing*"])
    assert "INTERNALERROR" not in needs.stdout.str() + needs.stderr.str()


# -- an interrupted run never saves -------------------------------------------------------------

SECOND_CTRL_C = """
import os, signal, pytest

# Ctrl-C raises KeyboardInterrupt, as in a terminal, even where this process was started with SIGINT
# ignored (a background job of a non-interactive shell, as some test runs are)
signal.signal(signal.SIGINT, signal.default_int_handler)

@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo):
    # a second Ctrl-C (or `timeout`'s SIGINT, then the user's) while pytest handles the first:
    # it interrupts the interrupt handling, and the run is never marked interrupted
    os.kill(os.getpid(), signal.SIGINT)
"""


def test_a_second_ctrl_c_during_the_interrupt_handling_saves_nothing(bench):
    bench.pytester.makepyfile(
        test_bench=TWO
        + """
import os, signal

def test_ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)
"""
    )
    bench.pytester.makeconftest(SECOND_CTRL_C)
    result = bench.run(OPS, "--bench-save=main", "--bench-json=run.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert (
        "Traceback" not in result.stdout.str() + result.stderr.str()
    )  # the second one was not raised again
    assert not (bench.path / "baselines" / "main").exists(), result.stdout.str()
    assert not (bench.path / "run.json").exists()
    result.stdout.fnmatch_lines(["*torchbench: run interrupted: baselines were not written*"])


# -- subset runs: missing means a selected benchmark that produced nothing ----------------------

SUBSET = """
import os, pytest, torch

@pytest.mark.benchmark
@pytest.mark.parametrize("n", [1, 2])
def test_p(n):
    torch.ones(n) + 1

@pytest.mark.benchmark
def test_add():
    if os.environ.get("BENCH_RAISE"):
        raise ValueError("boom")
    torch.ones(4) + 1

class TestGroup:
    def test_mul(self, benchmark):
        benchmark(lambda: torch.ones(3) * 2)
"""


@pytest.mark.slow
def test_tests_left_out_by_node_ids_are_not_missing(bench, monkeypatch):
    bench.pytester.makepyfile(test_bench=SUBSET)
    bench.run(OPS, "--bench-save=main").assert_outcomes(passed=4)
    for selection in (
        ["test_bench.py::test_add"],
        ["test_bench.py::test_p[1]"],
        ["test_bench.py::TestGroup", "test_bench.py::test_p"],
    ):
        result = bench.run(OPS, "--bench-compare=main", *selection)
        assert result.ret == 0, result.stdout.str()
        assert "missing (" not in result.stdout.str(), (selection, result.stdout.str())
    # a selected benchmark that produced nothing is missing, by node id as by -k
    monkeypatch.setenv("BENCH_RAISE", "1")
    for selection in (["test_bench.py::test_add"], ["-k", "add"]):
        result = bench.run(OPS, "--bench-compare=main", *selection)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            ["missing (1):", "*test_bench.py::test_add: ops: in the baseline, not measured*"]
        )
    # the whole file named as well as a node of it: a test removed from it is missing again
    monkeypatch.delenv("BENCH_RAISE")
    bench.pytester.makepyfile(test_bench=SUBSET.replace("[1, 2]", "[1]"))
    result = bench.run(OPS, "--bench-compare=main", "test_bench.py::test_add", "test_bench.py")
    result.stdout.fnmatch_lines(
        ["missing (1):", "*test_bench.py::test_p[[]2]: ops: in the baseline, not measured*"]
    )


# -- SIGTERM to pytest alone: no valgrind worker and no run folder left behind -------------------

SLEEPER = """
import os, time
from pathlib import Path

def test_sleeps(benchmark):
    Path({pid_file!r}).write_text(str(os.getpid()))
    time.sleep(300)
    benchmark(len, "x")
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_sigterm_stops_the_valgrind_worker_and_removes_the_run_folder(bench, tmp_path):
    pid_file = tmp_path / "worker.pid"
    bench.pytester.makepyfile(test_bench=SLEEPER.format(pid_file=str(pid_file)))
    temp = tmp_path / "tmp"  # the run folder is made here (TMPDIR), so it can be looked for
    temp.mkdir()
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            *BASE_ARGS,
            "--bench-mode=instructions",
            "--bench-save=main",
        ],
        cwd=bench.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    worker = None
    try:
        deadline = time.monotonic() + 300
        while not pid_file.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pid_file.exists(), run.communicate()[0]
        time.sleep(0.2)
        worker = int(pid_file.read_text())
        assert _alive(worker) and list(temp.glob("torchbench-callgrind-*"))
        run.send_signal(signal.SIGTERM)
        output = run.communicate(timeout=60)[0]
        assert run.returncode == -signal.SIGTERM, output  # ends as a SIGTERM'd process does
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), f"the valgrind worker {worker} still runs"
        assert not list(temp.glob("torchbench-callgrind-*")), list(temp.iterdir())
        assert not (bench.path / "baselines" / "main").exists()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if worker is not None and _alive(worker):
            os.kill(worker, signal.SIGKILL)


# -- pytest-benchmark habits ----------------------------------------------------------------------

TWICE = """
import torch

def test_twice(benchmark):
    benchmark(torch.ones, 4)
    benchmark(torch.ones, 8)

def test_call_then_pedantic(benchmark):
    benchmark(torch.ones, 4)
    benchmark.pedantic(torch.ones, args=(8,))

def test_once(benchmark):
    benchmark(torch.ones, 4)
"""


@pytest.mark.parametrize("mode", [(), (OPS,)], ids=["plain", "ops"])
def test_benchmark_fixture_is_used_once_per_test(bench, mode):
    """As in pytest-benchmark: a second use raises, in every mode (a test that passes plainly and
    fails when measured, or the reverse, would be worse), and names what to use instead."""
    bench.pytester.makepyfile(test_bench=TWICE)
    result = bench.run(*mode, "--bench-json=run.json" if mode else "-q")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*FixtureAlreadyUsed: the benchmark fixture can be used once per test*"
            "it was used as benchmark(...) already*bench_timer*"
        ]
    )
    result.stdout.fnmatch_lines(["*it was used as benchmark(...) already*"])
    if mode:
        keys = [b["key"] for b in json.loads((bench.path / "run.json").read_text())["benchmarks"]]
        assert keys == ["test_bench.py::test_once"]  # nothing of the failed tests, no "#2"


STATS = """
import os, pytest

def test_reads_stats(benchmark):
    assert benchmark.stats is None  # before use, as in pytest-benchmark
    benchmark(sum, range(100))
    mode = os.environ["MODE"]
    if mode == "plain":
        assert benchmark.stats is None  # pytest-benchmark's, disabled
    elif mode == "time":
        stats = benchmark.stats.stats
        assert 0 < stats.min <= stats.median <= stats.max < 0.01
        assert stats.min <= stats.mean <= stats.max and stats.rounds >= 2 and stats.stddev >= 0
        assert (benchmark.stats["median"] == stats.median
                and stats.ops == pytest.approx(1 / stats.mean))
        assert set(stats.as_dict()) >= {"min", "max", "mean", "stddev", "median", "iqr", "q1", "q3",
                                        "ops", "rounds"}
        print("STATS-OK")
    else:
        # an AttributeError: guarded reads still work
        assert getattr(benchmark, "stats", None) is None
        benchmark.stats.stats.mean
"""


@pytest.mark.parametrize("mode", ["plain", "time", "ops"])
def test_benchmark_stats_as_in_pytest_benchmark_or_a_clear_error(bench, monkeypatch, mode):
    bench.pytester.makepyfile(test_bench=STATS)
    monkeypatch.setenv("MODE", mode)
    args = {"plain": (), "time": ("--bench-mode=time", FAST, "-s"), "ops": (OPS,)}[mode]
    result = bench.run(*args)
    if mode == "ops":
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            [
                "*StatsUnavailable: benchmark.stats holds wall-time statistics, "
                "measured with --bench-mode=time only;"
                " this run (--bench-mode=ops) counts instead*"
            ]
        )
    else:
        result.assert_outcomes(passed=1)
        assert ("STATS-OK" in result.stdout.str()) == (mode == "time")


BENCHMARK_JSON = """
import pytest, torch

@pytest.mark.parametrize("n", [4, 16])
def test_add(benchmark, n):
    benchmark.group = "adds"
    benchmark.extra_info["n"] = n
    x = torch.ones(n)
    benchmark(torch.add, x, x)

@pytest.mark.benchmark(max_run_time=0.3)
def test_marked():
    torch.ones(8) * 2
"""


def test_benchmark_json_is_written_in_pytest_benchmarks_format_or_refused(bench):
    """CI written for pytest-benchmark passes --benchmark-json and uploads the file: with a
    --bench-* option the run is torchbench's, and the file still comes, in pytest-benchmark's
    schema."""
    pytest.importorskip("pytest_benchmark", reason="--benchmark-json is pytest-benchmark's option")
    bench.pytester.makepyfile(test_bench=BENCHMARK_JSON)
    out = bench.path / "pb.json"

    def run(*args: str) -> pytest.RunResult:  # pytest-benchmark installed and not disabled
        return bench.pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=240)

    run("--bench-mode=time", FAST, f"--benchmark-json={out}").assert_outcomes(passed=3)
    document = json.loads(out.read_text())
    assert set(document) == {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    by_name = {b["name"]: b for b in document["benchmarks"]}
    assert sorted(by_name) == ["test_add[16]", "test_add[4]", "test_marked"]
    add = by_name["test_add[4]"]
    assert (add["fullname"], add["group"], add["param"], add["extra_info"]) == (
        "test_bench.py::test_add[4]",
        "adds",
        "4",
        {"n": 4},
    )
    stats = add["stats"]
    assert (
        0 < stats["min"] <= stats["median"] <= stats["max"]
        and stats["rounds"] == len(stats["data"]) >= 2
    )
    assert stats["iterations"] >= 1 and stats["ops"] == pytest.approx(1 / stats["mean"])
    # pytest-benchmark's own reader takes it (`pytest-benchmark compare` loads such files)
    from pytest_benchmark.stats import normalize_stats

    assert normalize_stats(dict(stats))["ops"] == stats["ops"]
    # a run that measures no wall time has nothing for that format: one line, exit 4, no file
    out.unlink()
    refused = run(OPS, f"--benchmark-json={out}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        [
            f"ERROR: --benchmark-json={out}: pytest-benchmark's format holds wall times, "
            "and this run (--bench-mode=ops) measures none; add time to --bench-mode*"
        ]
    )
    import importlib.metadata

    if tuple(int(p) for p in importlib.metadata.version("pytest-benchmark").split(".")[:2]) < (
        5,
        3,
    ):
        assert (
            out.read_bytes() == b""
        )  # pytest-benchmark < 5.3 opens (and empties) it at parse time
    else:
        assert not out.exists()


def test_benchmark_json_dash_is_refused_as_the_installed_pytest_benchmark_passes_it(bench):
    """pytest-benchmark 5.3 passes ``--benchmark-json=-`` as the string "-" (5.2 as standard
    output, an open file): refused the same way, before any test runs, and no file named ``-``
    is written (it was, by a time run)."""
    pytest.importorskip("pytest_benchmark", reason="--benchmark-json is pytest-benchmark's option")
    bench.pytester.makepyfile(test_bench=BENCHMARK_JSON)
    refused = bench.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--bench-mode=time", FAST, "--benchmark-json=-", timeout=240
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()
    assert own_lines(refused.stderr.str()) == [
        "ERROR: --benchmark-json=-: give a file path (pytest-torchbench writes the wall times "
        "there in pytest-benchmark's format)"
    ]
    assert not (bench.path / "-").exists()


OLD_BENCHMARK_JSON_OPTION = """
import argparse


# as pytest-benchmark before 5.3 declares it: an open file, not a path
def pytest_addoption(parser):
    parser.addoption("--benchmark-json", metavar="PATH", type=argparse.FileType("wb"))
"""


def test_benchmark_json_of_pytest_benchmark_before_5_3_is_written_to_its_path(bench):
    """pytest-benchmark 5.2 (on the GPU machine of issue 24, and in many projects) parses
    --benchmark-json as ``argparse.FileType("wb")``: the option's value is an open file. The path
    was taken from the file object's repr, so the JSON went to a folder named
    ``<_io.BufferedWriter name='...`` in the working directory and the named file stayed empty."""
    bench.pytester.makepyfile(test_bench=BENCHMARK_JSON)
    bench.pytester.makeconftest(OLD_BENCHMARK_JSON_OPTION)
    out = bench.path / "pb.json"
    result = bench.pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-p",
        "no:benchmark",
        "--bench-mode=time",
        FAST,
        f"--benchmark-json={out}",
        timeout=240,
    )
    result.assert_outcomes(passed=3)
    document = json.loads(out.read_text())
    assert sorted(b["name"] for b in document["benchmarks"]) == [
        "test_add[16]",
        "test_add[4]",
        "test_marked",
    ]
    assert not [p.name for p in bench.path.iterdir() if p.name.startswith("<")]
    refused = bench.pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-p",
        "no:benchmark",
        "--bench-mode=time",
        FAST,
        "--benchmark-json=-",
        timeout=240,
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["ERROR: --benchmark-json=-: give a file path*"])


PEDANTIC_SETUP = """
import random, pytest, torch

def fresh_tensor():
    return (torch.ones(4),), {}

def zero_once(t):
    if bool(t.sum() > 0):  # only a fresh tensor is zeroed: shared state would skip it
        t.zero_()

def test_state(benchmark):
    benchmark.pedantic(zero_once, setup=fresh_tensor, teardown=lambda t: TORN.append(t))
    assert all(t.sum() == 0 for t in TORN)  # every call's arguments were torn down

TORN = []

def shuffled():
    data = list(range(300))
    random.Random(1).shuffle(data)
    return (data,), {}

def test_sort(benchmark):
    benchmark.pedantic(list.sort, setup=shuffled)

@pytest.mark.benchmark(number=1, warmup=0)
def test_sort_once(benchmark):
    benchmark.pedantic(list.sort, setup=shuffled)

def helper(item):
    return item

def fresh_list():
    return ([1, 2, 3],), {}

def drain(items):
    while items:  # only a fresh list is drained: shared state would call helper 0 times
        helper(items.pop())

def test_drain(benchmark):
    benchmark.pedantic(drain, setup=fresh_list)
"""


def test_pedantic_setup_runs_before_every_counted_call(bench):
    """pytest-benchmark runs ``setup`` before every round: each counted call measures the state its
    own setup made, never what earlier calls left (a sort of an already sorted list)."""
    bench.pytester.makepyfile(test_bench=PEDANTIC_SETUP)
    bench.run("--bench-mode=ops,memory", "-k", "state", "--bench-json=run.json").assert_outcomes(
        passed=1
    )
    (entry,) = json.loads((bench.path / "run.json").read_text())["benchmarks"]
    assert entry["metrics"]["ops"]["ops"]["aten::zero_"] == 1.0, entry["metrics"]["ops"]


def test_pedantic_setup_runs_before_every_call_of_python_calls(bench):
    """The calls engine too: every counted call drains its own list, and the setup's own Python
    calls are not counted."""
    bench.pytester.makepyfile(test_bench=PEDANTIC_SETUP)
    bench.run("--bench-mode=calls", "-k", "drain", "--bench-json=run.json").assert_outcomes(
        passed=1
    )
    (entry,) = json.loads((bench.path / "run.json").read_text())["benchmarks"]
    assert entry["metrics"]["calls"]["calls"] == {
        "test_bench.py:drain": 1.0,
        "test_bench.py:helper": 3.0,
    }


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_pedantic_setup_gives_each_counted_instruction_call_its_own_state(bench):
    bench.pytester.makepyfile(test_bench=PEDANTIC_SETUP)
    bench.run(
        "--bench-mode=instructions", "-k", "sort", "--bench-json=run.json", timeout=900
    ).assert_outcomes(passed=2)
    counts = {
        b["key"].rsplit("::", 1)[1]: b["metrics"]["instructions"]
        for b in json.loads((bench.path / "run.json").read_text())["benchmarks"]
    }
    assert counts["test_sort"]["number_per_run"] == 100
    # measured: 103,573 per call over 100 calls with a setup each, 103,272 for one call; a shared
    # list (sorted by the first call) counted far fewer
    assert counts["test_sort"]["instructions_per_run"] == pytest.approx(
        counts["test_sort_once"]["instructions_per_run"], rel=0.05
    ), counts
