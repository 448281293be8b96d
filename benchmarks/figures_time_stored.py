"""Time mode against a stored baseline set when the machine's load differs (issue 48, item 2).

A temporary project holds a small suite of time benchmarks of different kinds (a single-threaded
and a two-threaded ``mm``, an elementwise ``add`` and ``softmax`` on 1M floats, a conv, a
Python-heavy loop of small ops, pure Python), each call ``REPS`` = 5 repetitions of its operation.
For each order (saved quiet and compared loaded, saved loaded and compared quiet) it saves a
baseline set (``--bench-save=main``) and compares with it twice (``--bench-compare=main``): once
with the same code (A/A) and once with every benchmark doing 6 repetitions (a +20% slowdown, A/B).
The load is made by the script: ``--hogs`` busy-loop processes (``python -c "while 1: pass"``),
started ``--settle`` seconds before the loaded session and stopped after it. Other processes on a
shared machine add their own load, so every session prints ``os.getloadavg()`` beside its figures.

Targets (a verdict may say it could not judge; it must never point the wrong way):

* A/A: no regression and no improvement;
* A/B: no improvement and no unchanged: each +20% is a regression or a verdict that says it could
  not judge (not comparable, too noisy); ``noisy`` (a slowdown listed, not failed) is counted
  apart.

The script exits 1 when a target is missed. Run from the repository root::

    python benchmarks/figures_time_stored.py                # 2 hogs, 20 s to settle, ~4 minutes
    python benchmarks/figures_time_stored.py --hogs 3 --orders loaded-quiet
    python benchmarks/figures_time_stored.py --orders quiet-quiet  # no hogs: the quiet case
    python benchmarks/figures_time_stored.py --tiny         # 2 benchmarks, no settling: a check
                                                            # that the script runs

``--tiny`` runs two benchmarks and no settling time; its figures mean nothing and its targets are
not checked.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LIB = '''"""Benchmarks of different kinds: REPS repetitions of one operation each."""
import os

import torch

REPS = int(os.environ.get("SUITE_REPS", "5"))
generator = torch.Generator().manual_seed(0)
A128 = torch.rand(128, 128, generator=generator)
A256 = torch.rand(256, 256, generator=generator)
V1M = torch.rand(1 << 20, generator=generator)
W1M = torch.rand(1 << 20, generator=generator)
S1K = torch.rand(1024, 1024, generator=generator)
IMAGE = torch.rand(1, 16, 32, 32, generator=generator)
KERNEL = torch.rand(16, 16, 3, 3, generator=generator)
SMALL = torch.rand(16, generator=generator)


def mm128():
    for _ in range(REPS):
        torch.mm(A128, A128)


def mm256_threads():
    for _ in range(REPS):
        torch.mm(A256, A256)


def add_1m():
    for _ in range(REPS):
        torch.add(V1M, W1M)


def softmax_1m():
    for _ in range(REPS):
        torch.softmax(S1K, dim=1)


def conv():
    for _ in range(REPS):
        torch.nn.functional.conv2d(IMAGE, KERNEL, padding=1)


def small_ops():
    for _ in range(REPS):
        x = SMALL
        for _ in range(10):
            x = (x * 1.5 + 0.5).relu()


def python_loop():
    for _ in range(REPS):
        sum(i * i for i in range(300))
'''

TESTS = """import pytest

from suite import lib

NAMES = {names!r}


@pytest.mark.parametrize("name", [n for n in NAMES if n != "mm256_threads"])
def test_kind(benchmark, name):
    benchmark(getattr(lib, name))


@pytest.mark.skipif("mm256_threads" not in NAMES, reason="not in this size")
@pytest.mark.benchmark(num_threads=2)
def test_mm256_threads(benchmark):
    benchmark(lib.mm256_threads)
"""

NAMES = ("mm128", "mm256_threads", "add_1m", "softmax_1m", "conv", "small_ops", "python_loop")
TINY_NAMES = ("mm128", "python_loop")

#: The statuses that say the gate could not judge: allowed for the A/A and the A/B alike.
UNJUDGED = ("not comparable", "too noisy")


@contextlib.contextmanager
def load(hogs: int, settle: float) -> Iterator[None]:
    """``hogs`` busy loops for the duration of the block, started ``settle`` seconds before it."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(hogs)]
    try:
        time.sleep(settle if hogs else 0.0)
        yield
    finally:
        for process in spinning:
            process.kill()
        for process in spinning:
            process.wait()


