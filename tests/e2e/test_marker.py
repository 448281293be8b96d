"""The marker, the fixtures and plain (no bench option) runs, through real pytest subprocesses."""

from __future__ import annotations

import json

from conftest import FAST

COUNTING = """
import os, pytest

def _count(name):
    with open(os.path.join(os.environ["COUNT_DIR"], name), "a") as f:
        f.write("x")

@pytest.mark.benchmark
def test_body():
    _count("body")

@pytest.mark.benchmark(label="adds", description="fixture")
def test_fixture(benchmark):
    _count("fixture_test")
    assert benchmark(lambda a, b: (_count("fixture_fn"), a + b)[1], 2, b=3) == 5

def test_unmarked():
    _count("unmarked")
"""


def _counts(path):
    return {p.name: len(p.read_text()) for p in path.iterdir()}


def test_plain_run_calls_each_marked_test_once(bench, monkeypatch):
    counts = bench.path / "counts"
    counts.mkdir()
    monkeypatch.setenv("COUNT_DIR", str(counts))
    bench.pytester.makepyfile(test_bench=COUNTING)
    result = bench.run()
    result.assert_outcomes(passed=3)
    assert _counts(counts) == {"body": 1, "fixture_test": 1, "fixture_fn": 1, "unmarked": 1}
    assert "torchbench" not in result.stdout.str().split("passed")[0].split("collected")[-1]
    assert not (bench.path / "baselines").exists()


def test_time_mode_measures_body_without_fixture_and_only_fn_with_it(bench, monkeypatch):
    counts = bench.path / "counts"
    counts.mkdir()
    monkeypatch.setenv("COUNT_DIR", str(counts))
    bench.pytester.makepyfile(test_bench=COUNTING)
    result = bench.run("--bench-mode=time", FAST, f"--bench-json={bench.path / 'out.json'}")
    result.assert_outcomes(passed=3)
    found = _counts(counts)
    assert found["body"] > 10  # the whole body is the measured region
    assert found["fixture_test"] == 1  # with the fixture only fn is repeated
    assert found["fixture_fn"] > 10
    assert found["unmarked"] == 1
    document = json.loads((bench.path / "out.json").read_text())
    by_key = {b["key"]: b for b in document["benchmarks"]}
    assert set(by_key) == {"test_bench.py::test_body", "test_bench.py::test_fixture"}
    assert by_key["test_bench.py::test_fixture"]["label"] == "adds"
    assert by_key["test_bench.py::test_fixture"]["description"] == "fixture"
    assert by_key["test_bench.py::test_body"]["label"] == "test_body"


def test_marker_is_registered_under_strict_markers(bench):
    bench.pytester.makepyfile(
        test_bench="""
        import pytest
        @pytest.mark.benchmark(label="x")
        def test_a():
            pass
    """
    )
    bench.run("--strict-markers").assert_outcomes(passed=1)
    bench.run("--strict-markers", "--bench-mode=time", FAST).assert_outcomes(passed=1)
    result = bench.run("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.benchmark(label=None, sub_label=None*"])


def test_unknown_marker_keyword_is_an_error_naming_it(bench):
    bench.pytester.makepyfile(
        test_bench="""
        import pytest
        @pytest.mark.benchmark(min_runtime=0.5)
        def test_typo():
            pass
        @pytest.mark.benchmark(num_threads=0)
        def test_bad_value():
            pass
        @pytest.mark.benchmark(limits="time:lots")
        def test_bad_limit():
            pass
    """
    )
    for args in ((), ("--bench-mode=time", FAST)):
        result = bench.run(*args)
        result.assert_outcomes(errors=3)
        out = result.stdout.str()
        assert "unknown @pytest.mark.benchmark keyword 'min_runtime'" in out
        assert "num_threads=0 must be an integer >= 1" in out
        assert "cannot read 'time:lots'" in out or "time:lots" in out
        assert "Traceback" not in out


