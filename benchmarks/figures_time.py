"""Print the wall-time figures for pytest-torchbench, against their targets.

  (a) session cost per trivial benchmark in time mode (vs pytest-benchmark's defaults)
  (b) A/A false regressions out of N, a 20% slowdown and a 2x slowdown of a ~1 ms workload caught
  (c) plugin overhead on a 2,000-test suite when no bench option is given
  (d) the image suite (benchmarks/suites/images, 208 benchmarks): --bench-save, then A/A
      --bench-compare on a quiet machine and with CPU hogs running; session time and IQR/median
      against pytest-benchmark 5.2.3 defaults on the same suite (needs pytest-benchmark installed)
  The smallest reliably caught slowdown per size class, and the candidate gate designs, come from
  benchmarks/time_designs.py (several separate sessions of the suite's operations).

Run from the repository root:  python benchmarks/figures_time.py [--quick] [--only a,b,c,d] [--suite-k EXPR]
(--suite-k float32 runs half the image suite; say so when quoting it). Subprocesses import the
package of this checkout (PYTHONPATH is set to it). The load average is printed with each figure:
wall time on a loaded machine is a different figure.
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
    from pytest_torchbench.judgement import NOISY, REGRESSION, Policy, judge_metric
    from pytest_torchbench.results import TimeMetric

    torch.set_num_threads(1)
    # size the workload to ~1 ms
    probe = _workload(10)
    probe()
    per_ten = walltime.measure(probe).median
    base_n = max(1, round(10 * 1e-3 / per_ten))
    slow_n = round(base_n * 1.2)
    fast, slow, double = _workload(base_n), _workload(slow_n), _workload(2 * base_n)
    fast(), slow(), double()
    spec = walltime.TimeSpec()
    baseline = TimeMetric.from_measurement(walltime.measure(fast, spec))
    load_start = os.getloadavg()[0]
    policy = Policy()
    false_regressions = caught = doubled_caught = noisy = 0
    shares = []
    ratios = []
    start = time.perf_counter()
    for _ in range(count):  # interleaved, so drift of the machine hits both series alike
        same = TimeMetric.from_measurement(walltime.measure(fast, spec))
        false_regressions += judge_metric("aa", "time", same, baseline, policy).status == REGRESSION
        slower = TimeMetric.from_measurement(walltime.measure(slow, spec))
        verdict = judge_metric("slow", "time", slower, baseline, policy)
        caught += verdict.status == REGRESSION
        noisy += verdict.status == NOISY
        doubled = TimeMetric.from_measurement(walltime.measure(double, spec))
        doubled_caught += judge_metric("double", "time", doubled, baseline, policy).status == REGRESSION
        ratios.append(slower.fastest / same.fastest)
        shares.extend(m.cpu_share for m in (same, slower, doubled) if m.cpu_share is not None)
    return {
        "base_median": baseline.median, "load": (load_start, os.getloadavg()[0]), "iterations": (base_n, slow_n),
        "replicates": len(baseline.raw_times),
        "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
        "false_regressions": false_regressions, "caught": caught, "count": count,
        "noisy": noisy, "doubled_caught": doubled_caught,
        "cpu_share": statistics.median(shares) if shares else None,
        "seconds_per_measure": (time.perf_counter() - start) / (3 * count),
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


SUITE = ROOT / "benchmarks" / "suites" / "images"


def _suite_run(args: list[str], hogs: int = 0, python: str = sys.executable
               ) -> tuple[float, subprocess.CompletedProcess, tuple[float, float]]:
    """One pytest session over the image suite; returns (seconds, process, load before/after)."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    try:
        done = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                              cwd=SUITE, env=ENV, capture_output=True, text=True)
    finally:
        for hog in spinning:
            hog.kill()
            hog.wait()
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return elapsed, done, (load, os.getloadavg()[0])


def _verdict_counts(path: Path) -> tuple[dict[str, int], list[float]]:
    document = json.loads(path.read_text())
    counts: dict[str, int] = {}
    deltas = []
    for verdict in document["verdicts"]:
        counts[verdict["status"]] = counts.get(verdict["status"], 0) + 1
        if verdict.get("delta") is not None:
            deltas.append(verdict["delta"])
    return counts, deltas


