"""Print the wall-time figures for pytest-torchbench against their targets (issues 11 and 12).

Figures (``--only``, comma-separated; default ``suite,gate,power,classes,hogs``: about 10 minutes on
the 2-core machine, ``--fast`` about 5):

  suite    the image suite (benchmarks/suites/images, 208 parametrised benchmarks): a
           ``--bench-save=main`` session, then a ``--bench-compare=main`` session: A/A false
           regressions = its regressed verdicts; fastest-call deltas beyond +-10% (lopsidedness).
           Then pytest-benchmark 5.2.3's defaults on the same selection: session time, IQR/median.
  again    adds a second plain save session between the two (+2 minutes): the same comparison
           without the compare machinery in the process, to tell where lopsidedness comes from.
  machine  the image suite saved in 3 plain sessions of the same code: every ordered pair is an A/A
           comparison of fastest calls, judged by the limit alone and with the limit scaled by the
           reference workload's slowdown (engines/reference.py), with +20% and 2x slowdowns
           simulated (+7 minutes; -k float32 with --fast).
  band     the image suite saved in 4 separate sessions into one set (as CI saving main after every
           merge builds it up: the baseline keeps the last 4 runs' fastest calls), then a compare
           session: A/A false regressions against the band (+6 minutes).
  loaded   save, then 60 s of CPU hogs and a memory hog (takes and scatters several GiB), then
           compare: A/A when the machine was loaded in between (+4 minutes).
  gate     the whole gate in pytest sessions: a ~1 ms workload saved once, then 10 compare sessions
           with it unchanged, 20% slower and 2x slower, regressions re-measured in a fresh process
           as the plugin does (the confirmation): each must fail every time, the unchanged never.
  power    a ~1 ms workload (64x64 ``mm`` repeated) measured N times interleaved with the same work
           20% slower and 2x slower, each judged by the real gate against a baseline measured first.
  classes  per size class (10 us, 1 ms, 100 ms), the smallest slowdown caught in every round (and
           A/A in every round): the figure issue 12 asks for.
  hogs     the power figure again with CPU hogs running (2 per core): a 2x slowdown must still fail.
  trivial  session cost per trivial benchmark (vs pytest-benchmark); overhead  plugin cost on a
           2,000-test suite with no bench option (older figures, not in the default set).

Every figure prints the load average and the measuring thread's CPU share it ran at: wall time on a
loaded machine is a different figure. Run from the repository root:

  python benchmarks/figures_time.py         # the default figures, ~10 min (613 s at load 3-5)
  python benchmarks/figures_time.py --fast  # half the suite (-k float32), fewer rounds, ~5 min
  python benchmarks/figures_time.py --only power,hogs
  python benchmarks/figures_time.py --tiny  # suite, gate, power, classes at their smallest: a
                                            # check that the script runs (figures mean nothing)

``--pb-python`` names an interpreter with pytest-benchmark 5.2.3 and torch (pytest-benchmark fails
under pytest 9: "'Function' object has no attribute '_nodeid'"); by default the script looks for
one (this interpreter, then the system python3). Subprocesses import the package of this checkout
(PYTHONPATH is set to it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    "OMP_NUM_THREADS": "1",
}
ENV.pop("PYTEST_ADDOPTS", None)


def _work_folder(prefix: str) -> Path:
    """A temporary folder for one figure's sessions, removed when the script exits (a run of every
    figure used to leave a dozen behind, baselines and JSON of 208 benchmarks each)."""
    import atexit

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


TRIVIAL = """
import pytest, torch

@pytest.mark.parametrize("i", range(10))
def test_noop(benchmark, i):
    benchmark(lambda: None)

@pytest.mark.parametrize("i", range(10))
def test_add16(benchmark, i):
    x, y = torch.ones(16), torch.ones(16)
    benchmark(lambda: x + y)
