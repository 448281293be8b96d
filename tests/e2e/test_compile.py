"""Compile mode end to end: real pytest subprocesses, real torch.compile (backend="eager", and one
inductor run when a C++ compiler is present)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_torchbench.common import compat as _compat

MODEL = """
import torch

def f(x):
    y = x + 1
    return y * 2

compiled = torch.compile(f, backend="eager")
"""

MODEL_WITH_BREAK = """
import torch

def f(x):
    y = x + 1
    print("debugging")
    return y * 2

compiled = torch.compile(f, backend="eager")
"""

TESTS = """
import pytest, torch
from model import compiled

def test_compiled(benchmark):
    benchmark(compiled, torch.ones(4))

def test_compiled_again(benchmark):
    # The same function, already compiled by the test above: counted afresh, not 0 graphs.
    benchmark(compiled, torch.ones(4))

@pytest.mark.benchmark
def test_new_shape():
    compiled(torch.ones(4))
    compiled(torch.ones(5))

def test_eager(benchmark):
    benchmark(torch.add, torch.ones(4), 1)
"""


def _compile_metrics(path: Path) -> dict[str, dict]:
    document = json.loads(path.read_text())
    return {key: entry["metrics"]["compile"] for key, entry in document["benchmarks"].items()}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(model=MODEL, test_compiled=TESTS)
    return pytester


def test_save_aa_then_a_graph_break_fails_with_reason_and_line(
    project: pytest.Pytester, run_bench
) -> None:  # type: ignore[no-untyped-def]
    saved = run_bench("--bench-mode=compile", "--bench-save=main")
    assert saved.ret == 0, saved.stdout.str()
    baseline_file = project.path / "baselines/main/test_compiled.json"
    metrics = _compile_metrics(baseline_file)
    assert metrics["test_compiled.py::test_compiled"] == {
        "breaks": [],
        "calls": 3,
        "env": metrics["test_compiled.py::test_compiled"]["env"],
        "graph_breaks": 0,
        "graphs": 1,
        "recompile_reasons": [],
        "recompiles": 0,
    }
    assert metrics["test_compiled.py::test_compiled_again"]["graphs"] == 1  # no leak between tests
    assert metrics["test_compiled.py::test_eager"]["graphs"] == 0  # compiles nothing: not an error
    shape = metrics["test_compiled.py::test_new_shape"]
    assert shape["recompiles"] == 1 and shape["graphs"] == 2
    assert shape["recompile_reasons"] == [
        {
            "count": 1,
            "where": "model.py:3",
            "reason": "f: tensor 'x' size mismatch at index 0. expected 4, actual 5",
        }
    ]
    assert str(project.path) not in baseline_file.read_text()  # no absolute paths

    same = run_bench("--bench-mode=compile", "--bench-compare=main")  # A/A
    assert same.ret == 0, same.stdout.str()
    # With time measured first: compile mode resets dynamo itself, so the order does not matter.
    timed = run_bench(
        "--bench-mode=time,compile", "--bench-compare=main", "--bench-min-run-time=0.02"
    )
    assert timed.ret == 0, timed.stdout.str()
    assert "1 graph, 0 breaks, 0 recompiles" in timed.stdout.str()
    again = run_bench("--bench-mode=compile", "--bench-save=again")  # a rerun counts the same
    assert again.ret == 0
    assert _compile_metrics(project.path / "baselines/again/test_compiled.json") == metrics

    (project.path / "model.py").write_text(MODEL_WITH_BREAK.lstrip())  # as makepyfile writes it
    broken = run_bench("--bench-mode=compile", "--bench-compare=main")
    assert broken.ret == 1
    out = broken.stdout.str()
    expected = (
        "test_compiled.py::test_compiled: compile regressed: graph breaks 0 -> 1: Failed to trace "
        "builtin operator: Dynamo does not know how to trace builtin operator `print` "
        "with argument "
        "types ['str'] (has_kwargs False) at model.py:5; graphs 1 -> 2"
    )
    if _compat.torch_version() < (2, 9):
        # The reason is dynamo's own text, which later releases rewrote: torch 2.5.1 says
        # "builtin: print [<class 'torch._dynamo.variables.constant.ConstantVariable'>] False"
        # (2.9.1 and 2.13 as above).
        # The verdict, the user's line and the graph counts are the same.
        line = next(
            (
                ln
                for ln in out.splitlines()
                if "test_compiled.py::test_compiled: compile regressed" in ln
            ),
            "",
        )
        assert "graph breaks 0 -> 1: builtin: print [<class " in line, out
        assert "at model.py:5; graphs 1 -> 2" in line, out
    else:
        assert expected in out, out
    broken.assert_outcomes(failed=3, passed=1)  # the eager benchmark is unaffected


RAISING = """
import pytest, torch
from model import f

