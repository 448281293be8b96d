"""Bad input gets one clear line, exit status 4 for usage errors, and loses nothing."""
from __future__ import annotations

import json

import pytest

from conftest import FAST

BENCH = """
import os, pytest

@pytest.mark.benchmark(max_run_time=0.3)
def test_ok():
    sum(range(100))

@pytest.mark.benchmark(max_run_time=0.3)
def test_may_raise():
    if os.environ.get("BENCH_RAISE"):
        raise ValueError("boom from the benchmark")
    sum(range(50))
"""


@pytest.fixture
def saved(bench):
    bench.pytester.makepyfile(test_bench=BENCH)
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=2)
    return bench


def _one_clear_line(result, *needles):
    assert result.ret == 4
    err = result.stderr.str()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err + result.stdout.str()
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("content, needle", [
    ('{"schema": 1, "module": "test_bench.py", "benchm', "is not valid JSON"),
    ("", "is not valid JSON"),
    ('{"schema": 99, "module": "test_bench.py", "benchmarks": {}}', "has schema 99"),
    ('[1, 2]', "is not a JSON object"),
    ('{"schema": 1, "module": "m.py", "benchmarks": {"k": {"metrics": {"time": {"raw_times": "x"}}}}}',
     "is malformed"),
])
@pytest.mark.parametrize("option", ["--bench-compare=main", "--bench-save=main"])
def test_bad_baseline_file_is_named_kept_and_exits_4(saved, content, needle, option):
    path = saved.baseline("main")
    path.write_text(content)
    before = path.read_bytes()
    result = saved.run(option, FAST)
    _one_clear_line(result, str(path), needle, "left untouched")
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["test_bench.json"]  # no temp files


def test_unknown_baseline_name_lists_existing_sets(saved):
    saved.run("--bench-save=other", FAST, "-k", "ok").assert_outcomes(passed=1)
    result = saved.run("--bench-compare=mian", FAST)
    _one_clear_line(result, "no baseline set 'mian'", "existing sets: main, other")


def test_missing_baselines_folder(bench):
    bench.pytester.makepyfile(test_bench=BENCH)
    result = bench.run("--bench-compare=main", FAST)
    _one_clear_line(result, "no baseline set 'main'", "does not exist", "--bench-save=main")
    assert not (bench.path / "baselines").exists()
    # --bench-save creates the folder, and a custom one from the ini
    bench.pytester.makeini("[pytest]\nbench_baselines_dir = perf/base\n")
    bench.run("--bench-save=main", FAST).assert_outcomes(passed=2)
    assert (bench.path / "perf" / "base" / "main" / "test_bench.json").is_file()
    bench.run("--bench-compare=main", FAST).assert_outcomes(passed=2)


@pytest.mark.parametrize("spec, needle", [
    ("time", "cannot read 'time'"),
    ("time:fast", "cannot read 'time:fast'"),
    ("speed:5%", "unknown metric 'speed'"),
    ("", "empty limits"),
])
def test_bad_bench_fail_spec_exits_4(bench, spec, needle):
    bench.pytester.makepyfile(test_bench=BENCH)
    _one_clear_line(bench.run(f"--bench-fail={spec}"), "--bench-fail", needle)


@pytest.mark.parametrize("args, needle", [
    (("--bench-mode=speed",), "unknown mode 'speed'"),
    (("--bench-save=../x",), "a baseline set name is"),
    (("--bench-mode=time", "--bench-min-run-time=0"), "must be > 0"),
])
def test_other_usage_errors_exit_4(bench, args, needle):
    bench.pytester.makepyfile(test_bench=BENCH)
    _one_clear_line(bench.run(*args), needle)


def test_benchmark_that_raises_fails_and_keeps_its_old_entry(saved, monkeypatch):
    before = saved.load("main")["benchmarks"]
    monkeypatch.setenv("BENCH_RAISE", "1")
    json_path = saved.path / "run.json"
    result = saved.run("--bench-save=main", FAST, f"--bench-json={json_path}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ValueError: boom from the benchmark*"])
    after = saved.load("main")["benchmarks"]
    assert after["test_bench.py::test_may_raise"] == before["test_bench.py::test_may_raise"]
    assert after["test_bench.py::test_ok"] != before["test_bench.py::test_ok"]
    keys = [b["key"] for b in json.loads(json_path.read_text())["benchmarks"]]
    assert keys == ["test_bench.py::test_ok"]


def test_benchmark_raising_inside_the_fixture_stores_nothing(bench):
    bench.pytester.makepyfile(test_bench="""
        calls = []
        def flaky():
            calls.append(1)
            if len(calls) > 3:
                raise RuntimeError("fails while measured")
        def test_flaky(benchmark):
            benchmark(flaky)
    """)
    result = bench.run("--bench-save=main", FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: fails while measured*"])
    assert not (bench.path / "baselines" / "main").exists()
    assert "no benchmark results: baseline set 'main' left as it was" in result.stdout.str()


def test_interrupted_run_writes_no_baseline_and_says_so(saved):
    before = saved.baseline("main").read_bytes()
    saved.pytester.makepyfile(test_bench=BENCH + """
def test_interrupt():
    raise KeyboardInterrupt
""")
    result = saved.run("--bench-save=main", FAST, "--bench-json=run.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*torchbench: run interrupted: baselines were not written*"])
    assert saved.baseline("main").read_bytes() == before
    assert not (saved.path / "run.json").exists()
    assert sorted(p.name for p in saved.baseline("main").parent.iterdir()) == ["test_bench.json"]