def test_marker_keywords_reach_the_measurement(bench):
    bench.pytester.makepyfile(
        test_bench="""
        import pytest, torch
        seen = []
        @pytest.mark.benchmark(num_threads=2, threshold=0.5, min_run_time=0.01, max_run_time=0.5,
                               limits={"time": "50%"}, sub_label="two threads")
        def test_threads():
            seen.append(torch.get_num_threads())
        def test_after():
            # the first call is the test's real run (torch's default threads); every measured
            # call runs under the marker's num_threads, as Timer(num_threads=2) does
            assert set(seen[1:]) == {2}, seen
    """
    )
    result = bench.run("--bench-mode=time", f"--bench-json={bench.path / 'out.json'}")
    result.assert_outcomes(passed=2)
    document = json.loads((bench.path / "out.json").read_text())
    (entry,) = document["benchmarks"]
    assert entry["sub_label"] == "two threads"
    assert entry["environments"]["time"]["num_threads"] == "2"


def test_bench_timer_records_with_defaults_from_test_id_and_params(bench):
    bench.pytester.makepyfile(
        test_bench="""
        import pytest, torch

        @pytest.mark.parametrize("n", [4, 16])
        def test_add(bench_timer, n):
            x = torch.ones(n)
            t = bench_timer("x + x", globals={"x": x})
            m = t.blocked_autorange(min_run_time=0.02)
            assert m.median > 0
            t.timeit(100)
            t.adaptive_autorange(min_run_time=0.01, max_run_time=0.2)
            bench_timer("y * 2", setup="y = torch.ones(3)", globals={"torch": torch},
                        description="mul").timeit(10)
    """
    )
    result = bench.run("--bench-mode=time", f"--bench-json={bench.path / 'out.json'}")
    result.assert_outcomes(passed=2)
    document = json.loads((bench.path / "out.json").read_text())
    keys = sorted(b["key"] for b in document["benchmarks"])
    assert keys == sorted(
        f"test_bench.py::test_add[{n}]{suffix}"
        for n in (4, 16)
        for suffix in ("", " #2", " #3", " [mul]")
    )
    for b in document["benchmarks"]:
        assert b["label"] == "test_add"
        assert b["sub_label"] in ("4", "16")
        assert b["metrics"]["time"]["raw_times"]
    assert {b["description"] for b in document["benchmarks"]} == {"", "mul"}
    # plain run: each timing method runs the statement once, nothing recorded, no table
    plain = bench.run()
    plain.assert_outcomes(passed=2)
    assert "torchbench time" not in plain.stdout.str()


def test_benchmark_fixture_unmarked_test_is_measured(bench):
    bench.pytester.makepyfile(
        test_bench="""
        def test_plain_fixture(benchmark):
            assert benchmark(sorted, [3, 1, 2]) == [1, 2, 3]
    """
    )
    result = bench.run("--bench-mode=time", FAST)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*torchbench time*", "[[] test_plain_fixture []]"])


def test_non_finite_and_fractional_marker_numbers_are_one_line_errors(bench):
    """Issue 8: max_run_time=nan/inf passed validation and the test never ended; a fractional
    number must not be truncated. Each is one line naming the test and the keyword."""
    bench.pytester.makepyfile(
        test_bench="""
        import pytest
        @pytest.mark.benchmark(max_run_time=float("nan"))
        def test_nan():
            pass
        @pytest.mark.benchmark(max_run_time=float("inf"), threshold=0.0000001)
        def test_inf():
            pass
        @pytest.mark.benchmark(min_run_time=float("inf"))
        def test_min_inf():
            pass
        @pytest.mark.benchmark(max_time=float("nan"))
        def test_pytest_benchmark_nan():
            pass
        @pytest.mark.benchmark(number=2.5)
        def test_fractional():
            pass
    """
    )
    result = bench.run("--bench-mode=time", FAST, timeout=60)
    result.assert_outcomes(errors=5)
    out = result.stdout.str()
    assert "test_bench.py::test_nan: max_run_time=nan must be a finite number > 0" in out
    assert "test_bench.py::test_inf: max_run_time=inf must be a finite number > 0" in out
    assert "test_bench.py::test_min_inf: min_run_time=inf must be a finite number > 0" in out
    assert (
        "test_bench.py::test_pytest_benchmark_nan: max_time=nan must be a finite number > 0" in out
    )
    assert (
        "test_bench.py::test_fractional: number=2.5 must be a whole number (not truncated) >= 1"
        in out
    )
    assert "Traceback" not in out


