"""Figures of the ``calls`` metric (docs/design/calls.md): what counting costs, and that the counts
are identical run to run, serially and under ``-n 2``, and catch one extra helper call per key.

    python benchmarks/figures_calls.py            # about a minute on 2 cores
    python benchmarks/figures_calls.py --tiny     # a check that it runs: 2 sessions, seconds
    # without torch: the pure-Python overhead only
    PYTHONPATH=. python3.12 benchmarks/figures_calls.py

Prints one Markdown table per figure. Run it with the project's virtualenv (torch, pytest-xdist);
an interpreter without torch measures the hook's cost on the pure-Python lookup only.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import torch
except ImportError:  # another interpreter, without torch: the pure-Python figure only
    torch = None  # type: ignore[assignment]

from pytest_torchbench.engines import pycalls

LOOKUP = """
import os

FLAG = os.path.join(os.path.dirname(__file__), "extra.flag")


class Base:
    scale = 1


class Mid(Base):
    pass


class Box(Mid):
    def __init__(self, data):
        self.data = data

    def get(self, key):
        return self.data[key] * self.scale


def normalise(key):
    return key


def lookup_all(box, keys):
    total = 0
    extra = os.path.exists(FLAG)
    for key in keys:
        if extra:
            key = normalise(key)
        total += box.get(key)
    return total
"""

TESTS = """
import pytest
import torch

from store.lookup import Box, lookup_all


def test_lookup(benchmark):
    box = Box({i: i for i in range(48)})
    benchmark(lookup_all, box, list(range(48)))


@pytest.mark.parametrize("n", [4, 16, 64])
def test_mlp(benchmark, n):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(n, n), torch.nn.ReLU(), torch.nn.Linear(n, n))
    x = torch.ones(8, n)
    benchmark(model, x)


def test_mm(benchmark):
    x = torch.ones(4, 4)
    benchmark(torch.mm, x, x)
"""


#: Seconds each figure of :func:`per_call` takes (``--tiny``: far less).
PER_CALL_SECONDS = 0.3


def per_call(fn: Callable[[], Any], seconds: float | None = None) -> float:
    """Fastest of 5 blocks, seconds per call."""
    seconds = PER_CALL_SECONDS if seconds is None else seconds
    fn()
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start > seconds / 5:
            break
        number *= 2
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def per_call_counted(fn: Callable[[], Any]) -> float:
    """:func:`per_call` with the counting hook on around all of it (what each counted call pays)."""
    counts: dict[Any, int] = {}

    def on_start(code: Any, frame: Any) -> None:
        counts[code] = counts.get(code, 0) + 1

    with pycalls._Hook(on_start):
        return per_call(fn)


def overhead() -> None:
    sys.path.insert(0, str(project))
    from store.lookup import Box, lookup_all

    box = Box({i: i for i in range(48)})
    cases = {"48-key lookup (pure Python)": functools.partial(lookup_all, box, list(range(48)))}
    if torch is not None:
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16)
        )
        cases["MLP of 3 modules, 8x16"] = functools.partial(model, torch.ones(8, 16))
        cases["torch.mm 4x4"] = functools.partial(torch.mm, torch.ones(4, 4), torch.ones(4, 4))
    print(
        f"\n{pycalls.HOOK} on Python {sys.version.split()[0]}, "
        f"torch {getattr(torch, '__version__', 'none')}, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    print(
        "| callable | Python calls per call | plain, us per call | counted, us per call | x "
        "| count_calls total, ms |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name, fn in cases.items():
        counts = pycalls.count_calls(fn)
        plain, counted = per_call(fn), per_call_counted(fn)
        start = time.perf_counter()
        pycalls.count_calls(fn)
        total = time.perf_counter() - start
        print(
            f"| {name} | {sum(counts.values()):g} | {plain * 1e6:.1f} | {counted * 1e6:.1f} | "
            f"{counted / plain:.1f} | {total * 1e3:.2f} |"
        )


def pytest_run(*args: str) -> tuple[int, float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:benchmark",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=project,
        capture_output=True,
        text=True,
    )
    return done.returncode, time.perf_counter() - start, done.stdout


def sessions(tiny: bool = False) -> None:
    print("\n| session (6 benchmarks) | exit | wall s |")
    print("| --- | --- | --- |")
    setups = [
        ("plain pytest (no --bench-*)", ()),
        ("--bench-mode=calls --bench-save=main", ("--bench-mode=calls", "--bench-save=main")),
        ("--bench-mode=ops --bench-save=ops", ("--bench-mode=ops", "--bench-save=ops")),
        (
            "--bench-mode=calls --bench-compare=main (A/A)",
            ("--bench-mode=calls", "--bench-compare=main"),
        ),
        ("... -n 2 (A/A)", ("--bench-mode=calls", "--bench-compare=main", "-n", "2")),
        (
            "... -k mlp (A/A of a subset)",
            ("--bench-mode=calls", "--bench-compare=main", "-k", "mlp"),
        ),
    ]
    if tiny:  # the save that the extra call below is compared with: the fewest sessions
        setups = setups[1:2]
    for label, args in setups:
        code, wall, out = pytest_run(*args)
        print(f"| {label} | {code} | {wall:.1f} |")
    (project / "store" / "extra.flag").write_text("")
    code, wall, out = pytest_run("--bench-mode=calls", "--bench-compare=main")
    caught = [line.strip() for line in out.splitlines() if "normalise 0 -> " in line][:1]
    print(f"| one extra helper call per key: exit {code}, {wall:.1f} s | {caught} | |")
    (project / "store" / "extra.flag").unlink()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="a check that the script runs: short timings, 2 sessions (save, extra call)",
    )
    tiny = parser.parse_args().tiny
    if tiny:
        PER_CALL_SECONDS = 0.005
    with tempfile.TemporaryDirectory(prefix="calls-figures-") as folder:
        project = Path(folder)
        (project / "store").mkdir()
        (project / "store" / "__init__.py").write_text("")
        (project / "store" / "lookup.py").write_text(textwrap.dedent(LOOKUP))
        (project / "test_store.py").write_text(TESTS)
        os.environ.pop("CI", None)
        overhead()
        if torch is not None:
            sessions(tiny)
