"""Shared test helpers.

pytest-benchmark is installed on the development machines and defines the same ``benchmark``
fixture, so every pytest run we start passes ``-p no:benchmark``; subprocess runs also get this
checkout on PYTHONPATH so they import the code under test, not another installed copy.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAST = "--bench-min-run-time=0.02"


@pytest.fixture
def bench_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """PYTHONPATH for subprocesses (pytester subprocess runs, the CLI, git hooks)."""
    existing = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + (os.pathsep + existing if existing else ""))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def run_bench(pytester: pytest.Pytester, bench_env: None) -> Callable[..., pytest.RunResult]:
    """``run_bench(*args)``: a pytester subprocess run with ``-p no:benchmark`` added.

    A subprocess, because in-process pytester restores sys.modules after each run and torch does
    not survive being imported twice in one process (its operator libraries register once).
    """

    def run(*args: str, subprocess: bool = True) -> pytest.RunResult:
        full = ("-p", "no:benchmark", *args)
        if subprocess:
            return pytester.runpytest_subprocess(*full)
        return pytester.runpytest(*full)

    return run


def git(cwd: Path, *args: str) -> str:
    """Run git with a fixed identity; fail the test with git's message on error."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


BENCH_MODULE = '''
import pytest, torch

@pytest.mark.benchmark
def test_add():
    torch.ones(4) + 1

def test_mul(benchmark):
    benchmark(lambda: torch.ones(3) * 2)
'''


@pytest.fixture(name="git")
def git_fixture() -> Callable[..., str]:
    """``git(cwd, *args)``: see :func:`git` (a fixture, because tests/ is not a package)."""
    return git


@pytest.fixture
def bench_module() -> str:
    """A test module with two tiny benchmarks (marker only, and the benchmark fixture)."""
    return BENCH_MODULE
