"""Figures for instructions mode, printed side by side in one run.

(a) a pytest session of 20 small torch benchmarks in --bench-mode=instructions (wall time of the
    whole session) against torch's own ``Timer(stmt, setup).collect_callgrind(number=100)`` on the
    same statements: K calls are timed (default 2; ``--collect-callgrind-calls 20`` for all) and
    extrapolated to 20. Target: session <= 1/20 of 20 collect_callgrind calls.
(b) determinism: save once, then compare a full rerun, a -k subset, reversed order (a conftest hook
    that reverses the items) and -n 2; the worst |delta| per setup. Target <= 0.1%.
(c) our Callgrind parser against callgrind_annotate: per-function counts on a real dump, and timing.
(d) the user's environment reaches the counted workers, padded to a fixed size: compare runs with an
    unrelated 1,000-character variable added, and with CI-style variables (CI, GITHUB_SHA,
    GITHUB_RUN_ID, BUILD_NUMBER...) set to two different sets of values, against the saved run.
    Target <= 0.1%.

Run: ``python benchmarks/figures_instructions.py`` from the repository root (needs valgrind).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETUP = "import torch; x = torch.ones(4, 4); y = torch.ones(4, 4)"
STATEMENTS = [
    "x + y", "x * y", "x - y", "x / y", "x.sum()", "x.mean()", "torch.mm(x, y)", "x @ y", "x.t()",
    "x.clone()", "x.relu()", "torch.exp(x)", "x.max()", "torch.cat([x, y])", "x.view(16)",
    "x.reshape(2, 8)", "x[0]", "x.abs()", "torch.softmax(x, 0)", "x.pow(2)",
]

CONFTEST = '''
def pytest_addoption(parser):
    parser.addoption("--reverse-items", action="store_true")

def pytest_collection_modifyitems(config, items):
    if config.getoption("--reverse-items"):
        items.reverse()
'''


def test_module() -> str:
    lines = ["import pytest, torch", "", ""]
    for i, stmt in enumerate(STATEMENTS):
        lines += [
            f"def test_s{i:02d}(benchmark):",
            "    x = torch.ones(4, 4); y = torch.ones(4, 4)",
            f"    benchmark(lambda: {stmt})",
            "", "",
        ]
    return "\n".join(lines)


def run_session(cwd: Path, *args: str, json_path: Path) -> tuple[float, int, dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:benchmark", "-p", "no:cacheprovider", "-q",
         "--bench-mode=instructions", f"--bench-json={json_path}", *args],
        cwd=cwd, env=env, capture_output=True, text=True,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-2000:])
    counts = {}
    if json_path.exists():
        for r in json.loads(json_path.read_text())["benchmarks"]:
            counts[r["key"]] = r["metrics"]["instructions"]["instructions_per_run"]
    return wall, done.returncode, counts


def collect_callgrind_seconds(k: int) -> list[tuple[str, float, int]]:
    from torch.utils.benchmark import Timer

    rows = []
    for stmt in STATEMENTS[:k]:
        started = time.perf_counter()
        stats = Timer(stmt, setup=SETUP).collect_callgrind(number=100)
        rows.append((stmt, time.perf_counter() - started, stats.counts(denoise=False)))
    return rows


#: Two CI runs' worth of the variables CI systems set: same names, different values (and lengths).
CI_VARIABLES = [
    {"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_SHA": "3f2a9c0d41b7e8f5a6c2d9e0b1a4f7c3d8e5b2a1",
     "GITHUB_RUN_ID": "7351982046", "GITHUB_RUN_NUMBER": "88", "GITHUB_REF": "refs/pull/12/merge",
     "BUILD_NUMBER": "88", "RUNNER_TEMP": "/home/runner/work/_temp"},
    {"CI": "1", "GITHUB_ACTIONS": "true", "GITHUB_SHA": "e07b5d2c9a18f3460b7cd2e95a1f08b36c4d7e29",
     "GITHUB_RUN_ID": "12983455120", "GITHUB_RUN_NUMBER": "1417", "GITHUB_REF": "refs/heads/main",
     "BUILD_NUMBER": "1417", "RUNNER_TEMP": "/tmp/r"},
]


def environment_figure(bench: Path, out: Path, saved: dict[str, float]) -> None:
    """(d): counts when the environment grows or CI variables change value, against the saved run
    and against a plain rerun (what a rerun alone moves is item (b)'s; the difference is the
    environment's own effect)."""
    print()
    print("== (d) the user's environment reaches the workers (worst |delta|; target <= 0.1%) ==")
    setups = [
        ("plain rerun", {}),
        ("+ 1,000-char variable", {"TORCHBENCH_FIGURE_UNRELATED": "u" * 1000}),
        ("CI variables, run A", CI_VARIABLES[0]),
        ("CI variables, run B", CI_VARIABLES[1]),
    ]
    rerun: dict[str, float] = {}
    for name, extra in setups:
        env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
        json_path = out / "env.json"
        json_path.unlink(missing_ok=True)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:benchmark", "-p", "no:cacheprovider", "-q",
             "--bench-mode=instructions", f"--bench-json={json_path}"],
            cwd=bench, env=env, capture_output=True, text=True,
        )
        wall = time.perf_counter() - started
        if done.returncode != 0 or not json_path.exists():
            print(f"  {name:<24} FAILED (exit {done.returncode}): {done.stdout[-1500:]} {done.stderr[-1000:]}")
            continue
        counts = {r["key"]: r["metrics"]["instructions"]["instructions_per_run"]
                  for r in json.loads(json_path.read_text())["benchmarks"]}
        if not extra:
            rerun = counts
        worst, worst_key = max((abs(c / saved[k] - 1.0), k) for k, c in counts.items())
        versus_rerun = max((abs(c / rerun[k] - 1.0) for k, c in counts.items() if k in rerun), default=float("nan"))
        verdict = "met" if worst <= 0.001 else "NOT met"
        print(f"  {name:<24} {len(counts):>2} results, {wall:5.1f} s, worst |delta| vs saved {worst * 100:.4f}% "
              f"({worst_key.split('::')[-1]}), vs the plain rerun {versus_rerun * 100:.4f}% -> {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collect-callgrind-calls", type=int, default=2, metavar="K",
                        help="how many of the 20 statements to run through torch's collect_callgrind")
    args = parser.parse_args()
    k = max(1, min(args.collect_callgrind_calls, len(STATEMENTS)))

    work = Path(tempfile.mkdtemp(prefix="torchbench-figures-"))
    bench = work / "bench"
    bench.mkdir()
    (bench / "test_small.py").write_text(test_module())
    (bench / "conftest.py").write_text(CONFTEST)
    out = work / "out"
    out.mkdir()

    print("== (a) 20 small torch benchmarks: one pytest session vs torch's collect_callgrind ==")
    session_wall, rc, saved = run_session(bench, "--bench-save=main", json_path=out / "save.json")
    print(f"pytest --bench-mode=instructions --bench-save=main, 20 benchmarks: {session_wall:.1f} s "
          f"(exit {rc}, {len(saved)} results)")
    rows = collect_callgrind_seconds(k)
    for stmt, seconds, counts in rows:
        print(f"  Timer({stmt!r}, setup).collect_callgrind(number=100): {seconds:.1f} s ({counts:,} instructions)")
    per_call = sum(s for _, s, _ in rows) / len(rows)
    twenty = per_call * len(STATEMENTS)
    what = "measured" if k == len(STATEMENTS) else f"extrapolated from {k} call(s): {per_call:.1f} s each x 20"
    print(f"20 collect_callgrind calls: {twenty:.0f} s ({what})")
    ratio = session_wall / twenty
    print(f"ratio session / 20 calls: {ratio:.3f} = 1/{1 / ratio:.0f}  (target <= 1/20 = 0.050: "
          f"{'met' if ratio <= 0.05 else 'NOT met'})")

    print()
    print("== (b) determinism against the saved baseline (worst |delta| per setup; target <= 0.1%) ==")
    setups = [
        ("full rerun", ()),
        ("-k subset (7 of 20)", ("-k", " or ".join(f"test_s{i:02d}" for i in (1, 4, 6, 9, 13, 16, 19)))),
        ("reversed order", ("--reverse-items",)),
        ("-n 2", ("-n", "2")),
    ]
    for name, extra in setups:
        wall, rc, counts = run_session(bench, "--bench-compare=main", *extra, json_path=out / "cmp.json")
        worst, worst_key = 0.0, ""
        for key, count in counts.items():
            drift = abs(count / saved[key] - 1.0)
            if drift >= worst:
                worst, worst_key = drift, key
        verdict = "met" if worst <= 0.001 else "NOT met"
        print(f"  {name:<22} {len(counts):>2} results, exit {rc}, {wall:5.1f} s, worst |delta| "
              f"{worst * 100:.4f}% ({worst_key.split('::')[-1]}) -> {verdict}")

    print()
    print("== (c) parser vs callgrind_annotate on a real dump ==")
    from pytest_torchbench.engines import callgrind as cg

    dump = out / "callgrind.out.real"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={dump}", sys.executable, "-c",
                    "import json, re; json.dumps({'a': [1, 2, 3]}); re.compile('a+b')"],
                   check=True, capture_output=True)
    started = time.perf_counter()
    theirs = cg.annotate_counts(dump)
    annotate_s = time.perf_counter() - started
    started = time.perf_counter()
    ours = {row.function: row.count for row in cg.function_counts(cg.parse_callgrind_file(dump), inclusive=False)}
    ours_s = time.perf_counter() - started
    differing = sorted(f for f in set(ours) | set(theirs) if ours.get(f) != theirs.get(f))
    print(f"  dump {dump.stat().st_size / 1024:.0f} KB, {len(theirs)} functions; per-function counts "
          f"{'identical' if not differing else f'DIFFER in {len(differing)} functions, e.g. {differing[:3]}'}")
    print(f"  our parser: {ours_s * 1000:.0f} ms, callgrind_annotate: {annotate_s * 1000:.0f} ms "
          f"({annotate_s / ours_s:.1f}x)")

    environment_figure(bench, out, saved)


if __name__ == "__main__":
    main()
