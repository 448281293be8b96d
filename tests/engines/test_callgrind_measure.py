"""Counting inside real valgrind processes, on the path the plugin ships: workers launched by
``CallgrindLaunch`` (the metric's launch: argv, pinned and padded environment, allocator), each
statement counted by ``count_region_for_controller`` (adaptive number, dump left unread) and its
dump read natively here by ``CallgrindLaunch.finish``, as the controller does; plus
``measure`` (``bench_timer(...).collect_callgrind()``). Plausibility, sensitivity, determinism
across reruns, statement order and selection, and the parser against callgrind_annotate.

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
from pytest_torchbench.metrics.instructions import InstructionsLaunch as CallgrindLaunch

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind"),
]

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("callgrind_driver.py")
ALL = ["add", "add_twice", "total", "mm", "mm_clone"]
# Same-length names: each run's output folder path is used inside the counted process.
RUNS = {
    "forward_": ALL,
    "rerun___": ALL,
    "reversed": list(reversed(ALL)),
    "subset__": ["mm", "add", "total"],
}


def launch(out_dir: Path, order: list[str], how: CallgrindLaunch) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    environ = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TORCHBENCH_TEST_ORDER": ",".join(order),
        "TORCHBENCH_TEST_OUT": str(out_dir),
    }
    argv, env = how.command(sys.executable, out_dir, environ)
    started = time.perf_counter()
    result = subprocess.run(
        argv + [str(DRIVER)], env=env, cwd=REPO, capture_output=True, text=True, timeout=600
    )
    wall = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-4000:]
    data: dict[str, Any] = json.loads((out_dir / "results.json").read_text())
    data["wall"] = wall
    data["out_dir"] = out_dir
    # The controller's side: every region's dump read natively (full exclusive counts kept here
    # for the tests, and callgrind_annotate's reading of it), then finished as the plugin does.
    for entry in data["statements"].values():
        dump = Path(entry["dump"])
        exclusive, total = cg.exclusive_counts(cg.parse_callgrind_file(dump))
        entry["exclusive"], entry["total"] = exclusive, total
        if shutil.which("callgrind_annotate"):
            entry["annotated"] = {
                inclusive: cg.annotate_counts(dump, inclusive) for inclusive in (False, True)
            }
            entry["ours_inclusive"] = {
                row.function: row.count
                for row in cg.function_counts(cg.parse_callgrind_file(dump), inclusive=True)
            }
        entry["metric"] = how.finish(entry, out_dir)
        assert not dump.exists()
    data["leftovers"] = {
        p.name: cg.parse_callgrind_file(p)[0].total
        for p in out_dir.iterdir()
        if p.name != "results.json"
    }
    return data


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, Any]]:
    how = CallgrindLaunch()
    how.prepare(sys.executable)
    if how.allocator is None:
        pytest.skip("no C compiler for the deterministic allocator")
    # The plugin's own fixed folder names: what reaches the counted process is what the plugin
    # ships.
    from pytest_torchbench.pytest.workers import fixed_dump_dir

    folders = {name: fixed_dump_dir(how.folder_prefix) for name in RUNS}
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {
                name: pool.submit(launch, folders[name] / name, order, how)
                for name, order in RUNS.items()
            }
            results = {name: future.result() for name, future in futures.items()}
    finally:
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)
    for name, data in results.items():
        per_statement = {k: round(v["seconds"], 3) for k, v in data["statements"].items()}
        print(f"\n{name}: wall {data['wall']:.1f} s, per statement {per_statement}")
    return results


def per_run(data: dict[str, Any], name: str) -> float:
    return float(data["statements"][name]["metric"]["instructions_per_run"])


def test_counts_are_positive_and_plausible(runs: dict[str, dict[str, Any]]) -> None:
    for name in ALL:
        value = per_run(runs["forward_"], name)
        # a tiny torch op costs thousands of instructions, far from millions
        assert 2_000 < value < 500_000, (name, value)
        entry = runs["forward_"]["statements"][name]
        assert (
            entry["number_per_run"] == 100 and entry["warmup"] == 100
        )  # small: the adaptive rule's 100
        assert len(entry["metric"]["functions"]) > 10
        assert entry["total"] == sum(entry["exclusive"].values())
    timer = runs["forward_"]["timer"]
    assert timer["n_exclusive"] > 10 and timer["n_inclusive"] > 10
    assert timer["standardized_counts"] == timer["counts"]
    assert timer["denoised_counts"] <= timer["counts"]
    assert timer["self_delta_rows"] == 0
    # measure() (collect_callgrind) and the benchmark path count the same statement alike
    assert abs(timer["counts"] / 100 / per_run(runs["forward_"], timer["statement"]) - 1) < 0.01


def test_more_work_counts_clearly_more(runs: dict[str, dict[str, Any]]) -> None:
    forward = runs["forward_"]
    assert per_run(forward, "add_twice") > 1.6 * per_run(forward, "add")
    assert per_run(forward, "mm_clone") > 1.5 * per_run(forward, "mm")


def test_reruns_are_bit_identical(runs: dict[str, dict[str, Any]]) -> None:
    first, second = runs["forward_"]["statements"], runs["rerun___"]["statements"]
    for name in ALL:
        print(f"\nrerun {name}: {first[name]['total']} vs {second[name]['total']}")
        assert first[name]["exclusive"] == second[name]["exclusive"], name
        assert first[name]["metric"] == second[name]["metric"], name


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
    leftovers = runs["reversed"]["leftovers"]
    # the region dumps are deleted once read; only the exit dump (costs 0) remains
    assert len(leftovers) == 1 and next(iter(leftovers)).startswith("callgrind.out."), leftovers
    assert list(leftovers.values()) == [0]
    with pytest.raises(RuntimeError, match="outside"):  # the controller reads only its run's folder
        CallgrindLaunch().finish({"dump": "/etc/passwd", "number_per_run": 1}, out_dir)


@pytest.mark.skipif(shutil.which("callgrind_annotate") is None, reason="needs callgrind_annotate")
def test_parser_matches_callgrind_annotate_on_real_dumps(runs: dict[str, dict[str, Any]]) -> None:
    for name in ALL:
        entry = runs["forward_"]["statements"][name]
        assert entry["exclusive"] == entry["annotated"][False], name
        assert entry["ours_inclusive"] == entry["annotated"][True], name