strict = torch.compile(f, backend="eager", fullgraph=True)

def test_raises_inside_compile(benchmark):
    benchmark(strict, torch.ones(4))

def test_after_it(benchmark):
    benchmark(torch.compile(f, backend="eager"), torch.ones(4))
"""


def test_a_benchmark_raising_inside_compile_fails_alone_and_saves_nothing(
    pytester: pytest.Pytester, run_bench
) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(model=MODEL_WITH_BREAK, test_raising=RAISING)
    result = run_bench("--bench-mode=compile,ops", "--bench-save=main")
    assert result.ret == 1
    result.assert_outcomes(failed=1, passed=1)
    assert "Unsupported" in result.stdout.str() and "print" in result.stdout.str()
    metrics = _compile_metrics(pytester.path / "baselines/main/test_raising.json")
    assert list(metrics) == ["test_raising.py::test_after_it"]
    after = metrics["test_raising.py::test_after_it"]
    assert (after["graphs"], after["graph_breaks"]) == (2, 1)
    assert after["breaks"][0]["where"] == "model.py:5"
    document = json.loads((pytester.path / "baselines/main/test_raising.json").read_text())
    assert (
        "ops" in document["benchmarks"]["test_raising.py::test_after_it"]["metrics"]
    )  # combined with ops


INDUCTOR = """
import torch

def f(x):
    return torch.sin(x) * 2 + 1

compiled = torch.compile(f)  # inductor, the default backend

def test_inductor(benchmark):
    benchmark(compiled, torch.ones(8))
"""


@pytest.mark.skipif(
    shutil.which("g++") is None and shutil.which("c++") is None,
    reason="inductor needs a C++ compiler",
)
def test_inductor_compiled_function_is_counted(pytester: pytest.Pytester, bench_env: None) -> None:
    pytester.makepyfile(test_inductor=INDUCTOR)
    result = pytester.runpytest_subprocess(
        "-p", "no:benchmark", "--bench-mode=compile", "--bench-save=main", timeout=300
    )
    assert result.ret == 0, result.stdout.str()
    metrics = _compile_metrics(pytester.path / "baselines/main/test_inductor.json")
    value = metrics["test_inductor.py::test_inductor"]
    assert (value["graphs"], value["graph_breaks"], value["recompiles"]) == (1, 0, 0)


SWAPPED = """
import torch


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


def f(fn, x):
    return fn(x)


compiled = torch.compile(f, backend="eager")


def g1(x):
    return x + 1


def g2(x):
    return x + 2
"""

SWAPPED_TESTS = """
import itertools

import torch
from swapped import Double, compiled, g1, g2

def test_modules(benchmark):
    modules = itertools.cycle([Double(), torch.nn.ReLU()])
    benchmark(lambda: compiled(next(modules), torch.ones(4)))

def test_functions(benchmark):
    functions = itertools.cycle([g1, g2])
    benchmark(lambda: compiled(next(functions), torch.ones(4)))
"""


def test_recompile_reasons_are_the_same_in_another_process_and_another_checkout(
    pytester: pytest.Pytester,
    run_bench,
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """Guard failures on an object's identity (a module or function swapped between calls) name
    the object's id, a heap address that changes with every process; and torch shortens the file
    in them relative to where torch is installed, which changes with the checkout's path. Both are
    kept out of the stored reason: a saved set compares unchanged from a fresh process in another
    folder."""
    first = pytester.path / "a"
    first.mkdir()
    (first / "swapped.py").write_text(SWAPPED)
    (first / "test_swapped.py").write_text(SWAPPED_TESTS)
    monkeypatch.chdir(first)
    saved = run_bench("--bench-mode=compile", "--bench-save=main", f"--rootdir={first}")
    assert saved.ret == 0, saved.stdout.str()
    stored = (first / "baselines/main/test_swapped.json").read_text()
    assert "recompile_reasons" in stored and '"recompiles": 0' not in stored, stored
    second = pytester.path / "another checkout"
    shutil.copytree(first, second)
    monkeypatch.chdir(second)
    compared = run_bench("--bench-mode=compile", "--bench-compare=main", f"--rootdir={second}")
    assert compared.ret == 0, compared.stdout.str()
