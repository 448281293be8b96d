"""``--bench-mode=calls`` end to end (issue 26 points 2 and 3): real pytest runs on a real project,
real torch; with instructions, real valgrind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

LOOKUP = """
import os

FLAG = os.path.join(os.path.dirname(__file__), "extra.flag")


class Box:
    def __init__(self, data):
        self.data = data

    def get(self, key):
        return self.data[key]


def normalise(key):
    return key


def lookup_all(box, keys):
    total = 0
    extra = os.path.exists(FLAG)
    for key in keys:
        if extra:
            key = normalise(key)  # the regression: line 24
        total += box.get(key)
    return total
"""

TEST = """
import torch

from store.lookup import Box, lookup_all


def test_lookup(benchmark):
    box = Box({i: i for i in range(48)})
    benchmark(lookup_all, box, list(range(48)))


def test_module(benchmark):
    x = torch.ones(4, 4)
    lin = torch.nn.Linear(4, 4)
    benchmark(lambda: lin(x) + x)
"""


@pytest.fixture
def store_project(pytester: pytest.Pytester) -> Path:
    """A library (``store/lookup.py``) whose lookup loop calls one more helper per key when the
    returned flag file exists."""
    pytester.mkpydir("store")
    (pytester.path / "store" / "lookup.py").write_text(LOOKUP)
    pytester.makepyfile(test_store=TEST)
    return pytester.path / "store" / "extra.flag"


def _calls(pytester: pytest.Pytester, key: str, folder: str = "main") -> dict[str, float]:
    [file] = (pytester.path / "baselines" / folder).glob("*.json")
    return json.loads(file.read_text())["benchmarks"][key]["metrics"]["calls"]["calls"]  # type: ignore[no-any-return]


def test_calls_are_saved_compared_identically_and_an_extra_helper_call_fails_with_its_call_site(
    pytester: pytest.Pytester,
    run_bench,
    store_project: Path,  # type: ignore[no-untyped-def]
) -> None:
    assert run_bench("--bench-mode=calls", "--bench-save=main").ret == 0
    # Python functions by file (relative to the rootdir, or to the import path for torch) and
    # qualified name; C functions (dict lookups, os.stat) are not counted.
    assert _calls(pytester, "test_store.py::test_lookup") == {
        "<frozen genericpath>:exists": 1.0,
        "store/lookup.py:Box.get": 48.0,
        "store/lookup.py:lookup_all": 1.0,
    }
    module = _calls(pytester, "test_store.py::test_module")
    assert module["torch/nn/modules/linear.py:Linear.forward"] == 1.0
    assert module["test_store.py:test_module.<locals>.<lambda>"] == 1.0
    assert not any(
        "pytest_torchbench" in name for name in module
    )  # the plugin's wrappers are not counted

    same = run_bench("--bench-mode=calls", "--bench-compare=main")
    assert same.ret == 0
    assert "no changes beyond the limits against baseline 'main'" in same.stdout.str()

    store_project.write_text("")
    result = run_bench("--bench-mode=calls", "--bench-compare=main", "--bench-json=out.json")
    result.assert_outcomes(passed=1, failed=1)
    line = (
        "    store/lookup.py:normalise 0 -> 48 per call (defined at store/lookup.py:15; "
        "called from store/lookup.py:24 in lookup_all)"
    )
    result.stdout.fnmatch_lines(
        [
            "torchbench: test_store.py::test_lookup: calls Python calls changed: "
            "calls 50 -> 98 calls per call "
            "(1 function(s) changed)",
            line,
        ]
    )
    verdicts = json.loads((pytester.path / "out.json").read_text())["verdicts"]
    [failed] = [v for v in verdicts if v["failed"]]
    assert failed["key"] == "test_store.py::test_lookup" and failed["details"] == [line.strip()]


def test_under_xdist_the_failed_test_is_rerun_for_its_call_sites(
    pytester: pytest.Pytester,
    run_bench,
    store_project: Path,  # type: ignore[no-untyped-def]
) -> None:
    assert run_bench("--bench-mode=calls", "--bench-save=main", "-n", "2").ret == 0
    store_project.write_text("")
    result = run_bench("--bench-mode=calls", "--bench-compare=main", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    failures = out[out.index("= FAILURES =") : out.index("short test summary")]
    assert (
        "    store/lookup.py:normalise 0 -> 48 per call (defined at store/lookup.py:15; "
        "called from store/lookup.py:24 in lookup_all)"
    ) in failures, out


def test_calls_combine_with_ops_and_each_names_its_own_change(
    pytester: pytest.Pytester,
    run_bench,
    store_project: Path,  # type: ignore[no-untyped-def]
) -> None:
    assert run_bench("--bench-mode=calls,ops", "--bench-save=main").ret == 0
    stored = json.loads(next((pytester.path / "baselines" / "main").glob("*.json")).read_text())
    metrics = stored["benchmarks"]["test_store.py::test_module"]["metrics"]
    assert set(metrics) == {"calls", "ops"} and metrics["ops"]["ops"]["aten::linear"] == 1.0
    assert run_bench("--bench-mode=calls,ops", "--bench-compare=main").ret == 0
    # one more Python call in the lookup, and one more aten op in the module's lambda
    store_project.write_text("")
    (pytester.path / "test_store.py").write_text(TEST.replace("lin(x) + x", "lin(x).clone() + x"))
    result = run_bench("--bench-mode=calls,ops", "--bench-compare=main")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "test_store.py::test_lookup: calls Python calls changed" in out
    assert "store/lookup.py:normalise 0 -> 48 per call" in out
    assert "test_store.py::test_module: ops op counts changed" in out
    assert "aten::clone 0 -> 1 per call (test_store.py:15 in <lambda>)" in out
    # .clone() is a C method: the module's Python calls did not change
    assert "test_store.py::test_module: calls" not in out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_an_instructions_failure_names_the_python_functions_whose_calls_changed(
    pytester: pytest.Pytester,
    run_bench,
    store_project: Path,  # type: ignore[no-untyped-def]
) -> None:
    """``--bench-mode=instructions,calls``: the instructions verdict lists the Python functions
    beside the C functions; the calls verdict gets its call sites from the end-of-session re-run
    (the tests ran in valgrind workers)."""
    args = ("--bench-mode=instructions,calls", "-k", "test_lookup")
    assert run_bench(*args, "--bench-save=main").ret == 0
    store_project.write_text("")
    result = run_bench(*args, "--bench-compare=main")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    failures = out[out.index("= FAILURES =") : out.index("short test summary")]
    instructions = failures[failures.index("instructions regressed") :]
    instructions = instructions[: instructions.find("\ntorchbench:")]
    lines = [line.strip() for line in instructions.splitlines()]
    # the Python functions first (the level a library author changes code at), then the C functions
    assert lines[1:4] == [
        "Python functions whose calls changed (calls per call, 1 function(s)):",
        "+48  store/lookup.py:normalise (0 -> 48)",
        "top functions by change (instructions per run, largest |change| first; "
        "lock/GIL frames summed last):",
    ]
    assert "_PyEval_EvalFrameDefault" in instructions
    assert (
        "store/lookup.py:normalise 0 -> 48 per call (defined at store/lookup.py:15; "
        "called from store/lookup.py:24 in lookup_all)"
    ) in failures
