"""measure() inside real valgrind processes: plausibility, sensitivity, determinism across
reruns, statement order and selection, and the parser against callgrind_annotate on real dumps.

Four counted processes run once per module (two at a time on a 2-core machine: about 25 s).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pytest_torchbench.engines import callgrind as cg

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind"),
]

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("callgrind_driver.py")
ALL = ["add", "add_twice", "total", "mm", "mm_clone"]
# Same-length names: each run's output folder path is used inside the counted process.
RUNS = {
    "forward_": (ALL, True),
    "rerun___": (ALL, True),
    "reversed": (list(reversed(ALL)), False),
    "subset__": (["mm", "add", "total"], False),
}


def launch(out_dir: Path, order: list[str], keep: bool, allocator: Path | None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    env = cg.counted_environment(
        os.environ,
        allocator,
        valgrind_version=cg.check_valgrind(),
        extra={
            "PYTHONPATH": str(REPO),
            "TORCHBENCH_TEST_ORDER": ",".join(order),
            "TORCHBENCH_TEST_OUT": str(out_dir),
            "TORCHBENCH_TEST_KEEP": "1" if keep else "0",
        },
    )
    argv = cg.valgrind_argv(sys.executable, cg.out_file_pattern(out_dir))
    started = time.perf_counter()
    result = subprocess.run(
        argv + [sys.executable, str(DRIVER)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-4000:]
    data: dict[str, Any] = json.loads((out_dir / "results.json").read_text())
    data["wall"] = wall
    data["out_dir"] = out_dir
    return data


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    allocator = cg.build_allocator(tmp_path_factory.mktemp("alloc"))
    if allocator is None:
        pytest.skip("no C compiler for the deterministic allocator")
    base = tmp_path_factory.mktemp("callgrind-runs")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(launch, base / name, order, keep, allocator)
            for name, (order, keep) in RUNS.items()
        }
        results = {name: future.result() for name, future in futures.items()}
    for name, data in results.items():
        per_statement = {k: round(v["seconds"], 3) for k, v in data["statements"].items()}
        print(f"\n{name}: wall {data['wall']:.1f} s, per statement {per_statement}")
    return results


def per_run(data: dict[str, Any], name: str) -> float:
    return float(data["statements"][name]["per_run"])


def test_counts_are_positive_and_plausible(runs: dict[str, dict[str, Any]]) -> None:
    for name in ALL:
        value = per_run(runs["forward_"], name)
        # a tiny torch op costs thousands of instructions, far from millions
        assert 2_000 < value < 500_000, (name, value)
        entry = runs["forward_"]["statements"][name]
        assert entry["n_exclusive"] > 10 and entry["n_inclusive"] > 10
        assert entry["standardized_counts"] == entry["counts"]
        assert entry["denoised_counts"] <= entry["counts"]
        assert entry["self_delta_rows"] == 0


def test_more_work_counts_clearly_more(runs: dict[str, dict[str, Any]]) -> None:
    forward = runs["forward_"]
    assert per_run(forward, "add_twice") > 1.6 * per_run(forward, "add")
    assert per_run(forward, "mm_clone") > 1.5 * per_run(forward, "mm")


def test_reruns_are_bit_identical(runs: dict[str, dict[str, Any]]) -> None:
    """Identical to the instruction, except one known residue: glibc's ``memcmp`` inside
    ``torch.mm(...).clone()`` sometimes takes 6-12 more instructions per call (its path depends
    on the data compared); everything else must match exactly, and the total within 0.1%."""
    first, second = runs["forward_"]["statements"], runs["rerun___"]["statements"]
    for name in ALL:
        a = {f: c for c, f in first[name]["exclusive"] if "memcmp" not in f}
        b = {f: c for c, f in second[name]["exclusive"] if "memcmp" not in f}
        assert a == b, name
        ratio = first[name]["counts"] / second[name]["counts"]
        print(f"\nrerun {name}: {first[name]['counts']} vs {second[name]['counts']}")
        assert abs(ratio - 1) <= 0.001, name
    assert sum(first[n]["counts"] == second[n]["counts"] for n in ALL) >= len(ALL) - 1


def test_order_and_selection_move_counts_by_at_most_a_tenth_of_a_percent(
    runs: dict[str, dict[str, Any]],
) -> None:
    worst = 0.0
    report = []
    for name in ALL:
        values = [per_run(data, name) for data in runs.values() if name in data["statements"]]
        drift = max(values) / min(values) - 1
        worst = max(worst, drift)
        report.append(f"{name}: {[int(v) for v in values]} drift {drift:.4%}")
    print("\n" + "\n".join(report) + f"\nworst drift {worst:.4%}")
    assert worst <= 0.001, report


def test_fingerprint_from_inside_the_counted_process(runs: dict[str, dict[str, Any]]) -> None:
    fingerprint = runs["forward_"]["fingerprint"]
    assert fingerprint["valgrind"].startswith("valgrind-")
    assert fingerprint["pythonmalloc"] == "malloc" and fingerprint["pythonhashseed"] == "0"
    assert fingerprint["allocator"].startswith("torchbench-sizeclass:")
    assert fingerprint["cpu_capability"] not in ("", "None")
    assert fingerprint["libc"].startswith("glibc")


def test_only_own_dumps_consumed(runs: dict[str, dict[str, Any]]) -> None:
    out_dir: Path = runs["reversed"]["out_dir"]
    leftovers = sorted(p.name for p in out_dir.iterdir() if p.name != "results.json")
    # the region dumps are deleted once read; only the exit dump (costs 0) remains
    assert len(leftovers) == 1 and leftovers[0].startswith("callgrind.out."), leftovers
    assert cg.parse_callgrind_file(out_dir / leftovers[0])[0].total == 0


@pytest.mark.skipif(shutil.which("callgrind_annotate") is None, reason="needs callgrind_annotate")
def test_parser_matches_callgrind_annotate_on_real_dumps(runs: dict[str, dict[str, Any]]) -> None:
    ours_seconds = annotate_seconds = 0.0
    cg.function_counts([], inclusive=False)  # torch's types are imported on first use: not timed
    for name in ALL:
        dump = Path(runs["forward_"]["statements"][name]["dump"])
        for inclusive in (False, True):
            started = time.perf_counter()
            theirs = cg.annotate_counts(dump, inclusive)
            annotate_seconds += time.perf_counter() - started
            started = time.perf_counter()
            counts = cg.function_counts(cg.parse_callgrind_file(dump), inclusive=inclusive)
            ours_seconds += time.perf_counter() - started
            ours = {row.function: row.count for row in counts}
            assert ours == theirs, (name, inclusive)
        # what measure() returned is that parse (inclusive without the program-total roots)
        exclusive = {f: c for c, f in runs["forward_"]["statements"][name]["exclusive"]}
        assert exclusive == cg.annotate_counts(dump, False)
    print(f"\nparse: {ours_seconds * 1000:.1f} ms, callgrind_annotate: {annotate_seconds * 1000:.1f} ms")
    assert ours_seconds < annotate_seconds