"""


def pytest_seconds(folder: Path, *args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=ENV,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(
            f"pytest {' '.join(args)} failed in {folder}:\n"
            f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return elapsed


def figure_a(reps: int) -> dict:
    folder = _work_folder("tb-fig-a-")
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_trivial.py").write_text(TRIVIAL)
    ours_off = ["-p", "no:benchmark"]
    timings: dict[str, list[float]] = {"plain": [], "time": [], "pb_disabled": [], "pb": []}
    spreads: list[float] = []
    for rep in range(reps):
        timings["plain"].append(pytest_seconds(folder, *ours_off))
        out = folder / f"run{rep}.json"
        timings["time"].append(
            pytest_seconds(folder, *ours_off, "--bench-mode=time", f"--bench-json={out}")
        )
        for bench in json.loads(out.read_text())["benchmarks"]:
            metric = bench["metrics"]["time"]
            spreads.append(metric["iqr"] / metric["median"])
        if rep == 0 or reps <= 3:
            timings["pb_disabled"].append(
                pytest_seconds(folder, "-p", "no:torchbench", "--benchmark-disable")
            )
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


def _workload(iterations: int, size: int = 64):
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)

    def run() -> None:
        for _ in range(iterations):
            torch.mm(a, b)

    return run


def _iterations_for(target: float, size: int) -> int:
    """How many ``size`` x ``size`` mm calls take about ``target`` seconds here."""
    from pytest_torchbench.engines import walltime

    probe = _workload(10, size)
    probe()
    measured = walltime.measure(probe, walltime.TimeSpec(max_run_time=0.1))
    per_ten = min(measured.raw_times) / measured.number_per_run  # the fastest: load only adds time
    return max(1, round(10 * target / per_ten))


def _judged(fn, baseline) -> tuple[str, object]:
    from pytest_torchbench import Policy, TimeMetric
    from pytest_torchbench.engines import walltime
    from pytest_torchbench.judging.judgement import judge_metric

    metric = TimeMetric.from_measurement(walltime.measure(fn))
    return judge_metric("k", "time", metric, baseline, Policy()).status, metric


def _baseline(fn):
    from pytest_torchbench import TimeMetric
    from pytest_torchbench.engines import walltime

    fn()
    return TimeMetric.from_measurement(walltime.measure(fn))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def figure_power(count: int, hogs: int = 0) -> dict:
    """A ~1 ms workload, the same 20% and 100% slower, measured in turn ``count`` times."""
    import torch

    from pytest_torchbench import NOISY, REGRESSION

    torch.set_num_threads(1)
    base_n = _iterations_for(1e-3, 64)
    fast, slow, double = _workload(base_n), _workload(round(base_n * 1.2)), _workload(2 * base_n)
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        time.sleep(0.5 if hogs else 0)
        load_start = os.getloadavg()[0]
        baseline = _baseline(fast)
        slow(), double()
        found = {"aa": 0, "slow": 0, "double": 0, "aa_noisy": 0, "slow_noisy": 0, "double_noisy": 0}
        shares, ratios = [], []
        for _ in range(count):  # interleaved, so drift of the machine hits every series alike
            for name, fn in (("aa", fast), ("slow", slow), ("double", double)):
                status, metric = _judged(fn, baseline)
                found[name] += status == REGRESSION
                found[name + "_noisy"] += status == NOISY
                if metric.cpu_share is not None:
                    shares.append(metric.cpu_share)
                if name == "slow":
                    ratios.append(metric.fastest / baseline.fastest)
    finally:
        for hog in spinning:
            hog.kill()
            hog.wait()
    return {
        **found,
        "count": count,
        "hogs": hogs,
        "base_median": baseline.median,
        "iterations": base_n,
        "baseline_share": baseline.cpu_share,
        "cpu_share": _median(shares),
        "load": (load_start, os.getloadavg()[0]),
        "ratio_median": _median(ratios),
    }


GATE_MODULE = """
import json, os, pytest, torch

SETTINGS = json.load(open(os.path.join(os.path.dirname(__file__), "settings.json")))
torch.manual_seed(0)
A, B = torch.randn(64, 64), torch.randn(64, 64)

def work(name):
    for _ in range(round(SETTINGS["n"] * SETTINGS["factors"].get(name, 1.0))):
        torch.mm(A, B)

@pytest.mark.parametrize("name", ["same", "slower20", "slower2x"])
def test_mm(benchmark, name):
    benchmark(work, name)
