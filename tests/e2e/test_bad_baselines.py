"""Hostile baselines, keys and paths (issue 27): each meets the user end to end as one clear line
and exit status 4, or as a correct comparison; nothing saved is lost or rewritten."""
from __future__ import annotations

import json
import re

import pytest

OPS = "--bench-mode=ops"  # deterministic: no timing noise on a loaded machine


def _usage_error(result: pytest.RunResult, *needles: str) -> str:
    """Exit 4, no traceback, and one ``ERROR:`` line that says it all (other stderr lines, such as
    a warning torch prints at import, are not ours to count)."""
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    errors = [line for line in result.stderr.str().splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, out
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


SPACED_IDS = """
import pytest, torch

@pytest.mark.benchmark
@pytest.mark.parametrize("shape", ["8 8", "[1,2]"])
def test_f(shape):
    x = torch.ones(2)
    for _ in range(EXTRA):
        x = x + 1
"""


def test_a_parametrize_id_that_looks_like_numbers_is_saved_as_written_and_compared(bench):
    """Item 3: the id "8 8" was saved as [8, 8]: never compared again, so a regression passed."""
    bench.pytester.makepyfile(test_bench=SPACED_IDS.replace("EXTRA", "1"))
    bench.run("--bench-save=main", OPS).assert_outcomes(passed=2)
    assert sorted(bench.load("main")["benchmarks"]) == ["test_bench.py::test_f[8 8]", "test_bench.py::test_f[[1,2]]"]
    result = bench.run("--bench-compare=main", OPS)
    result.assert_outcomes(passed=2)
    assert not re.search(r"(missing|new) \(\d", result.stdout.str()), result.stdout.str()
    bench.pytester.makepyfile(test_bench=SPACED_IDS.replace("EXTRA", "11"))  # another size: no stale .pyc
    result = bench.run("--bench-compare=main", OPS)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*test_bench.py::test_f[[]8 8]: ops op counts changed: ops 8 -> 58*"])


COLLIDING_KEYS = """
import pytest

@pytest.mark.parametrize("x", ["a", "a] [b"])
def test_f(x, bench_timer):
    if x == "a":  # key: its id plus its recording's description, 'test_f[a] [b]'
        bench_timer("sum(range(10))", description="b").timeit(10)
    else:  # key: its id, 'test_f[a] [b]'
        bench_timer("sum(range(20))").timeit(10)
"""


def test_two_tests_with_one_result_key_is_an_error_naming_both(bench):
    """Item 2: test_f[a] recording description "b" and the test whose id is 'test_f[a] [b]' had one key:
    one result was silently dropped from the baseline and a later run failed falsely."""
    bench.pytester.makepyfile(test_bench=COLLIDING_KEYS)
    result = bench.run("--bench-save=main", OPS)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*torchbench: test_bench.py::test_f[[]a] [[]b]: this result key is also the key of a result of "
        "test_bench.py::test_f[[]a]*rename one*",
    ])
    entries = bench.load("main")["benchmarks"]
    assert list(entries) == ["test_bench.py::test_f[a] [b]"]
    assert entries["test_bench.py::test_f[a] [b]"]["nodeid"] == "test_bench.py::test_f[a]"
    # Compared later, the colliding test fails again, with the same message, and the other passes.
    result = bench.run("--bench-compare=main", OPS)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*is also the key of a result of test_bench.py::test_f[[]a]*"])
