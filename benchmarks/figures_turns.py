"""Why the two processes of an alternated round measure in turns on one CPU (engines/duet.py).

Two processes time the same code (A/A) with the time engine (``walltime.measure``, 0.1 s of
blocks each), ``--reps`` times, and the paired ratio of their fastest calls is taken per
repetition. Four ways of pairing them, each with the real hand-over protocol:

* ``one after the other``: each measurement whole, then the other process's (the two are a
  tenth of a second apart, far closer than two child sessions of a round used to be);
* ``turns``: the two hand the CPU over every 10 ms of measuring;
* each of the two with both processes pinned to one CPU (the last one this process may use).

Printed per way and workload: how many of the paired ratios lie beyond 10% (an unchanged
benchmark read as a change at the gate's default limit), and their range. With no noise every
ratio would be 1. Run from the repository root::

    python benchmarks/figures_turns.py --reps 100

``--tiny``: 2 repetitions of the ``add`` workload, two ways (one after the other; turns on one
CPU): a check that the script runs, in seconds.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

CHILD = r"""
import os, sys
import torch
from pytest_torchbench.engines import duet, walltime
from pytest_torchbench.metrics.time import TimeMetric

description, kind, size, reps, slices = (
    sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
)
if slices == "no":
    duet.SLICE_SECONDS = 1e9  # hand over only at the end of each measurement: one after the other
torch.set_num_threads(1)
if kind == "add":
    a, b, out = torch.rand(size), torch.rand(size), torch.empty(size)
    fn = lambda: torch.add(a, b, out=out)
else:
    fn = lambda: sum(i * i for i in range(size))
fn()
baton = duet.connect(description, os.getppid())
duet.current = baton
baton.tests = {f"rep{i}" for i in range(reps)}
baton.start()
for i in range(reps):
    baton.begin_test(f"rep{i}")
    fn()
    print(
        TimeMetric.from_measurement(
            walltime.measure(fn, walltime.TimeSpec(min_run_time=0.1))
        ).fastest,
        flush=True,
    )
baton.finish()
"""

WAYS = {
    "one after the other": ("no", False),
    "one after the other, one CPU": ("no", True),
    "turns": ("yes", False),
    "turns, one CPU": ("yes", True),
}
WORKLOADS = {"loop": ("loop", 3000), "add": ("add", 300_000)}


def pair(kind: str, size: int, reps: int, slices: str, pinned: bool) -> list[float]:
    """Ratios (second / first) of the fastest calls of two processes measuring the same code."""
    from pytest_torchbench.engines import duet

    cpu = duet.pair_cpu() if pinned else None
    ends = socket.socketpair()
    children = []
    try:
        for end, first in zip(ends, (True, False)):
            description = duet.describe(end.fileno(), os.getpid(), cpu, first)
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", CHILD, description, kind, str(size), str(reps), slices],
                    pass_fds=[end.fileno()],
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
    finally:
        for end in ends:
            end.close()
    outputs = [child.communicate()[0].split() for child in children]
    if any(child.returncode for child in children):
        raise SystemExit("a measuring process failed")
    return [float(b) / float(a) for a, b in zip(*outputs)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--reps", type=int, default=100, help="paired measurements per way and workload"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of every way (interleaved)")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="2 repetitions, one workload, two ways: a check that the script runs",
    )
    args = parser.parse_args()
    ways, workloads = WAYS, WORKLOADS
    if args.tiny:
        args.reps, args.repeat = 2, 1
        ways = {w: WAYS[w] for w in ("one after the other", "turns, one CPU")}
        workloads = {"add": WORKLOADS["add"]}
    print(
        f"{args.reps} paired measurements of 0.1 s per way, workload and run; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    totals: dict[str, list[int]] = {way: [0, 0] for way in ways}
    started = time.monotonic()
    for run in range(args.repeat):
        for name, (kind, size) in workloads.items():
            for way, (slices, pinned) in ways.items():
                ratios = sorted(pair(kind, size, args.reps, slices, pinned))
                beyond = sum(abs(r - 1) > 0.10 for r in ratios)
                totals[way][0] += beyond
                totals[way][1] += len(ratios)
                print(
                    f"run {run + 1} {name:4} {way:30} beyond 10%: {beyond:3}/{len(ratios)}   "
                    f"ratios {ratios[0]:.3f} .. median {statistics.median(ratios):.3f} .. "
                    f"{ratios[-1]:.3f}",
                    flush=True,
                )
    print(f"\ntotal ({time.monotonic() - started:.0f} s, load {os.getloadavg()[0]:.2f}):")
    for way, (beyond, count) in totals.items():
        print(
            f"  {way:30} {beyond:4}/{count} paired ratios beyond 10% ({100 * beyond / count:.1f}%)"
        )


if __name__ == "__main__":
    main()