"""


def figure_gate(rounds: int) -> dict:
    """The whole gate in pytest sessions: a ~1 ms workload saved once, then ``rounds`` compare
    sessions with it unchanged, 20% and 2x slower (the confirmation re-measure included)."""
    import torch

    torch.set_num_threads(1)
    folder = _work_folder("tb-fig-gate-")
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_gate.py").write_text(GATE_MODULE)
    settings = folder / "settings.json"
    settings.write_text(json.dumps({"n": _iterations_for(1e-3, 64), "factors": {}}))
    ours = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark"]
    load_start = os.getloadavg()[0]
    subprocess.run(
        [*ours, "--bench-save=main"], cwd=folder, env=ENV, capture_output=True, check=True
    )
    data = json.loads(settings.read_text())
    data["factors"] = {"slower20": 1.2, "slower2x": 2.0}
    settings.write_text(json.dumps(data))
    failed = {"same": 0, "slower20": 0, "slower2x": 0}
    unconfirmed = 0
    seconds = []
    for _ in range(rounds):
        out = folder / "compare.json"
        start = time.perf_counter()
        subprocess.run(
            [*ours, "--bench-compare=main", f"--bench-json={out}"],
            cwd=folder,
            env=ENV,
            capture_output=True,
        )
        seconds.append(time.perf_counter() - start)
        for verdict in json.loads(out.read_text())["verdicts"]:
            name = verdict["key"].rsplit("[", 1)[-1].rstrip("]")
            failed[name] += bool(verdict["failed"])
            unconfirmed += "not confirmed" in verdict.get("summary", "")
    return {
        "rounds": rounds,
        "failed": failed,
        "unconfirmed": unconfirmed,
        "seconds": _median(seconds),
        "load": (load_start, os.getloadavg()[0]),
    }


CLASSES = (("10 us", 10e-6, 16), ("1 ms", 1e-3, 64), ("100 ms", 100e-3, 128))
SLOWDOWNS = (1.05, 1.1, 1.2, 1.5, 2.0)


def figure_classes(rounds: int, classes: tuple = CLASSES) -> dict:
    """Per size class: A/A regressions and each slowdown's catches over ``rounds`` rounds."""
    import torch

    from pytest_torchbench import REGRESSION

    torch.set_num_threads(1)
    found = {}
    for label, target, size in classes:
        n = _iterations_for(target, size)
        load_start = os.getloadavg()[0]
        same = _workload(n, size)
        slowed = {scale: _workload(max(n + 1, round(n * scale)), size) for scale in SLOWDOWNS}
        baseline = _baseline(same)
        for fn in slowed.values():
            fn()
        class_rounds = rounds if target < 0.05 else max(3, rounds // 2)  # 100 ms calls: 0.5 s+ each
        caught = {scale: 0 for scale in SLOWDOWNS}
        aa = 0
        shares = []
        for _ in range(class_rounds):
            status, metric = _judged(same, baseline)
            aa += status == REGRESSION
            shares.append(metric.cpu_share)
            for scale, fn in slowed.items():
                caught[scale] += _judged(fn, baseline)[0] == REGRESSION
        smallest = next((s for s in SLOWDOWNS if caught[s] == class_rounds), None)
        found[label] = {
            "rounds": class_rounds,
            "aa": aa,
            "caught": caught,
            "smallest": smallest,
            "median": baseline.median,
            "load": (load_start, os.getloadavg()[0]),
            "cpu_share": _median([s for s in shares if s is not None]),
        }
    return found


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
        folder = _work_folder("tb-fig-c-")
        _suite(folder, with_torch)
        pytest_seconds(folder, "-p", "no:benchmark")  # warm the file system and bytecode caches
        on, off = [], []
        for _ in range(reps):  # alternate, so load changes on the machine hit both alike
            on.append(pytest_seconds(folder, "-p", "no:benchmark"))
            off.append(pytest_seconds(folder, "-p", "no:benchmark", "-p", "no:torchbench"))
        found[with_torch] = (statistics.median(on), statistics.median(off), min(on), min(off))
    return found


SUITE = ROOT / "benchmarks" / "suites" / "images"


def _suite_run(
    args: list[str], python: str = sys.executable
) -> tuple[float, subprocess.CompletedProcess, tuple[float, float]]:
    """One pytest session over the image suite; returns (seconds, process, load before/after)."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=SUITE,
        env=ENV,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(
            f"pytest {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return elapsed, done, (load, os.getloadavg()[0])


def _time_entries(path: Path) -> dict[str, dict]:
    return {
        b["key"] if "key" in b else b["name"]: b["metrics"]["time"]
        for b in json.loads(path.read_text())["benchmarks"]
    }


def _fastest(entry: dict) -> float:
    from pytest_torchbench.metrics.time import low_quantile

    return low_quantile([t / entry["number_per_run"] for t in entry["raw_times"]])


def _deltas(earlier: dict[str, dict], later: dict[str, dict]) -> dict:
    deltas = sorted(_fastest(later[k]) / _fastest(earlier[k]) - 1 for k in earlier if k in later)
    n = len(deltas) or 1
    return {
        "n": len(deltas),
        "up10": sum(d > 0.1 for d in deltas) / n,
        "down10": sum(d < -0.1 for d in deltas) / n,
        "median": deltas[len(deltas) // 2] if deltas else 0.0,
    }


def _shares(entries: dict[str, dict]) -> float | None:
    return _median([e["cpu_share"] for e in entries.values() if e.get("cpu_share") is not None])


def figure_suite(selection: list[str], pb_python: str | None, again: bool) -> dict:
    folder = _work_folder("tb-fig-suite-")
    ours = ["-p", "no:benchmark", f"--bench-baselines-dir={folder / 'baselines'}", *selection]
    found: dict = {}
    sessions = [("save", ["--bench-save=main"]), ("compare", ["--bench-compare=main"])]
    if again:
        sessions.insert(1, ("again", ["--bench-save=again"]))
    for name, extra in sessions:
        out = folder / f"{name}.json"
        seconds, _, load = _suite_run([*ours, *extra, f"--bench-json={out}"])
        entries = _time_entries(out)
        found[name] = {
            "seconds": seconds,
            "load": load,
            "n": len(entries),
            "entries": entries,
            "share": _shares(entries),
            "iqr_median": _median([e["iqr"] / e["median"] for e in entries.values()]),
        }
        if name == "compare":
            counts: dict[str, int] = {}
            for verdict in json.loads(out.read_text())["verdicts"]:
                if verdict.get("metric", "time") == "time":
                    counts[verdict["status"]] = counts.get(verdict["status"], 0) + 1
            found[name]["counts"] = counts
    found["compare_vs_save"] = _deltas(found["save"]["entries"], found["compare"]["entries"])
    if again:
        found["again_vs_save"] = _deltas(found["save"]["entries"], found["again"]["entries"])
        found["compare_vs_again"] = _deltas(found["again"]["entries"], found["compare"]["entries"])
    if pb_python:
        out = folder / "pb.json"
        seconds, _, load = _suite_run(
            ["-p", "no:torchbench", f"--benchmark-json={out}", *selection], python=pb_python
        )
        stats = [b["stats"] for b in json.loads(out.read_text())["benchmarks"]]
        found["pb"] = {
            "seconds": seconds,
            "load": load,
            "n": len(stats),
            "iqr_median": _median([s["iqr"] / s["median"] for s in stats]),
        }
    return found


def _compare_session(
    ours: list[str], out: Path
) -> tuple[tuple[float, float], list[dict], dict[str, int]]:
    """A ``--bench-compare=main`` session: its load, its time verdicts and how many of each
    status."""
    _, _, load = _suite_run([*ours, "--bench-compare=main", f"--bench-json={out}"])
    verdicts = [
        v for v in json.loads(out.read_text())["verdicts"] if v.get("metric", "time") == "time"
    ]
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict["status"]] = counts.get(verdict["status"], 0) + 1
    return load, verdicts, counts


MEMORY_HOG = """
import time
blocks = []
end = time.time() + {seconds}
while time.time() < end:
    blocks.append(bytearray(b"x" * (64 << 20)))  # touched: the kernel hands out real pages
    if len(blocks) > {blocks}:
        del blocks[::3]  # free a third, scattered: fragments free memory
"""


def figure_loaded(selection: list[str], seconds: float = 60.0, saves: int = 1) -> dict:
    """Save (``saves`` sessions: 4 builds a band), load the machine (CPU hogs and a memory hog that
    takes and scatters several GiB), then compare with the same code: the issue's 'compared after
    the machine was loaded in between'."""
    folder = _work_folder("tb-fig-loaded-")
    ours = ["-p", "no:benchmark", f"--bench-baselines-dir={folder / 'baselines'}", *selection]
    for _ in range(saves):
        _, _, save_load = _suite_run([*ours, "--bench-save=main"])
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 1)
    ]
    hogs.append(
        subprocess.Popen([sys.executable, "-c", MEMORY_HOG.format(seconds=seconds, blocks=96)])
    )
    try:
        time.sleep(seconds)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    peak_load = os.getloadavg()[0]
    out = folder / "compare.json"
    load, verdicts, counts = _compare_session(ours, out)
    return {
        "n": len(verdicts),
        "counts": counts,
        "load": (save_load[0], peak_load, load[0]),
        "share": _shares(_time_entries(out)),
    }