def figure_d(selection: list[str], with_pb: bool, pb_python: str, compare: bool = True) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="tb-fig-d-"))
    ours = ["-p", "no:benchmark", f"--bench-baselines-dir={folder / 'baselines'}", *selection]
    found: dict = {}
    seconds, _, load = _suite_run([*ours, "--bench-save=main", f"--bench-json={folder / 'save.json'}"])
    document = json.loads((folder / "save.json").read_text())
    spreads = [b["metrics"]["time"]["iqr"] / b["metrics"]["time"]["median"] for b in document["benchmarks"]]
    found["save"] = {"seconds": seconds, "load": load, "n": len(spreads),
                     "iqr_median": statistics.median(spreads), "iqr_worst": max(spreads)}
    for name, hogs in (("aa", 0), ("aa_hogs", 2 * (os.cpu_count() or 1))) if compare else ():
        out = folder / f"{name}.json"
        seconds, _, load = _suite_run([*ours, "--bench-compare=main", f"--bench-json={out}"], hogs=hogs)
        counts, deltas = _verdict_counts(out)
        deltas.sort()
        found[name] = {"seconds": seconds, "load": load, "counts": counts, "hogs": hogs,
                       "up10": sum(d > 0.1 for d in deltas) / len(deltas),
                       "down10": sum(d < -0.1 for d in deltas) / len(deltas),
                       "median_delta": deltas[len(deltas) // 2]}
    if with_pb:
        out = folder / "pb.json"
        seconds, _, load = _suite_run(["-p", "no:torchbench", f"--benchmark-json={out}", *selection],
                                      python=pb_python)
        stats = [b["stats"] for b in json.loads(out.read_text())["benchmarks"]]
        spreads = [s["iqr"] / s["median"] for s in stats]
        found["pb"] = {"seconds": seconds, "load": load, "n": len(stats),
                       "iqr_median": statistics.median(spreads), "iqr_worst": max(spreads)}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--only", default="a,b,c,d", help="which figures, e.g. 'b,d'")
    parser.add_argument("--suite-k", default="", help="-k expression for the image suite (a reduced run)")
    parser.add_argument("--power-count", type=int, default=0, help="(b) repetitions (default 100, --quick 50)")
    parser.add_argument("--pb-python", default=sys.executable,
                        help="(d) the interpreter that runs pytest-benchmark 5.2.3 (it fails under pytest 9: "
                             "'Function' object has no attribute '_nodeid'; give one with pytest 8 and torch)")
    parser.add_argument("--no-compare", action="store_true", help="(d) session cost only: save run and pytest-benchmark")
    args = parser.parse_args()
    only = set(args.only.split(","))
    reps = 2 if args.quick else 3
    load = os.getloadavg()[0]
    print(f"pytest-torchbench wall-time figures  (python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"load average {load:.1f} at start)")
    rows = []
    if "d" in only:
        with_pb = subprocess.run([args.pb_python, "-c", "import pytest_benchmark"], capture_output=True).returncode == 0
        if not with_pb:
            print("(d) pytest-benchmark is not installed: no comparison with it")
        selection = ["-k", args.suite_k] if args.suite_k else []
        d = figure_d(selection, with_pb, args.pb_python, compare=not args.no_compare)
        n = d["save"]["n"]
        subset = f" (-k {args.suite_k})" if args.suite_k else ""
        print(f"(d) image suite{subset}: {n} benchmarks; save run {d['save']['seconds']:.0f} s "
              f"(load {d['save']['load'][0]:.1f}->{d['save']['load'][1]:.1f})")
        for name in [n for n in ("aa", "aa_hogs") if n in d]:
            r = d[name]
            print(f"(d) compare{' with ' + str(r['hogs']) + ' CPU hogs' if r['hogs'] else ''}: {r['counts']}, "
                  f"load {r['load'][0]:.1f}->{r['load'][1]:.1f}, {r['seconds']:.0f} s; fastest-call deltas: "
                  f"median {r['median_delta']:+.1%}, > +10% {r['up10']:.1%}, < -10% {r['down10']:.1%}")
            regressions = r["counts"].get("regression", 0)
            rows.append((f"(d) A/A false regressions, image suite{subset}"
                         + (f", {r['hogs']} CPU hogs during compare" if r["hogs"] else ""),
                         f"{regressions}/{n} ({regressions / n:.1%}); noisy {r['counts'].get('noisy', 0)}; "
                         f"load {r['load'][0]:.1f}", "<= 1%", regressions <= n / 100))
        if "pb" in d:
            pb = d["pb"]
            print(f"(d) pytest-benchmark defaults: {pb['seconds']:.0f} s (load {pb['load'][0]:.1f}->{pb['load'][1]:.1f})")
            rows.append((f"(d) session time, image suite{subset}: torchbench save run / pytest-benchmark",
                         f"{d['save']['seconds']:.0f} s / {pb['seconds']:.0f} s", "<= 1x",
                         d["save"]["seconds"] <= pb["seconds"]))
            rows.append(("(d) IQR/median, median over benchmarks: torchbench / pytest-benchmark",
                         f"{d['save']['iqr_median'] * 100:.1f}% / {pb['iqr_median'] * 100:.1f}%", "no worse",
                         d["save"]["iqr_median"] <= pb["iqr_median"]))
    if "a" not in only:
        a = None
    else:
        a = figure_a(reps)
    if a is not None:
        print(f"(a) session times, median of runs: {', '.join(f'{k} {v:.2f}s' for k, v in a['timings'].items())}")
        rows += [
            ("(a) time mode, session cost per trivial benchmark", f"{a['ours_per_bench']:.3f} s",
             "<= 0.3 s", a["ours_per_bench"] <= 0.3),
            ("(a) pytest-benchmark defaults, same 20 tests", f"{a['pb_per_bench']:.3f} s", "(~1.25 s)", None),
            ("(a) IQR/median, worst of all benchmarks", f"{a['iqr_median_max'] * 100:.1f}% "
             f"(median {a['iqr_median_median'] * 100:.1f}%, {a['iqr_over_10pct']}/{a['n_spreads']} over 10%)",
             "<= 10%", a["iqr_median_max"] <= 0.10),
        ]
    if "b" in only:
        b = figure_b(args.power_count or (50 if args.quick else 100))
        share = f"{b['cpu_share']:.2f}" if b["cpu_share"] is not None else "-"
        print(f"(b) workload {b['iterations'][0]} vs {b['iterations'][1]} 64x64 mm: median "
              f"{b['base_median'] * 1e3:.3f} ms, {b['replicates']} replicates; slow/same fastest-call ratio median "
              f"{b['ratio_median']:.3f} (min {b['ratio_min']:.3f}, max {b['ratio_max']:.3f}); "
              f"{b['seconds_per_measure']:.2f} s per measurement; CPU share median {share}, "
              f"load {b['load'][0]:.1f}->{b['load'][1]:.1f}; 20% slower judged noisy {b['noisy']}/{b['count']}")
        rows += [
            ("(b) A/A false regressions, ~1 ms workload", f"{b['false_regressions']}/{b['count']}",
             f"<= {max(1, b['count'] // 100)}", b["false_regressions"] <= max(1, b["count"] // 100)),
            ("(b) 20% slowdown caught", f"{b['caught']}/{b['count']} (CPU share {share})",
             f">= {b['count'] * 95 // 100}", b["caught"] >= b["count"] * 95 // 100),
            ("(b) 2x slowdown caught", f"{b['doubled_caught']}/{b['count']}", f"{b['count']}/{b['count']}",
             b["doubled_caught"] == b["count"]),
        ]
    if "c" in only:
        c = figure_c(5 if args.quick else 7)
        for with_torch, (on, off, on_min, off_min) in c.items():
            print(f"(c) 2,000 tests{' importing torch' if with_torch else ' (no torch import)'}: plugin "
                  f"{on:.2f}s, -p no:torchbench {off:.2f}s (medians); minima {on_min:.2f}s / {off_min:.2f}s")
        for with_torch, (on, off, _, _) in c.items():
            overhead = on / off - 1
            rows.append((f"(c) plugin overhead, 2,000 tests{', torch imported' if with_torch else ', no torch'}",
                         f"{overhead * 100:+.1f}%", "<= 2%", overhead <= 0.02))
    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'figure'.ljust(width)}  {'measured':<40} {'target':<9} ok   (load average now {os.getloadavg()[0]:.1f})")
    for name, value, target, ok in rows:
        print(f"{name.ljust(width)}  {value:<40} {target:<9} {'-' if ok is None else 'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
