"""Shared helpers: pytester runs of real pytest subprocesses that import THIS checkout's package."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import pytest_torchbench

PACKAGE_ROOT = Path(pytest_torchbench.__file__).resolve().parent.parent
#: pytest-benchmark is installed on the machines this runs on and defines the same names.
BASE_ARGS = ("-p", "no:benchmark", "-p", "no:cacheprovider")
FAST = "--bench-min-run-time=0.02"


class BenchRunner:
    """Runs pytest in a subprocess in pytester's folder, always without pytest-benchmark."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path: Path = pytester.path

    def run(self, *args: str, timeout: float = 120) -> pytest.RunResult:
        return self.pytester.runpytest_subprocess(*BASE_ARGS, *args, timeout=timeout)

    def baseline(self, name: str, module: str = "test_bench.json") -> Path:
        return self.path / "baselines" / name / module

    def load(self, name: str, module: str = "test_bench.json") -> dict:
        return json.loads(self.baseline(name, module).read_text(encoding="utf-8"))


@pytest.fixture
def bench(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> BenchRunner:
    existing = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(PACKAGE_ROOT) + (os.pathsep + existing if existing else ""))
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # rootdir = pytester's folder, so baselines/ lands there
    pytester.makeini("[pytest]\n")
    return BenchRunner(pytester)
