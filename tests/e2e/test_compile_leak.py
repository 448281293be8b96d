"""A compiled test leaves nothing behind that moves a later benchmark's count (a real pytest
session, a real valgrind worker, a real ``torch.compile``).

Why it matters: on Python 3.12 and 3.13, ``examples/test_ops.py::test_mm[4] [mm]`` counted about
2,950 instructions per call more after ``examples/test_compile.py`` than alone. The first
``torch.compile`` imports ``filelock``, which on 3.12+ installs a Python audit hook that cannot be
removed; every ``exec`` of a ``bench_timer`` statement then runs it. A counted worker now imports
such modules before its first test (``engines/callgrind/spec.py``: ``PRELOADED``), so every test
sees the same interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# slow: torch.compile under valgrind (dynamo's import and tracing, uninstrumented) takes a minute
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind"),
]

# The same statement counted before and after a test that compiles (one session: the first and
# the last benchmark differ only in what ran between them).
MODULE = """
import torch


def test_a_before(bench_timer):
    bench_timer("torch.mm(x, y)", setup="x = torch.ones(4, 4); y = torch.ones(4, 4)").timeit()


def test_b_compiled(benchmark):
    # a compiled benchmark, as examples/test_compile.py (its first call, the compile, uncounted)
    compiled = torch.compile(lambda t: t * 2 + 1, backend="eager")
    assert benchmark(compiled, torch.ones(3)).sum().item() == 9.0


def test_c_after(bench_timer):
    bench_timer("torch.mm(x, y)", setup="x = torch.ones(4, 4); y = torch.ones(4, 4)").timeit()
"""


def test_a_compiled_test_does_not_move_the_count_of_a_later_benchmark(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_leak.py").write_text(MODULE)
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [
            "timeout",
            "1500",
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            "--bench-mode=instructions",
            f"--bench-json={report}",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    counts = {
        r["key"].split("::")[-1].split(" ")[0]: r["metrics"]["instructions"]["instructions_per_run"]
        for r in json.loads(report.read_text())["benchmarks"]
    }
    assert set(counts) == {"test_a_before", "test_b_compiled", "test_c_after"}, counts
    # Without the preload on 3.12.1: 12,7xx before, 15,6xx after (the audit hook at every exec).
    assert counts["test_a_before"] == counts["test_c_after"], counts