def test_profiler_keywords_of_the_wrong_type_are_one_line_errors(bench):
    """Issue 8: profile= and ops_by_shape= of the wrong type ended in a TypeError from inside
    the profiler; now one line naming the test and the keyword, before anything is measured."""
    bench.pytester.makepyfile(
        test_bench="""
        import pytest, torch
        @pytest.mark.benchmark(profile={"record_shapes": "yes"})
        def test_profile_value():
            torch.ones(2) + 1
        @pytest.mark.benchmark(profile={"with_stakc": True})
        def test_profile_typo():
            torch.ones(2) + 1
        @pytest.mark.benchmark(profile=["record_shapes"])
        def test_profile_not_a_dict():
            torch.ones(2) + 1
        @pytest.mark.benchmark(ops_by_shape="yes")
        def test_by_shape(benchmark):
            benchmark(torch.add, torch.ones(2), 1)
    """
    )
    result = bench.run("--bench-mode=ops", "--bench-profile", timeout=120)
    result.assert_outcomes(errors=4)
    out = result.stdout.str()
    assert (
        "test_bench.py::test_profile_value: profile={'record_shapes': 'yes'}: "
        "profiler option 'record_shapes' must be True or False" in out
    )
    assert (
        "test_bench.py::test_profile_typo: profile={'with_stakc': True}: "
        "unknown profiler option 'with_stakc'" in out
    )
    assert (
        "test_bench.py::test_profile_not_a_dict: profile=['record_shapes'] "
        "must be a dict of profiler options" in out
    )
    assert "test_bench.py::test_by_shape: ops_by_shape='yes' must be True or False" in out
    assert "Traceback" not in out and "TypeError" not in out


def test_seed_keyword_is_validated(bench):
    bench.pytester.makepyfile(
        test_bench="""
        import pytest
        @pytest.mark.benchmark(seed=-1)
        def test_negative():
            pass
        @pytest.mark.benchmark(seed="0")
        def test_string():
            pass
        @pytest.mark.benchmark(seed=2**40)
        def test_too_large():
            pass
        @pytest.mark.benchmark(seed=None)
        def test_none_is_fine():
            pass
    """
    )
    result = bench.run("--bench-mode=ops", timeout=120)
    result.assert_outcomes(errors=3, passed=1)
    out = result.stdout.str()
    assert "test_bench.py::test_negative: seed=-1 must be an integer >= 0" in out
    assert "test_bench.py::test_string: seed='0' must be an integer >= 0" in out
    assert "test_bench.py::test_too_large: seed=1099511627776 must be at most 4294967295" in out


def test_keywords_given_as_none_mean_their_default(bench):
    """The marker's signature reads ``number=None, warmup=None``: passing None (a suite that reads
    its counts from the environment, ``warmup=int(os.environ.get("WU", 0)) or None``) is the
    default, not an error ("warmup=None must be an integer >= 0", seen 2026-11-28)."""
    bench.pytester.makepyfile(
        test_bench="""
        import pytest, torch
        @pytest.mark.benchmark(number=None, warmup=None)
        def test_defaults():
            torch.ones(4) + 1
    """
    )
    bench.run("--bench-mode=ops", timeout=120).assert_outcomes(passed=1)


