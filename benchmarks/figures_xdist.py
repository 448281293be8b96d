"""`-n 2` in instructions mode: speed-up over a serial run and identity of the counts, against the
targets (issue 26: at least 1.6x on 2 cores; counts identical to the serial run's).

Runs the same suite serially and with ``-n 2`` (``--rounds`` times, interleaved, so both see the
same load), each in a fresh copy of the suite, and prints per run: wall time, the load average,
and the CPU time of the whole process tree (user + system; what another process's load inflates
least). On a busy machine wall time says little; the CPU figure says what ``-n 2`` could give on
2 free cores: serial CPU / (the ``-n 2`` run's CPU / 2), the speed-up if its two workers split
the work evenly. Counts: how many benchmarks differ from the serial run's, and the worst.

Suites: ``containers`` (benchmarks/suites/containers: 56 Python-heavy benchmarks, tensor
containers with deep class hierarchies; the hard case for counts), ``heavy`` (the 24 image
benchmarks of ``figures_instructions.py --only xdist``), or a folder of your own.
(Forked units of tests, tried on the `xdist` branch with `TORCHBENCH_UNIT_SIZE=4`, were not merged.)

Run from the repository root (needs valgrind; 10-40 minutes on a loaded 2-core machine):
``python benchmarks/figures_xdist.py [--suite containers] [--rounds 1] [-k EXPR]``
(``--tiny``: 2 benchmarks of the containers suite, one round: a check that the script runs; the
speed-up it prints means nothing, the workers' start dominates.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "benchmarks" / "suites"
#: Targets of issue 26.
SPEED_UP_TARGET = 1.6


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Run:
    """One pytest run of the suite in instructions mode: wall, CPU of the process tree, counts."""

    def __init__(self, folder: Path, name: str, args: list[str]) -> None:
        report = folder.parent / f"{name}.json"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.load_before = load()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:benchmark",
                "-p",
                "no:cacheprovider",
                "-q",
                "--bench-mode=instructions",
                f"--bench-json={report}",
                *args,
            ],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=7200,
        )
        self.wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        self.load_after = load()
        self.rc = done.returncode
        self.counts: dict[str, float] = {}
        if report.exists():
            for entry in json.loads(report.read_text())["benchmarks"]:
                self.counts[entry["key"]] = entry["metrics"]["instructions"]["instructions_per_run"]
        if done.returncode != 0 or not self.counts:
            print(done.stdout[-3000:], done.stderr[-2000:])

    def usable(self) -> bool:
        """A run judged nothing unless it exited 0 (all passed) or 1 (a test failed) with
        results."""
        return self.rc in (0, 1) and bool(self.counts)

    def line(self, name: str) -> str:
        return (
            f"  {name:<7} wall {self.wall:7.1f} s, CPU {self.cpu:7.1f} s, exit {self.rc}, "
            f"{len(self.counts)} results (load {self.load_before} -> {self.load_after})"
        )


def suite_folder(name: str) -> Path:
    if name == "heavy":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from figures_instructions import HEAVY_SUITE  # noqa: PLC0415 - only for this suite

        folder = Path(tempfile.mkdtemp(prefix="torchbench-xdist-src-")) / "heavy"
        folder.mkdir()
        (folder / "test_heavy.py").write_text(HEAVY_SUITE)
        return folder
    path = SUITES / name if (SUITES / name).is_dir() else Path(name)
    if not path.is_dir():
        raise SystemExit(f"no suite {name!r} (known: containers, heavy, or a folder)")
    return path


def compare(serial: dict[str, float], other: dict[str, float]) -> tuple[int, float, str]:
    differing = [key for key, count in serial.items() if other.get(key) != count]
    worst = max(
        ((abs(other[k] / serial[k] - 1.0), k) for k in serial if k in other), default=(0.0, "")
    )
    return len(differing), worst[0], worst[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", default="containers")
    parser.add_argument("--rounds", type=int, default=1, help="serial and -n 2 runs, interleaved")
    parser.add_argument("-k", default=None, help="pytest -k expression (a smaller suite)")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="2 benchmarks of the containers suite, one round: a check that the script runs",
    )
    args = parser.parse_args()
    if args.tiny:
        args.suite, args.rounds = "containers", 1
        args.k = args.k or "test_init[1] or test_equal[1]"
    source = suite_folder(args.suite)
    work = Path(tempfile.mkdtemp(prefix="torchbench-xdist-"))
    folder = work / "suite"
    shutil.copytree(
        source, folder, ignore=shutil.ignore_patterns("__pycache__", "baselines", ".pytest_cache")
    )
    extra = ["-k", args.k] if args.k else []
    print(
        f"== -n 2 against serial, suite {args.suite!r}{' -k ' + args.k if args.k else ''}, "
        f"{os.cpu_count()} CPUs (targets: speed-up >= {SPEED_UP_TARGET}x, counts identical) =="
    )
    try:
        for round_ in range(args.rounds):
            serial = Run(folder, f"serial-{round_}", extra)
            print(serial.line("serial"), flush=True)
            parallel = Run(folder, f"n2-{round_}", ["-n", "2", *extra])
            print(parallel.line("-n 2"), flush=True)
            if not (serial.usable() and parallel.usable()):
                raise SystemExit(
                    "a run failed or recorded no result: no figures (its output is above)"
                )
            wall = serial.wall / parallel.wall
            cpu = serial.cpu / (parallel.cpu / 2) if parallel.cpu else 0.0
            differing, worst, key = compare(serial.counts, parallel.counts)
            identical = (
                differing == 0
                and bool(serial.counts)
                and set(serial.counts) == set(parallel.counts)
            )
            print(
                f"  speed-up: wall {wall:.2f}x ({'met' if wall >= SPEED_UP_TARGET else 'NOT met'}; "
                "wall time on a loaded machine is only indicative), "
                f"from CPU {cpu:.2f}x (what 2 free cores "
                f"would give if the workers split the work evenly: "
                f"{'met' if cpu >= SPEED_UP_TARGET else 'NOT met'})"
            )
            print(
                f"  counts: {len(serial.counts)} benchmarks, "
                + (
                    "identical -> met"
                    if identical
                    else f"{differing} differ, worst |delta| {worst * 100:.4f}% ({key}) -> NOT met"
                ),
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