def figure_band(selection: list[str], saves: int = 4) -> dict:
    """A/A against a band of ``saves`` saved sessions, the baseline a CI job builds up on main."""
    folder = _work_folder("tb-fig-band-")
    ours = ["-p", "no:benchmark", f"--bench-baselines-dir={folder / 'baselines'}", *selection]
    loads = []
    for _ in range(saves):
        _, _, load = _suite_run([*ours, "--bench-save=main"])
        loads.append(load[0])
    out = folder / "compare.json"
    load, verdicts, counts = _compare_session(ours, out)
    return {
        "n": len(verdicts),
        "counts": counts,
        "saves": saves,
        "load": (min(loads), max(loads), load[0]),
        "share": _shares(_time_entries(out)),
    }


#: The rules the machine figure compares: (name, fails(delta, reference ratio - 1)) on fastest
#: calls.
MACHINE_RULES: list[tuple[str, Callable[[float, float], bool]]] = [
    ("the limit alone", lambda d, r: d > 0.1),
    (
        "limit scaled when the reference is > 25% slower (the gate's)",
        lambda d, r: d > (1.1 * (1 + r) - 1 if r > 0.25 else 0.1),
    ),
    ("the same at > 10%", lambda d, r: d > (1.1 * (1 + r) - 1 if r > 0.10 else 0.1)),
    (
        "every time divided by the reference ratio, both ways",
        lambda d, r: (1 + d) / (1 + r) - 1 > 0.1,
    ),
]