SEEDED_TESTS = """
import pytest, torch

@pytest.fixture
def drawn():
    return torch.rand(()).item()

def test_first(benchmark):
    benchmark(torch.rand, 100)  # leaves torch's generator somewhere after its warm-up and region

def test_second(benchmark, drawn):
    body = torch.rand(()).item()
    benchmark.extra_info.update(fixture=drawn, body=body)
    k = 1 + int(body * 40)
    benchmark(lambda: [torch.zeros(1) for _ in range(k)])  # its op count follows the body's draw

@pytest.mark.benchmark(seed=7)
def test_own_seed(benchmark):
    benchmark.extra_info["body"] = torch.rand(()).item()
    benchmark(torch.zeros, 1)

@pytest.fixture(scope="module")
def weights():
    return torch.rand(4)

def test_plain_needs_weights_first(weights):
    assert weights.shape == (4,)

def test_after_a_module_fixture(benchmark, weights):
    body = torch.rand(()).item()
    benchmark.extra_info.update(weights=weights.tolist(), body=body)
    k = 1 + int(body * 40)
    benchmark(lambda: [torch.zeros(1) for _ in range(k)])

@pytest.fixture
def lazy_numpy_draw():
    import numpy as np
    return float(np.random.rand())

def test_numpy_fixture(benchmark, lazy_numpy_draw):
    benchmark.extra_info["numpy"] = lazy_numpy_draw
    benchmark(torch.zeros, 1)
"""


def test_counting_modes_seed_each_test_before_its_fixtures(bench):
    """What a fixture (of any scope) or the test body draws, and so what the benchmark counts, is
    the same whichever tests ran before it in the process: otherwise the counts depend on the
    order, on -k and -n, and (torch seeds its generator randomly per process) on the run. Time
    mode alone leaves the generators alone."""
    import numpy
    import torch

    bench.pytester.makepyfile(test_bench=SEEDED_TESTS)
    documents = {}
    runs = (
        ("all", ()),
        ("again", ()),
        ("alone", ("-k", "second or own_seed or after_a or numpy")),
        ("time", ("--bench-mode=time", FAST)),
    )
    for name, selection in runs:
        out = bench.path / f"{name}.json"
        mode = () if name == "time" else ("--bench-mode=ops",)
        result = bench.run(*mode, f"--bench-json={out}", *selection, timeout=180)
        result.assert_outcomes(passed=4 if name == "alone" else 6)
        documents[name] = {b["key"]: b for b in json.loads(out.read_text())["benchmarks"]}
    torch.manual_seed(0)
    fixture, body = torch.rand(()).item(), torch.rand(()).item()
    torch.manual_seed(0)
    weights = torch.rand(4).tolist()
    torch.manual_seed(7)
    own = torch.rand(()).item()
    numpy.random.seed(0)
    numpy_draw = float(numpy.random.rand())
    for name in ("all", "again", "alone"):
        by_key = documents[name]
        assert by_key["test_bench.py::test_second"]["extra_info"] == {
            "fixture": fixture,
            "body": body,
        }, name
        assert by_key["test_bench.py::test_own_seed"]["extra_info"] == {"body": own}, name
        assert by_key["test_bench.py::test_after_a_module_fixture"]["extra_info"] == {
            "weights": weights,
            "body": fixture,
        }, name  # the module fixture drew from its own seeding
        assert by_key["test_bench.py::test_numpy_fixture"]["extra_info"] == {"numpy": numpy_draw}, (
            name
        )
        for key in ("test_bench.py::test_second", "test_bench.py::test_after_a_module_fixture"):
            assert by_key[key]["metrics"]["ops"] == documents["all"][key]["metrics"]["ops"], (
                name,
                key,
            )
    timed = documents["time"]
    assert timed["test_bench.py::test_second"]["extra_info"] != {"fixture": fixture, "body": body}
    assert timed["test_bench.py::test_numpy_fixture"]["extra_info"] != {"numpy": numpy_draw}
