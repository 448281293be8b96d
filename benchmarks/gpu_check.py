"""The GPU check: every CUDA path of pytest-torchbench on one GPU, each figure printed against its
target.

Run through ``benchmarks/gpu_check.sh`` (which installs the project without network first), from the
repository root, on a machine with a CUDA device. Steps, each bounded in time:

1. the GPU suite (``benchmarks/suites/gpu``) saved in every profiler mode plus time and gpu_time;
2. A/A: the same suite compared in a second process, and measured again in a third (device-time
   spread across three processes, beside the wall time's);
3. one injected regression per metric (``TORCHBENCH_GPU_INJECT=1``): each must fail, naming what
   changed;
4. the project's GPU-path tests, then the rest of its fast tests (``-m "not slow"``) with xdist.

Each step's time bound can be set (``GPU_CHECK_SAVE_SECONDS``, ``_AA_``, ``_INJECT_``, ``_TESTS_``,
``_REST_``) and the third process left out (``GPU_CHECK_THIRD=0``) to fit a short device lease.

Writes logs and JSON under ``$OUT`` (or a temporary folder) and ends with one table. Exit status:
0 every figure met its target, 1 one was missed, 2 no CUDA device (one line says so; nothing is
run or written: ``CUDA_VISIBLE_DEVICES=`` gives this path on any machine, what the test suite runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "benchmarks" / "suites" / "gpu"
#: Where logs and JSON go ($OUT or a temporary folder), and a scratch folder: both set by main(),
#: so that importing this module creates nothing.
OUT = Path()
SCRATCH = Path()
#: The exit status when there is no CUDA device.
NO_DEVICE = 2
MODES = "time,ops,memory,kernels,gpu_time,compile"
ROWS: list[tuple[str, str, str, str]] = []  # (figure, value, target, ok)


def row(figure: str, value: str, target: str, ok: bool | None) -> None:
    ROWS.append((figure, value, target, "-" if ok is None else ("ok" if ok else "MISSED")))
    print(f"[figure] {figure}: {value} (target {target})", flush=True)


def pytest(
    name: str,
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path = SUITE,
    timeout: float = 150,
    keep: bool = False,
) -> tuple[int, str, float]:
    """One pytest session; its output goes to <name>.log, under $OUT when ``keep`` (the device tool
    brings back a few files only), else in a scratch folder. Returns (exit code, output,
    seconds)."""
    command = [sys.executable, "-m", "pytest", *args]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = 124, f"{exc.stdout or ''}{exc.stderr or ''}\nTIMED OUT after {timeout} s"
    seconds = time.perf_counter() - start
    (OUT if keep else SCRATCH).joinpath(f"{name}.log").write_text(
        f"$ {' '.join(command)}\n{output}"
    )
    tail = output.strip().splitlines()[-1:] or [""]
    print(f"[session] {name}: exit {code} in {seconds:.1f} s: {tail[0][:160]}", flush=True)
    return code, output, seconds


def results(path: Path) -> dict[str, dict[str, Any]]:
    """key -> metrics of a --bench-json file (empty when the session wrote none)."""
    if not path.is_file():
        return {}
    return {entry["key"]: entry["metrics"] for entry in json.loads(path.read_text())["benchmarks"]}


def verdicts_of(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text()).get("verdicts", [])) if path.is_file() else []


def spread(values: list[float]) -> float:
    return max(values) / min(values) - 1 if values and min(values) > 0 else float("nan")


def main() -> int:
    global OUT, SCRATCH
    import torch

    if not torch.cuda.is_available():
        print(
            f"gpu_check: no CUDA device (torch {torch.__version__}): needs a GPU, nothing checked"
        )
        return NO_DEVICE
    OUT = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu-check-"))
    OUT.mkdir(parents=True, exist_ok=True)
    SCRATCH = Path(tempfile.mkdtemp(prefix="gpu-check-scratch-"))
    print(
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}, "
        f"Python {sys.version.split()[0]}",
        flush=True,
    )
    baselines = SCRATCH / "baselines"
    common = [
        "-p",
        "no:randomly",
        "--bench-baselines-dir",
        str(baselines),
        "--bench-min-run-time=0.1",
    ]
    # 1. save; 2. A/A in a second process, and a third process for the device-time spread
    code, _, seconds = pytest(
        "save",
        f"--bench-mode={MODES}",
        "--bench-save=gpu",
        f"--bench-json={OUT / 's1.json'}",
        *common,
        timeout=float(os.environ.get("GPU_CHECK_SAVE_SECONDS", "120")),
    )
    row("save, all modes (9 benchmarks)", f"exit {code}, {seconds:.0f} s", "exit 0", code == 0)
    code, _, _ = pytest(
        "aa",
        f"--bench-mode={MODES}",
        "--bench-compare=gpu",
        f"--bench-json={OUT / 's2.json'}",
        *common,
        timeout=float(os.environ.get("GPU_CHECK_AA_SECONDS", "90")),
    )
    failed = [v for v in verdicts_of(OUT / "s2.json") if v.get("failed")]
    unjudged = [
        f"{v['key'].split('::')[-1]} {v['metric']}: {v.get('summary', '')}"
        for v in verdicts_of(OUT / "s2.json")
        if v.get("status") == "not comparable"
    ]
    row(
        "A/A, all modes: not judged (GPU clocks apart, or else)",
        f"{len(unjudged)}: {unjudged}",
        "(reported)",
        None,
    )
    counting = [
        f"{v['key'].split('::')[-1]} {v['metric']}" for v in failed if v.get("metric") != "time"
    ]
    compared = len(verdicts_of(OUT / "s2.json"))
    row(
        "A/A, all modes: failed verdicts",
        f"{len(failed)} of {compared} ({len(counting)} outside wall time: {counting})",
        "0 outside wall time",
        compared > 0 and not counting,
    )
    processes = 3 if os.environ.get("GPU_CHECK_THIRD", "1") != "0" else 2
    if processes == 3:
        code, _, _ = pytest(
            "third",
            "--bench-mode=time,gpu_time",
            f"--bench-json={OUT / 's3.json'}",
            *common,
            timeout=60,
        )
        row("third process (time, gpu_time)", f"exit {code}", "exit 0", code == 0)
    runs = [results(OUT / f"s{i}.json") for i in range(1, processes + 1)]
    worst_device = worst_wall = 0.0
    measured = 0
    for key in sorted(runs[0]):
        gpu = [r[key]["gpu_time"] for r in runs if key in r and "gpu_time" in r[key]]
        wall = [r[key]["time"]["median"] for r in runs if key in r and "time" in r[key]]
        name = key.split("::")[-1]
        if len(wall) == processes:
            worst_wall = max(worst_wall, spread(wall))
        if len(gpu) != processes:
            row(
                f"device time {name}",
                f"measured in {len(gpu)} of {processes} processes",
                "all",
                False,
            )
            continue
        fastest = [g["device_seconds"] for g in gpu]
        median = [g["device_median"] for g in gpu]
        host = [g["host_seconds"] for g in gpu]
        clocks = "/".join(f"{g['sm_clock_mhz']:.0f}" if g.get("sm_clock_mhz") else "?" for g in gpu)
        if min(fastest) == 0:
            # Only the allocation has no device work; anything else reading 0 lost its activities.
            row(
                f"device time {name}",
                "no device work",
                "0 for the allocation only",
                max(fastest) == 0 and "alloc" in name,
            )
            continue
        measured += 1
        worst_device = max(worst_device, spread(fastest))
        row(
            f"device time {name}",
            f"{fastest[0] * 1e6:.2f} us, spread {spread(fastest) * 100:.2f}% (median spread "
            f"{spread(median) * 100:.2f}%; "
            f"wall {wall[0] * 1e6 if wall else float('nan'):.2f} us, spread "
            f"{spread(wall) * 100:.1f}%; host {min(host) * 1e6:.1f} us per call; "
            f"SM clock {clocks} MHz)",
            "spread <= 1%",
            spread(fastest) <= 0.01,
        )
    row(
        f"device time, worst spread over {processes} processes",
        f"{worst_device * 100:.2f}% ({measured} benchmarks)",
        "<= 1%",
        measured > 0 and worst_device <= 0.01,
    )
    row(
        f"wall time, worst spread over {processes} processes",
        f"{worst_wall * 100:.1f}%",
        "(for comparison)",
        None,
    )
    kernels = [
        {k: m["kernels"]["kernels"] for k, m in r.items() if "kernels" in m} for r in runs[:2]
    ]
    same = len(kernels[0]) == len(runs[0]) > 0 and kernels[0] == kernels[1]
    row("kernel counts identical across processes", str(same), "True", same)

    # 3. one injected regression per metric
    code, _, _ = pytest(
        "inject",
        f"--bench-mode={MODES}",
        "--bench-compare=gpu",
        f"--bench-json={OUT / 's4.json'}",
        *common,
        env={"TORCHBENCH_GPU_INJECT": "1"},
        timeout=float(os.environ.get("GPU_CHECK_INJECT_SECONDS", "120")),
        keep=True,
    )
    expected = {
        "gpu_time (matmul twice)": ("test_matmul_bf16", "gpu_time"),
        "time (matmul twice)": ("test_matmul_bf16", "time"),
        "kernels (extra mul)": ("test_add_small", "kernels"),
        "ops (extra mul)": ("test_add_small", "ops"),
        "memory (allocation doubled)": ("test_alloc_64mib", "memory"),
        "compile (graph break)": ("test_compiled", "compile"),
    }
    verdicts = verdicts_of(OUT / "s4.json")
    for label, (test, metric) in expected.items():
        hit = [
            v
            for v in verdicts
            if v.get("key", "").endswith(test) and v.get("metric") == metric and v.get("failed")
        ]
        row(
            f"injected {label}",
            hit[0].get("summary", "failed") if hit else "not failed",
            "fails",
            bool(hit),
        )
    named = [
        d
        for v in verdicts
        if v.get("metric") == "kernels"
        for d in v.get("details", [])
        if "launched by" in d
    ]
    row(
        "injected kernel named with op and line",
        named[0][:150] if named else "no line",
        "launched by ... at test_gpu.py:N",
        bool(named) and "test_gpu.py:" in named[0],
    )
    bystanders = [
        v
        for v in verdicts
        if v.get("failed") and not any(v.get("key", "").endswith(t) for t, _ in expected.values())
    ]
    row(
        "injected: failures elsewhere (counting modes)",
        str(len([v for v in bystanders if v.get("metric") != "time"])),
        "0",
        bool(verdicts) and not [v for v in bystanders if v.get("metric") != "time"],
    )

    # 4. the project's tests: the GPU paths first, then the rest of the fast tests (xdist, per-test
    # timeout)
    gpu_tests = [
        "tests/engines/test_kernels_recorded.py",
        "tests/engines/test_profiler.py",
        "tests/engines/test_walltime.py",
        "tests/metrics",
        "tests/e2e/test_ops_memory.py",
    ]
    import importlib.util

    bounded = ["--timeout=100"] if importlib.util.find_spec("pytest_timeout") else []
    parallel = ["-n", "12"] if importlib.util.find_spec("xdist") else []
    code, output, seconds = pytest(
        "tests_gpu",
        "-q",
        "-p",
        "no:cacheprovider",
        *parallel,
        *bounded,
        "--durations=10",
        *gpu_tests,
        cwd=ROOT,
        timeout=float(os.environ.get("GPU_CHECK_TESTS_SECONDS", "200")),
        keep=True,
    )
    row("GPU-path tests", (output.strip().splitlines() or ["?"])[-1][:120], "all pass", code == 0)
    budget = float(os.environ.get("GPU_CHECK_REST_SECONDS", "0"))
    if budget <= 0:
        row(
            "fast tests (-m 'not slow')",
            "not run (GPU_CHECK_REST_SECONDS=0)",
            "set GPU_CHECK_REST_SECONDS to run",
            None,
        )
    else:
        code, output, seconds = pytest(
            "tests_rest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not slow",
            *parallel,
            *bounded,
            "tests",
            cwd=ROOT,
            timeout=budget,
            keep=True,
        )
        row(
            "fast tests (-m 'not slow', -n 12)",
            (output.strip().splitlines() or ["?"])[-1][:120],
            "all pass",
            code == 0,
        )

    print("\n| figure | value | target | |\n| --- | --- | --- | --- |")
    for figure, value, target, ok in ROWS:
        print(f"| {figure} | {value} | {target} | {ok} |")
    return 0 if all(ok != "MISSED" for *_, ok in ROWS) else 1


if __name__ == "__main__":
    sys.exit(main())