def figure_machine(selection: list[str], sessions: int = 3) -> dict:
    """Plain ``--bench-save`` sessions of the same code; every ordered pair is an A/A comparison of
    fastest calls, judged by each rule of MACHINE_RULES (no band, no confirmation: what the
    reference workload alone changes); slowdowns simulated by scaling the later session's times."""
    import itertools

    folder = _work_folder("tb-fig-machine-")
    ours = ["-p", "no:benchmark", f"--bench-baselines-dir={folder / 'baselines'}", *selection]
    runs, loads = [], []
    for index in range(sessions):
        out = folder / f"s{index}.json"
        _, _, load = _suite_run([*ours, f"--bench-save=s{index}", f"--bench-json={out}"])
        runs.append(_time_entries(out))
        loads.append(load[0])
    counts = {name: [0, 0, 0] for name, _ in MACHINE_RULES}
    pairs = 0
    ratios = []
    for earlier, later in itertools.permutations(runs, 2):
        for key, then in earlier.items():
            now = later.get(key)
            if now is None or "reference" not in now or "reference" not in then:
                continue
            pairs += 1
            delta = _fastest(now) / _fastest(then) - 1
            ratio = now["reference"]["compute"] / then["reference"]["compute"] - 1
            ratios.append(ratio)
            for name, fails in MACHINE_RULES:
                counts[name][0] += fails(delta, ratio)
                counts[name][1] += fails((1 + delta) * 1.2 - 1, ratio)
                counts[name][2] += fails((1 + delta) * 2 - 1, ratio)
    ratios.sort()
    return {
        "pairs": pairs,
        "counts": counts,
        "loads": loads,
        "reference_spread": (ratios[len(ratios) // 20], ratios[len(ratios) * 19 // 20])
        if ratios
        else (0.0, 0.0),
    }


def _find_pb_python(given: str | None) -> str | None:
    """An interpreter that has pytest-benchmark and torch (and pytest < 9, which it needs)."""
    check = (
        "import pytest, pytest_benchmark, torch, sys; "
        "sys.exit(int(pytest.__version__.split('.')[0]) >= 9)"
    )
    for python in [given] if given else [sys.executable, "/usr/bin/python3", "python3"]:
        try:
            if (
                subprocess.run([python, "-c", check], capture_output=True, timeout=120).returncode
                == 0
            ):
                return python
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fast",
        action="store_true",
        help="half the image suite (-k float32, 104 benchmarks) and fewer rounds: about 5 minutes",
    )
    parser.add_argument(
        "--only",
        default="suite,gate,power,classes,hogs",
        help="figures: suite, again (a second save session in the suite figure), machine (3 save "
        "sessions: the reference workload's rule), band, loaded, gate, power, classes, hogs, "
        "trivial, overhead",
    )
    parser.add_argument(
        "--suite-k", default=None, help="-k expression for the image suite (overrides --fast's)"
    )
    parser.add_argument(
        "--power-count", type=int, default=0, help="power, hogs: rounds (default 30, --fast 20)"
    )
    parser.add_argument(
        "--class-rounds", type=int, default=0, help="classes: rounds (default 10, --fast 5)"
    )
    parser.add_argument(
        "--loaded-saves",
        type=int,
        default=1,
        help="loaded: save sessions before the hogs (4: a band)",
    )
    parser.add_argument(
        "--gate-rounds", type=int, default=0, help="gate: compare sessions (default 10, --fast 5)"
    )
    parser.add_argument(
        "--pb-python",
        default=None,
        help="suite: interpreter with pytest-benchmark 5.2.3, pytest 8, torch",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="suite (7 benchmarks), gate, power, classes (10 us only), one round each: a check "
        "that the script runs",
    )
    args = parser.parse_args()
    if args.tiny:
        args.only = "suite,gate,power,classes"
        args.suite_k = args.suite_k or "test_colour and 3x64x64 and float32"
        args.power_count = args.power_count or 1
        args.class_rounds = args.class_rounds or 1
        args.gate_rounds = args.gate_rounds or 1
    only = set(args.only.split(","))
    unknown = only - {
        "suite",
        "again",
        "machine",
        "band",
        "loaded",
        "gate",
        "power",
        "classes",
        "hogs",
        "trivial",
        "overhead",
    }
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(sorted(unknown))}")
    suite_k = args.suite_k if args.suite_k is not None else ("float32" if args.fast else "")
    power_count = args.power_count or (20 if args.fast else 30)
    class_rounds = args.class_rounds or (5 if args.fast else 10)
    started = time.perf_counter()
    print(
        f"pytest-torchbench wall-time figures  (python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at start)",
        flush=True,
    )
    rows: list[
        tuple[str, str, str, bool | None, str]
    ] = []  # figure, measured, target, met, conditions
    if "suite" in only:
        pb_python = None if args.tiny else _find_pb_python(args.pb_python)
        if pb_python is None and not args.tiny:
            print(
                "(suite) no interpreter with pytest-benchmark, pytest < 9 and torch: "
                "no comparison with it"
            )
        selection = ["-k", suite_k] if suite_k else []
        if args.tiny:
            selection.append("--bench-min-run-time=0.02")
        d = figure_suite(selection, pb_python, again="again" in only)
        n = d["save"]["n"]
        subset = f" (-k {suite_k})" if suite_k else ""
        for name in [n for n in ("save", "again", "compare") if n in d]:
            r = d[name]
            print(
                f"(suite{subset}) {name}: {r['n']} benchmarks, {r['seconds']:.0f} s, load "
                f"{r['load'][0]:.1f}->{r['load'][1]:.1f}, CPU share median {_share(r['share'])}"
                + (f", verdicts {r['counts']}" if "counts" in r else ""),
                flush=True,
            )
        for name, words in (
            ("again_vs_save", "second save vs first save (separate sessions, no compare)"),
            ("compare_vs_save", "compare session vs first save"),
            ("compare_vs_again", "compare session vs second save"),
        ):
            if name not in d:
                continue
            x = d[name]
            print(
                f"(suite) fastest-call deltas, {words}: median {x['median']:+.1%}, "
                f"> +10% {x['up10']:.1%}, "
                f"< -10% {x['down10']:.1%}"
            )
        c = d["compare"]
        regressions = c["counts"].get("regression", 0)
        conditions = (
            f"load {d['save']['load'][0]:.1f}/{c['load'][0]:.1f}, CPU share "
            f"{_share(d['save']['share'])}/{_share(c['share'])}"
        )
        rows.append(
            (
                f"A/A false regressions, image suite{subset}, compare straight after save",
                f"{regressions}/{n} ({regressions / max(n, 1):.1%}), "
                f"noisy {c['counts'].get('noisy', 0)}",
                "<= 1%",
                regressions <= n / 100,
                conditions,
            )
        )
        x = d["compare_vs_save"]
        value = f"{x['up10']:.1%} / {x['down10']:.1%}"
        if "again_vs_save" in d:
            y = d["again_vs_save"]
            value += f"; 2nd save vs save {y['up10']:.1%} / {y['down10']:.1%}"
        rows.append(
            (
                "lopsidedness: fastest-call deltas > +10% / < -10%, compare vs save",
                value,
                "symmetric",
                None,
                conditions,
            )
        )
        if "pb" in d:
            pb = d["pb"]
            cond = f"load {d['save']['load'][0]:.1f} / {pb['load'][0]:.1f}"
            rows.append(
                (
                    f"session time, image suite{subset}: "
                    "torchbench save / pytest-benchmark defaults",
                    f"{d['save']['seconds']:.0f} s / {pb['seconds']:.0f} s",
                    "<= 1x",
                    d["save"]["seconds"] <= pb["seconds"],
                    cond,
                )
            )
            rows.append(
                (
                    "IQR/median, median over benchmarks: torchbench / pytest-benchmark",
                    f"{d['save']['iqr_median'] * 100:.1f}% / {pb['iqr_median'] * 100:.1f}%",
                    "no worse",
                    d["save"]["iqr_median"] <= pb["iqr_median"],
                    cond,
                )
            )
    if "machine" in only:
        selection = ["-k", suite_k] if suite_k else []
        subset = f" (-k {suite_k})" if suite_k else ""
        m = figure_machine(selection)
        pairs = max(m["pairs"], 1)
        low, high = m["reference_spread"]
        cond = (
            f"load {', '.join(f'{x:.1f}' for x in m['loads'])}; "
            f"reference ratio 5th-95th percentile {low:+.0%}/{high:+.0%}"
        )
        for name, (false, caught20, caught2x) in m["counts"].items():
            print(
                f"(machine{subset}) {name}: A/A {false}/{m['pairs']} ({false / pairs:.1%}), "
                "+20% caught "
                f"{caught20 / pairs:.1%}, 2x caught {caught2x / pairs:.1%}; {cond}",
                flush=True,
            )
        alone = m["counts"][MACHINE_RULES[0][0]]
        chosen = m["counts"][MACHINE_RULES[1][0]]
        rows.append(
            (
                f"fastest-call A/A beyond the limit, {m['pairs']} session pairs{subset}: "
                "limit alone / scaled by a slower reference",
                f"{alone[0] / pairs:.1%} / {chosen[0] / pairs:.1%} "
                f"(2x caught {alone[2] / pairs:.1%} / {chosen[2] / pairs:.1%})",
                "fewer, 2x still caught",
                chosen[0] <= alone[0] and chosen[2] >= 0.99 * alone[2],
                cond,
            )
        )
    if "band" in only:
        selection = ["-k", suite_k] if suite_k else []
        subset = f" (-k {suite_k})" if suite_k else ""
        e = figure_band(selection)
        regressions = e["counts"].get("regression", 0)
        cond = (
            f"load {e['load'][0]:.1f}-{e['load'][1]:.1f} saving, {e['load'][2]:.1f} comparing, "
            f"CPU share {_share(e['share'])}"
        )
        print(
            f"(band{subset}) {e['saves']} saves then a compare: verdicts {e['counts']}; {cond}",
            flush=True,
        )
        rows.append(
            (
                f"A/A false regressions, image suite{subset}, "
                f"against a band of {e['saves']} saved sessions",
                f"{regressions}/{e['n']} ({regressions / max(e['n'], 1):.1%}), "
                f"noisy {e['counts'].get('noisy', 0)}",
                "<= 1%",
                regressions <= e["n"] / 100,
                cond,
            )
        )
    if "loaded" in only:
        selection = ["-k", suite_k] if suite_k else []
        subset = f" (-k {suite_k})" if suite_k else ""
        f = figure_loaded(selection, saves=args.loaded_saves)
        regressions = f["counts"].get("regression", 0)
        cond = (
            f"load {f['load'][0]:.1f} saving, {f['load'][1]:.1f} after the hogs, "
            f"{f['load'][2]:.1f} comparing, "
            f"CPU share {_share(f['share'])}"
        )
        print(
            f"(loaded{subset}) {args.loaded_saves} save(s), 60 s of CPU and memory hogs, "
            f"compare: verdicts {f['counts']}; {cond}",
            flush=True,
        )
        saved = "one save" if args.loaded_saves == 1 else f"a band of {args.loaded_saves} saves"
        rows.append(
            (
                f"A/A false regressions, image suite{subset}, {saved}, "
                "machine loaded, then compare",
                f"{regressions}/{f['n']} ({regressions / max(f['n'], 1):.1%}), "
                f"noisy {f['counts'].get('noisy', 0)}",
                "<= 1%",
                regressions <= f["n"] / 100,
                cond,
            )
        )
    if "gate" in only:
        g = figure_gate(args.gate_rounds or (5 if args.fast else 10))
        count, cond = g["rounds"], f"load {g['load'][0]:.1f}->{g['load'][1]:.1f}"
        print(
            f"(gate) {count} compare sessions, median {g['seconds']:.1f} s each; "
            f"failed {g['failed']}; "
            f"not confirmed by the fresh process: {g['unconfirmed']}; {cond}",
            flush=True,
        )
        rows += [
            (
                "whole gate (pytest sessions, confirmation): A/A, ~1 ms",
                f"{g['failed']['same']}/{count}",
                "0",
                g["failed"]["same"] == 0,
                cond,
            ),
            (
                "whole gate: 20% slowdown of ~1 ms caught",
                f"{g['failed']['slower20']}/{count}",
                f"{count}/{count}",
                g["failed"]["slower20"] == count,
                cond,
            ),
            (
                "whole gate: 2x slowdown caught",
                f"{g['failed']['slower2x']}/{count}",
                f"{count}/{count}",
                g["failed"]["slower2x"] == count,
                cond,
            ),
        ]
    for figure, hogs in (("power", 0), ("hogs", 2 * (os.cpu_count() or 1))):
        if figure not in only:
            continue
        b = figure_power(power_count, hogs)
        count = b["count"]
        cond = (
            f"load {b['load'][0]:.1f}->{b['load'][1]:.1f}, CPU share {_share(b['cpu_share'])}"
            + (f", {hogs} CPU hogs" if hogs else "")
        )
        print(
            f"({figure}) {b['iterations']} x 64x64 mm, median {b['base_median'] * 1e3:.3f} ms; "
            "slow/base "
            f"fastest-call ratio median {b['ratio_median']:.3f}; noisy: A/A {b['aa_noisy']}, 20% "
            f"{b['slow_noisy']}, 2x {b['double_noisy']}; {cond}",
            flush=True,
        )
        tag = " (CPU hogs running)" if hogs else ""
        rows += [
            (
                f"A/A false regressions, ~1 ms workload{tag}",
                f"{b['aa']}/{count}",
                f"<= {max(1, count // 100)}",
                b["aa"] <= max(1, count // 100),
                cond,
            ),
            (
                f"20% slowdown of ~1 ms caught{tag}",
                f"{b['slow']}/{count}",
                f">= {-(-count * 95 // 100)}",
                None if hogs else b["slow"] >= -(-count * 95 // 100),
                cond,
            ),
            (
                f"2x slowdown caught{tag}",
                f"{b['double']}/{count}",
                f"{count}/{count}",
                b["double"] == count,
                cond,
            ),
        ]
    if "classes" in only:
        k = figure_classes(class_rounds, CLASSES[:1] if args.tiny else CLASSES)
        for label, r in k.items():
            cond = (
                f"load {r['load'][0]:.1f}->{r['load'][1]:.1f}, CPU share {_share(r['cpu_share'])}"
            )
            print(
                f"(classes) {label} (median {r['median'] * 1e3:.3f} ms): "
                f"A/A {r['aa']}/{r['rounds']}; caught "
                + ", ".join(
                    f"+{(s - 1) * 100:.0f}% {c}/{r['rounds']}" for s, c in r["caught"].items()
                )
                + f"; {cond}",
                flush=True,
            )
            smallest = (
                "none up to 2x" if r["smallest"] is None else f"+{(r['smallest'] - 1) * 100:.0f}%"
            )
            rows.append(
                (
                    f"smallest slowdown caught in {r['rounds']}/{r['rounds']} rounds, "
                    f"{label} class",
                    f"{smallest} (A/A {r['aa']}/{r['rounds']})",
                    "report",
                    None,
                    cond,
                )
            )
    if "trivial" in only:
        a = figure_a(3)
        rows.append(
            (
                "session cost per trivial benchmark: torchbench / pytest-benchmark",
                f"{a['ours_per_bench']:.3f} s / {a['pb_per_bench']:.3f} s",
                "<= 0.3 s",
                a["ours_per_bench"] <= 0.3,
                f"load {os.getloadavg()[0]:.1f}",
            )
        )
    if "overhead" in only:
        for with_torch, (on, off, _, _) in figure_c(7).items():
            overhead = on / off - 1
            rows.append(
                (
                    "plugin overhead, 2,000 tests"
                    f"{', torch imported' if with_torch else ', no torch'}",
                    f"{overhead * 100:+.1f}%",
                    "<= 2%",
                    overhead <= 0.02,
                    f"load {os.getloadavg()[0]:.1f}",
                )
            )
    if not rows:
        return
    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'figure'.ljust(width)}  {'measured':<32} {'target':<10} {'met':<4} conditions")
    for name, value, target, ok, cond in rows:
        print(
            f"{name.ljust(width)}  {value:<32} {target:<10} "
            f"{'-' if ok is None else 'yes' if ok else 'NO':<4} {cond}"
        )
    print(
        f"\n{time.perf_counter() - started:.0f} s in all; load average now {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
