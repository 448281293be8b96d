"""Figures for the profiler modes: what --bench-profile adds per small benchmark (target <= 1 s),
and whether op counts are identical across runs and with -n 2.

Run: ``python benchmarks/figures_profile.py`` from the repository root (``--tiny``: 3 benchmarks,
one session of each kind, a check that the script runs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
N = 10
ALL_STATEMENTS = [
    "x + y",
    "x.sum()",
    "torch.mm(x, y)",
    "x.relu()",
    "x.clone()",
    "torch.exp(x)",
    "x @ y",
    "x.t()",
    "torch.cat([x, y])",
    "x.pow(2)",
]


def module(n: int) -> str:
    lines = ["import torch", ""]
    for i, stmt in enumerate(ALL_STATEMENTS[:n]):
        lines += [
            f"def test_s{i:02d}(benchmark):",
            "    x = torch.ones(4, 4); y = torch.ones(4, 4)",
            f"    benchmark(lambda: {stmt})",
            "",
        ]
    return "\n".join(lines)


def run(cwd: Path, *args: str) -> tuple[float, int, dict]:
    json_path = cwd.parent / "r.json"
    json_path.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
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
            f"--bench-json={json_path}",
            *args,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-2000:])
    data = json.loads(json_path.read_text()) if json_path.exists() else {"benchmarks": []}
    return (
        wall,
        done.returncode,
        {r["key"]: r["metrics"].get("ops", {}).get("ops") for r in data["benchmarks"]},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="3 benchmarks, one session of each kind: a check that the script runs",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="torchbench-profile-figures-"))
    try:
        figures(work, 3 if args.tiny else N, 1 if args.tiny else 3)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def figures(work: Path, n: int, sessions: int) -> None:
    bench = work / "bench"
    bench.mkdir()
    (bench / "test_small.py").write_text(module(n))
    print(
        f"== --bench-profile cost, {n} small benchmarks, --bench-mode=ops "
        f"(median of {sessions} sessions each) =="
    )
    plain, profiled = [], []
    ops_runs = []
    for _ in range(sessions):
        wall, rc, ops = run(bench, "--bench-mode=ops")
        plain.append(wall)
        ops_runs.append(ops)
        wall, rc2, _ = run(
            bench, "--bench-mode=ops", "--bench-profile", f"--bench-output={work / 'prof'}"
        )
        profiled.append(wall)
    p, q = sorted(plain)[len(plain) // 2], sorted(profiled)[len(profiled) // 2]
    traces = len(list((work / "prof" / "traces").iterdir()))
    added = (q - p) / n
    print(
        f"  --bench-mode=ops: {p:.2f} s; with --bench-profile: {q:.2f} s ({traces} traces written)"
    )
    print(
        f"  added per benchmark: {added * 1000:.0f} ms "
        f"(target <= 1 s: {'met' if added <= 1 else 'NOT met'})"
    )
    print()
    print("== op counts: identical across runs and with -n 2 ==")
    _, rc, xdist = run(bench, "--bench-mode=ops", "-n", "2")
    same_runs = all(o == ops_runs[0] for o in ops_runs[1:])
    print(
        f"  {len(ops_runs[0])} benchmarks; {sessions} serial runs identical: {same_runs}; "
        f"-n 2 identical: {xdist == ops_runs[0]}"
    )
    example = ops_runs[0].get("test_small.py::test_s02")
    print(f"  e.g. torch.mm(x, y): {example}")


if __name__ == "__main__":
    main()