def session(
    project: Path, args: list[str], reps: int, keep: Path | None = None
) -> dict[str, object]:
    """One pytest session of the suite: its exit status, time verdicts and load averages (its
    ``--bench-json`` copied into ``keep``, when given)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SUITE_REPS": str(reps), "CI": "true"}
    env.pop("PYTEST_ADDOPTS", None)
    out = project / "out.json"
    out.unlink(missing_ok=True)
    before = os.getloadavg()
    started = time.monotonic()
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
            "suite",
            "--bench-mode=time",
            f"--bench-json={out}",
            *args,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode not in (0, 1, 6) or not out.is_file():
        sys.exit(f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_bytes(out.read_bytes())
    document = json.loads(out.read_text())
    verdicts = [v for v in document.get("verdicts", []) if v["metric"] == "time"]
    return {
        "exit": done.returncode,
        "verdicts": verdicts,
        "seconds": time.monotonic() - started,
        "load": (before, os.getloadavg()),
    }


def _load_words(run: dict[str, object]) -> str:
    before, after = run["load"]  # type: ignore[misc]
    return (
        f"getloadavg {before[0]:.1f}/{before[1]:.1f}/{before[2]:.1f} -> "
        f"{after[0]:.1f}/{after[1]:.1f}/{after[2]:.1f}"
    )


def _change(verdict: dict[str, object]) -> str:
    now, then = verdict.get("current"), verdict.get("baseline")
    if isinstance(now, (int, float)) and isinstance(then, (int, float)) and then > 0:
        return f"{(now / then - 1.0) * 100:+.1f}%"
    return "-"


def misses(kind: str, verdicts: list[dict[str, object]]) -> list[str]:
    """The verdicts that miss the target of ``kind`` (``A/A`` or ``A/B``)."""
    wrong = ("regression", "improvement") if kind == "A/A" else ("improvement", "unchanged")
    return [f"{v['key']} {v['status']} {_change(v)}" for v in verdicts if v["status"] in wrong]


def report(label: str, kind: str, run: dict[str, object]) -> list[str]:
    """Print one comparison session's verdicts; return its misses."""
    verdicts: list[dict[str, object]] = run["verdicts"]  # type: ignore[assignment]
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[str(verdict["status"])] = counts.get(str(verdict["status"]), 0) + 1
    print(
        f"  {label} {kind}: exit {run['exit']}, "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        + f"; session {run['seconds']:.0f} s; {_load_words(run)}"
    )
    for verdict in verdicts:
        print(f"    {verdict['key']}: {verdict['status']} {_change(verdict)}")
    found = misses(kind, verdicts)
    for miss in found:
        print(f"    MISSED ({kind}): {miss}")
    return found


def order(
    project: Path, name: str, hogs: int, settle: float, keep: Path | None
) -> dict[str, list[str]]:
    """Save at one load and compare at another (``name``: ``quiet-loaded``, ``loaded-quiet``, or
    the same load twice, ``quiet-quiet``): the misses of its A/A and A/B comparisons, and the
    noisy A/B verdicts."""
    save_hogs, compare_hogs = (hogs if side == "loaded" else 0 for side in name.split("-"))
    baselines = project / f"baselines-{name}"
    common = [f"--bench-baselines-dir={baselines}"]
    with load(save_hogs, settle):
        saved = session(
            project, [*common, "--bench-save=main"], 5, keep and keep / f"{name}-save.json"
        )
    print(f"{name}: saved with {save_hogs} hogs, exit {saved['exit']}; {_load_words(saved)}")
    found: dict[str, list[str]] = {"A/A": [], "A/B": [], "noisy": []}
    with load(compare_hogs, settle):
        for kind, reps in (("A/A", 5), ("A/B", 6)):
            kept = keep and keep / f"{name}-{kind.replace('/', '')}.json"
            run = session(project, [*common, "--bench-compare=main"], reps, kept)
            found[kind] += report(f"{name}, compared with {compare_hogs} hogs", kind, run)
            if kind == "A/B":
                found["noisy"] += [
                    str(v["key"])
                    for v in run["verdicts"]  # type: ignore[attr-defined]
                    if v["status"] == "noisy"
                ]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2, help="busy loops for the loaded sessions")
    parser.add_argument(
        "--settle", type=float, default=20.0, help="seconds the hogs run before a loaded session"
    )
    parser.add_argument(
        "--orders",
        default="quiet-loaded,loaded-quiet",
        help="which orders to run (quiet-loaded: saved quiet, compared loaded; loaded-quiet; "
        "quiet-quiet: no hogs, the state of the machine alone)",
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="a folder to keep each session's --bench-json in"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="2 benchmarks, no settling: a check that it runs"
    )
    args = parser.parse_args()
    names = TINY_NAMES if args.tiny else NAMES
    if args.tiny:
        args.settle = 0.0
    started = time.monotonic()
    totals: dict[str, list[str]] = {"A/A": [], "A/B": [], "noisy": []}
    with tempfile.TemporaryDirectory(prefix="figures-time-stored-") as folder:
        project = Path(folder)
        (project / "suite").mkdir()
        (project / "suite" / "__init__.py").write_text("")
        (project / "suite" / "lib.py").write_text(LIB)
        (project / "suite" / "test_suite.py").write_text(TESTS.format(names=names))
        print(
            f"suite: {len(names)} benchmarks, {args.hogs} hogs, {args.settle:g} s to settle, "
            f"{os.cpu_count()} cores, {sys.executable}"
        )
        for name in args.orders.split(","):
            for kind, found in order(
                project, name.strip(), args.hogs, args.settle, args.keep
            ).items():
                totals[kind] += found
    print(
        f"A/A wrong-direction verdicts: {len(totals['A/A'])} (target 0); A/B improvements or "
        f"unchanged: {len(totals['A/B'])} (target 0); A/B noisy (listed, not failed): "
        f"{len(totals['noisy'])}; {time.monotonic() - started:.0f} s in all"
    )
    if not args.tiny and (totals["A/A"] or totals["A/B"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
