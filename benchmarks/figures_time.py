"""Print the ISSUE's wall-time figures for pytest-torchbench, against their targets.

  (a) session cost per trivial benchmark in time mode (vs pytest-benchmark's defaults)
  (b) A/A false regressions out of 100, and a 20% slowdown of a ~1 ms workload caught out of 100
  (c) plugin overhead on a 2,000-test suite when no bench option is given

Run from the repository root:  python benchmarks/figures_time.py [--quick]
Subprocesses import the package of this checkout (PYTHONPATH is set to it).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
       "OMP_NUM_THREADS": "1"}
ENV.pop("PYTEST_ADDOPTS", None)

TRIVIAL = '''
import pytest, torch

@pytest.mark.parametrize("i", range(10))
def test_noop(benchmark, i):
    benchmark(lambda: None)

@pytest.mark.parametrize("i", range(10))
def test_add16(benchmark, i):
    x, y = torch.ones(16), torch.ones(16)
    benchmark(lambda: x + y)
'''


def pytest_seconds(folder: Path, *args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=folder, env=ENV, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"pytest {' '.join(args)} failed in {folder}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return elapsed


def figure_a(reps: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="tb-fig-a-"))
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_trivial.py").write_text(TRIVIAL)
    ours_off = ["-p", "no:benchmark"]
    timings: dict[str, list[float]] = {"plain": [], "time": [], "pb_disabled": [], "pb": []}
    spreads: list[float] = []
    for rep in range(reps):
        timings["plain"].append(pytest_seconds(folder, *ours_off))
        out = folder / f"run{rep}.json"
        timings["time"].append(pytest_seconds(folder, *ours_off, "--bench-mode=time", f"--bench-json={out}"))
        for bench in json.loads(out.read_text())["benchmarks"]:
            metric = bench["metrics"]["time"]
            spreads.append(metric["iqr"] / metric["median"])
        if rep == 0 or reps <= 3:
            timings["pb_disabled"].append(pytest_seconds(folder, "-p", "no:torchbench", "--benchmark-disable"))
            timings["pb"].append(pytest_seconds(folder, "-p", "no:torchbench"))
    med = {k: statistics.median(v) for k, v in timings.items()}
    return {
        "ours_per_bench": (med["time"] - med["plain"]) / 20,
        "pb_per_bench": (med["pb"] - med["pb_disabled"]) / 20,
        "iqr_median_max": max(spreads),
        "iqr_median_median": statistics.median(spreads),
        "iqr_over_10pct": sum(s > 0.10 for s in spreads),
        "n_spreads": len(spreads),
        "timings": med,
    }


def _workload(iterations: int):
    import torch

    a, b = torch.randn(64, 64), torch.randn(64, 64)

    def run() -> None:
        for _ in range(iterations):
            torch.mm(a, b)

    return run


def figure_b(count: int) -> dict:
    import torch

    from pytest_torchbench.engines import walltime
    from pytest_torchbench.judgement import REGRESSION, Policy, judge_metric
    from pytest_torchbench.results import TimeMetric

    torch.set_num_threads(1)
    # size the workload to ~1 ms
    probe = _workload(10)
    probe()
    per_ten = walltime.measure(probe).median
    base_n = max(1, round(10 * 1e-3 / per_ten))
    slow_n = round(base_n * 1.2)
    fast, slow = _workload(base_n), _workload(slow_n)
    fast(), slow()
    spec = walltime.TimeSpec()
    baseline = TimeMetric.from_measurement(walltime.measure(fast, spec))
    policy = Policy()
    false_regressions = caught = 0
    ratios = []
    start = time.perf_counter()
    for _ in range(count):  # interleaved, so drift of the machine hits both series alike
        same = TimeMetric.from_measurement(walltime.measure(fast, spec))
        false_regressions += judge_metric("aa", "time", same, baseline, policy).status == REGRESSION
        slower = TimeMetric.from_measurement(walltime.measure(slow, spec))
        caught += judge_metric("slow", "time", slower, baseline, policy).status == REGRESSION
        ratios.append(slower.median / same.median)
    return {
        "base_median": baseline.median, "iterations": (base_n, slow_n),
        "replicates": len(baseline.raw_times),
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "false_regressions": false_regressions, "caught": caught, "count": count,
        "seconds_per_measure": (time.perf_counter() - start) / (2 * count),
    }


def _suite(folder: Path, with_torch: bool) -> None:
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    benchmark: a benchmark\n")
    header = "import pytest\n" + ("import torch\n" if with_torch else "")
    for f in range(20):
        lines = [header]
        for t in range(100):
            if t % 10 == 0:
                lines.append(f"@pytest.mark.benchmark\ndef test_b{t}():\n    assert {t} + 1\n")
            else:
                lines.append(f"def test_t{t}():\n    assert {t} + 1\n")
        (folder / f"test_gen{f:02d}.py").write_text("\n".join(lines))


def figure_c(reps: int) -> dict:
    found = {}
    for with_torch in (True, False):
        folder = Path(tempfile.mkdtemp(prefix="tb-fig-c-"))
        _suite(folder, with_torch)
        pytest_seconds(folder, "-p", "no:benchmark")  # warm the file system and bytecode caches
        on, off = [], []
        for _ in range(reps):  # alternate, so load changes on the machine hit both alike
            on.append(pytest_seconds(folder, "-p", "no:benchmark"))
            off.append(pytest_seconds(folder, "-p", "no:benchmark", "-p", "no:torchbench"))
        found[with_torch] = (statistics.median(on), statistics.median(off), min(on), min(off))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    reps = 2 if args.quick else 3
    load = os.getloadavg()[0]
    print(f"pytest-torchbench wall-time figures  (python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"load average {load:.1f} at start)")
    a = figure_a(reps)
    print(f"(a) session times, median of runs: {', '.join(f'{k} {v:.2f}s' for k, v in a['timings'].items())}")
    b = figure_b(50 if args.quick else 100)
    print(f"(b) workload {b['iterations'][0]} vs {b['iterations'][1]} 64x64 mm: median "
          f"{b['base_median'] * 1e3:.3f} ms, {b['replicates']} replicates; slow/same ratio median "
          f"{b['ratio_median']:.3f} (min {b['ratio_min']:.3f}, max {b['ratio_max']:.3f}); "
          f"{b['seconds_per_measure']:.2f} s per measurement")
    c = figure_c(5 if args.quick else 7)
    for with_torch, (on, off, on_min, off_min) in c.items():
        print(f"(c) 2,000 tests{' importing torch' if with_torch else ' (no torch import)'}: plugin "
              f"{on:.2f}s, -p no:torchbench {off:.2f}s (medians); minima {on_min:.2f}s / {off_min:.2f}s")
    rows = [
        ("(a) time mode, session cost per trivial benchmark", f"{a['ours_per_bench']:.3f} s",
         "<= 0.3 s", a["ours_per_bench"] <= 0.3),
        ("(a) pytest-benchmark defaults, same 20 tests", f"{a['pb_per_bench']:.3f} s", "(~1.25 s)", None),
        ("(a) IQR/median, worst of all benchmarks", f"{a['iqr_median_max'] * 100:.1f}% "
         f"(median {a['iqr_median_median'] * 100:.1f}%, {a['iqr_over_10pct']}/{a['n_spreads']} over 10%)",
         "<= 10%", a["iqr_median_max"] <= 0.10),
        ("(b) A/A false regressions", f"{b['false_regressions']}/{b['count']}",
         f"<= {max(1, b['count'] // 100)}", b["false_regressions"] <= max(1, b["count"] // 100)),
        ("(b) 20% slowdown caught", f"{b['caught']}/{b['count']}", f">= {b['count'] * 95 // 100}",
         b["caught"] >= b["count"] * 95 // 100),
    ]
    for with_torch, (on, off, _, _) in c.items():
        overhead = on / off - 1
        rows.append((f"(c) plugin overhead, 2,000 tests{', torch imported' if with_torch else ', no torch'}",
                     f"{overhead * 100:+.1f}%", "<= 2%", overhead <= 0.02))
    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'figure'.ljust(width)}  {'measured':<40} {'target':<9} ok")
    for name, value, target, ok in rows:
        print(f"{name.ljust(width)}  {value:<40} {target:<9} {'-' if ok is None else 'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
