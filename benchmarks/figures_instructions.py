"""Figures for instructions mode, each printed against its target (one function per figure).

* small: the session cost of 64 small torch statements against one (target <= 2x), wall and CPU.
* heavy: per-benchmark cost of image-library-sized work (targets: 128x128 op <= 2 s, 8x3x256x256
  op and a small conv-net forward <= 30 s, 32x3x512x512 colour conversion <= 60 s), the number of
  counted calls the adaptive rule picked, and a rerun with identical counts and numbers.
* sensitivity: one extra ``.clone()`` after a 4x4 ``mm`` (target: about +90%, as before).
* reruns: save, then a full rerun (target: bit-identical), a -k subset, reversed order and -n 2
  (target: within 0.1%).
* baseline_size: bytes per benchmark in a saved instructions baseline (target: median <= 8 KB),
  and the trade-off of the function cut on the committed full-list baselines.
* xdist: speed-up of -n 2 on the heavy suite, counts identical to the serial run's.
* xdist_large: the same on a suite of 72 with about 3x the work, with xdist's ``--dist load`` and
  ``--dist worksteal`` (not in the default run: about 10 minutes).
* collect_callgrind: the session against torch's own ``Timer.collect_callgrind`` (extrapolated).
* parser: our Callgrind reader against callgrind_annotate on a real dump.
* environment: the user's environment reaches the counted workers, padded to a fixed size: runs with
  an unrelated 1,000-character variable added, and with CI-style variables (CI, GITHUB_SHA,
  GITHUB_RUN_ID, BUILD_NUMBER...) set to two different sets of values, against the saved run and a
  plain rerun (target: within 0.1%).

Timing figures depend on the machine's load: each line says the load average it ran under, and the
CPU time of the pytest process tree (user + system, what the load does not inflate much) is printed
beside wall time. Run: ``python benchmarks/figures_instructions.py [--only small,heavy,...]``
from the repository root (needs valgrind). ``--tiny``: the sensitivity, baseline_size and parser
figures on the fewest benchmarks (2 sessions of 1-2 benchmarks), a check that the script runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SMALL_STATEMENTS = [
    "x + y",
    "x * y",
    "x - y",
    "x / y",
    "x.sum()",
    "x.mean()",
    "torch.mm(x, y)",
    "x @ y",
    "x.t()",
    "x.clone()",
    "x.relu()",
    "torch.exp(x)",
    "x.max()",
    "torch.cat([x, y])",
    "x.view(16)",
    "x.reshape(2, 8)",
    "x[0]",
    "x.abs()",
    "torch.softmax(x, 0)",
    "x.pow(2)",
]

REVERSE_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--reverse-items", action="store_true")

def pytest_collection_modifyitems(config, items):
    if config.getoption("--reverse-items"):
        items.reverse()
"""

HEAVY_MODULE = """
import pytest, torch


def gaussian_blur(img):
    k = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0]) / 16
    kernel = (k[:, None] * k[None, :]).expand(img.shape[1], 1, 5, 5)
    padded = torch.nn.functional.pad(img, (2, 2, 2, 2), mode="reflect")
    return torch.nn.functional.conv2d(padded, kernel, groups=img.shape[1])


def adjust_brightness_contrast(img):
    mean = img.mean(dim=(-3, -2, -1), keepdim=True)
    return ((img * 1.2 - mean) * 0.8 + mean).clamp(0, 1)


def rgb_to_grayscale(img):
    r, g, b = img.unbind(dim=-3)
    return (0.299 * r + 0.587 * g + 0.114 * b).unsqueeze(-3)


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(), torch.nn.Linear(32, 10))

    def forward(self, x):
        return self.body(x)


def test_blur_1x3x128x128(benchmark):
    benchmark(gaussian_blur, torch.rand(1, 3, 128, 128))


def test_brightness_8x3x256x256(benchmark):
    benchmark(adjust_brightness_contrast, torch.rand(8, 3, 256, 256))


def test_convnet_forward_1x3x64x64(benchmark):
    torch.manual_seed(0)
    net = SmallNet().eval()
    with torch.no_grad():
        benchmark(net, torch.rand(1, 3, 64, 64))


def test_grayscale_32x3x512x512(benchmark):
    benchmark(rgb_to_grayscale, torch.rand(32, 3, 512, 512))
"""


def heavy_suite(
    blur_sizes: list[int], batches: list[int], conv_batches: list[int], conv_seeds: int = 1
) -> str:
    """The heavy module's operations over several sizes, as a library's parametrised tests
    (``conv_seeds`` > 1: the conv-net also over that many initialisations, as a config would)."""
    seeds = (
        f'@pytest.mark.parametrize("seed", {list(range(conv_seeds))!r})\n' if conv_seeds > 1 else ""
    )
    seed_arg, seed = (", seed", "seed") if conv_seeds > 1 else ("", "0")
    return (
        HEAVY_MODULE.split("def test_blur_1x3x128x128")[0]
        + f"""

@pytest.mark.parametrize("size", {blur_sizes!r})
def test_blur(benchmark, size):
    benchmark(gaussian_blur, torch.rand(1, 3, size, size))


@pytest.mark.parametrize("batch", {batches!r})
def test_brightness(benchmark, batch):
    benchmark(adjust_brightness_contrast, torch.rand(batch, 3, 256, 256))


{seeds}@pytest.mark.parametrize("batch", {conv_batches!r})
def test_convnet_forward(benchmark, batch{seed_arg}):
    torch.manual_seed({seed})
    net = SmallNet().eval()
    with torch.no_grad():
        benchmark(net, torch.rand(batch, 3, 64, 64))
"""
    )


#: The xdist figure's suite: 24 heavy benchmarks, so that the work, not each worker's fixed cost
#: (valgrind + importing torch), dominates.
HEAVY_SUITE = heavy_suite(list(range(96, 209, 16)), list(range(2, 17, 2)), list(range(1, 9)))
#: xdist_large's: 72, about 3x the work (blurs 96-211 px, brightness on 1-24 images, the conv-net
#: on 1-8 images with 3 initialisations): a library's heavy suite, where each worker's start is a
#: smaller share of the session.
LARGE_HEAVY_SUITE = heavy_suite(
    list(range(96, 212, 5)), list(range(1, 25)), list(range(1, 9)), conv_seeds=3
)

CPU_CONFTEST = """
import os, time, pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    started = time.process_time()
    try:
        return (yield)
    finally:
        with open(os.environ["TORCHBENCH_FIGURES_CPU"], "a") as out:
            out.write(f"{item.name} {time.process_time() - started:.3f}\\n")
"""

HEAVY_TARGETS = {
    "test_blur_1x3x128x128": 2.0,
    "test_brightness_8x3x256x256": 30.0,
    "test_convnet_forward_1x3x64x64": 30.0,
    "test_grayscale_32x3x512x512": 60.0,
}

SENSITIVITY_MODULE = """
import torch

def test_mm(benchmark):
    x = torch.ones(4, 4); y = torch.ones(4, 4)
    benchmark(lambda: torch.mm(x, y))

def test_mm_clone(benchmark):
    x = torch.ones(4, 4); y = torch.ones(4, 4)
    benchmark(lambda: torch.mm(x, y).clone())
"""


def small_module(n: int) -> str:
    lines = ["import pytest, torch", "", ""]
    for i in range(n):
        stmt = SMALL_STATEMENTS[i % len(SMALL_STATEMENTS)]
        lines += [
            f"def test_s{i:02d}(benchmark):",
            "    x = torch.ones(4, 4); y = torch.ones(4, 4)",
            f"    benchmark(lambda: {stmt})",
            "",
            "",
        ]
    return "\n".join(lines)


def load() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Session:
    """One pytest run in --bench-mode=instructions: wall, CPU of the process tree, results."""

    def __init__(
        self,
        cwd: Path,
        *args: str,
        json_name: str = "out.json",
        timeout: float = 1800,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        json_path = cwd.parent / f"{cwd.name}-{json_name}"  # outside the suite's folder
        json_path.unlink(missing_ok=True)
        cpu_path = cwd.parent / f"{cwd.name}-cpu.txt"
        cpu_path.unlink(missing_ok=True)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TORCHBENCH_FIGURES_CPU": str(cpu_path),
            **(extra_env or {}),
        }
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
                f"--bench-json={json_path}",
                *args,
            ],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        self.rc = done.returncode
        self.stdout = done.stdout
        self.load = load()
        if done.returncode not in (0, 1):
            print(done.stdout[-3000:], done.stderr[-2000:])
        self.test_cpu: dict[str, float] = {}  # per test, in the worker (CONFTEST_CPU suites only)
        if cpu_path.exists():
            for line in cpu_path.read_text().splitlines():
                name, seconds = line.split()
                self.test_cpu[name] = float(seconds)
        self.counts: dict[str, float] = {}
        self.numbers: dict[str, int] = {}
        if json_path.exists():
            for r in json.loads(json_path.read_text())["benchmarks"]:
                metric = r["metrics"]["instructions"]
                name = r["key"].split("::")[-1]
                self.counts[name] = metric["instructions_per_run"]
                self.numbers[name] = metric["number_per_run"]

    def durations(self) -> dict[str, float]:
        """Per-test call-phase seconds from ``--durations=0`` (measured in the worker)."""
        found = {}
        for match in re.finditer(r"^\s*([0-9.]+)s call\s+\S+::(\S+)$", self.stdout, re.M):
            found[match.group(2)] = float(match.group(1))
        return found


def _project(work: Path, name: str, module: str, conftest: str = "") -> Path:
    folder = work / name
    folder.mkdir()
    (folder / f"test_{name}.py").write_text(module)
    if conftest:
        (folder / "conftest.py").write_text(conftest)
    return folder


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


# -- the figures -----------------------------------------------------------------------------------


def figure_small(work: Path) -> None:
    print("== small: 64 small torch statements against 1 (target: session <= 2x) ==")
    one = Session(_project(work, "one", small_module(1)))
    many = Session(_project(work, "many", small_module(64)))
    for name, s in (("1 statement", one), ("64 statements", many)):
        print(
            f"  {name:<14} wall {s.wall:6.1f} s, CPU {s.cpu:6.1f} s, exit {s.rc}, "
            f"{len(s.counts)} results ({s.load})"
        )
    print(
        f"  ratio 64/1: wall {many.wall / one.wall:.2f}x, CPU {many.cpu / one.cpu:.2f}x -> "
        f"{met(many.wall / one.wall <= 2.0)} (wall), {met(many.cpu / one.cpu <= 2.0)} (CPU); "
        f"marginal per statement: wall {(many.wall - one.wall) / 63:.2f} s, "
        f"CPU {(many.cpu - one.cpu) / 63:.2f} s"
    )


def figure_heavy(work: Path) -> None:
    print("== heavy: per-benchmark cost and the adaptive number of calls ==")
    folder = _project(work, "heavy", HEAVY_MODULE, CPU_CONFTEST)
    first = Session(folder, "--durations=0", "--durations-min=0", "--bench-save=main")
    durations = first.durations()
    print(
        f"  session wall {first.wall:.1f} s, CPU {first.cpu:.1f} s, exit {first.rc} "
        f"({first.load}); per test: wall of the call phase, and its CPU time in the worker "
        "(what the load inflates less)"
    )
    for name, target in HEAVY_TARGETS.items():
        seconds, cpu = durations.get(name), first.test_cpu.get(name)
        shown = f"wall {seconds:5.1f} s" if seconds is not None else "wall n/a"
        shown += f", CPU {cpu:5.1f} s" if cpu is not None else ""
        print(
            f"  {name:<32} {shown} (target <= {target:g} s: "
            f"wall {met(seconds is not None and seconds <= target)}, "
            f"CPU {met(cpu is not None and cpu <= target)}), number {first.numbers.get(name)}, "
            f"{first.counts.get(name, 0):,.0f} instructions per call"
        )
    again = Session(folder, "--bench-compare=main")
    same = again.counts == first.counts and again.numbers == first.numbers and bool(first.counts)
    print(
        f"  rerun: counts and numbers {'bit-identical' if same else 'DIFFER'} -> {met(same)} "
        f"(exit {again.rc}, {again.load})"
    )
    for name, count in first.counts.items():
        if again.counts.get(name) != count or again.numbers.get(name) != first.numbers[name]:
            print(
                f"    {name}: {count:,.1f} -> {again.counts.get(name, 0):,.1f} per call "
                f"({(again.counts.get(name, 0) / count - 1) * 100:+.4f}%), "
                f"number {first.numbers[name]} -> "
                f"{again.numbers.get(name)}"
            )


def figure_sensitivity(work: Path) -> None:
    print("== sensitivity: one extra .clone() after a 4x4 mm (target: about +90%) ==")
    s = Session(_project(work, "sensitivity", SENSITIVITY_MODULE))
    if "test_mm" in s.counts and "test_mm_clone" in s.counts:
        change = s.counts["test_mm_clone"] / s.counts["test_mm"] - 1
        print(
            f"  mm {s.counts['test_mm']:,.0f}, mm + clone {s.counts['test_mm_clone']:,.0f} "
            f"instructions per call: {change * 100:+.1f}% "
            f"(numbers {s.numbers['test_mm']}, {s.numbers['test_mm_clone']}) "
            f"-> {met(change >= 0.8)}"
        )
    else:
        print(f"  no results (exit {s.rc})")


def figure_reruns(work: Path) -> None:
    print("== reruns: save, then compare (rerun: bit-identical; others: worst |delta| <= 0.1%) ==")
    folder = _project(work, "reruns", small_module(20), REVERSE_CONFTEST)
    saved = Session(folder, "--bench-save=main")
    setups = [
        ("full rerun", (), 0.0),
        ("second rerun", (), 0.0),
        (
            "-k subset (7 of 20)",
            ("-k", " or ".join(f"test_s{i:02d}" for i in (1, 4, 6, 9, 13, 16, 19))),
            0.001,
        ),
        ("reversed order", ("--reverse-items",), 0.001),
        ("-n 2", ("-n", "2"), 0.001),
    ]
    reruns: list[dict[str, float]] = []
    for name, extra, limit in setups:
        s = Session(folder, "--bench-compare=main", *extra)
        if not extra:
            reruns.append(s.counts)
        worst, worst_key, differing = 0.0, "", 0
        for key, count in s.counts.items():
            drift = abs(count / saved.counts[key] - 1.0)
            differing += count != saved.counts[key]
            if drift >= worst:
                worst, worst_key = drift, key
        ok = bool(s.counts) and (differing == 0 if limit == 0 else worst <= limit)
        print(
            f"  {name:<20} {len(s.counts):>2} results, exit {s.rc}, {differing} differ, "
            "worst |delta| "
            f"{worst * 100:.4f}% ({worst_key}) -> {met(ok)} ({s.load})"
        )
    if len(reruns) == 2 and reruns[0]:
        # the save run differs from the compare runs only in controller-only options: a rerun of the
        # very same command shows what is left of run-to-run nondeterminism alone
        differing = sorted(k for k in reruns[0] if reruns[1].get(k) != reruns[0][k])
        print(
            f"  second rerun vs full rerun (one command twice): "
            f"{len(differing)} of {len(reruns[0])} differ "
            f"{differing[:4]} -> {met(not differing)}"
        )


def _entry_sizes(baseline_dir: Path) -> list[int]:
    """Bytes per benchmark: each entry's JSON plus its file's environments shared out."""
    sizes = []
    for path in baseline_dir.rglob("*.json"):
        data = json.loads(path.read_text())
        entries = data.get("benchmarks", {})
        shared = len(json.dumps(data.get("environments", {}), indent=1)) / max(1, len(entries))
        sizes += [int(len(json.dumps(entry, indent=1)) + shared) for entry in entries.values()]
    return sizes


def figure_baseline_size(work: Path) -> None:
    print("== baseline size: bytes per benchmark, median (target <= 8 KB) ==")
    from pytest_torchbench import InstructionsMetric

    module = small_module(20) + HEAVY_MODULE.replace("import pytest, torch", "")
    folder = _project(work, "size", small_module(1) if TINY else module)
    s = Session(folder, "--bench-save=main", "-k", "not grayscale")
    sizes = _entry_sizes(folder / "baselines" / "main")
    if sizes:
        print(
            f"  saved now: {len(sizes)} benchmarks, "
            f"median {statistics.median(sizes) / 1024:.1f} KB, "
            f"max {max(sizes) / 1024:.1f} KB -> {met(statistics.median(sizes) <= 8192)} "
            f"(exit {s.rc})"
        )
    committed = ROOT / "baselines" / "main"
    entries = []
    for path in committed.rglob("*.json"):
        for entry in json.loads(path.read_text())["benchmarks"].values():
            metric = entry["metrics"].get("instructions")
            if metric:
                entries.append(metric)
    if not entries:
        return
    print(
        f"  trade-off on the committed example baselines ({len(entries)} benchmarks, "
        "full function lists "
        f"at 99% coverage): share of the instructions named, and bytes of the functions map"
    )
    for cap in (10, 20, 40, 64, 80, 10_000):
        named, sizes_cap = [], []
        for metric in entries:
            functions = metric["functions"]
            total = metric["instructions_per_run"]
            raw = {
                name: int(round(count * metric["number_per_run"]))
                for name, count in functions.items()
            }
            old_cap = InstructionsMetric.MAX_FUNCTIONS
            InstructionsMetric.MAX_FUNCTIONS = cap
            try:
                cut = InstructionsMetric.from_counts(
                    raw, int(round(total * metric["number_per_run"])), metric["number_per_run"]
                ).functions
            finally:
                InstructionsMetric.MAX_FUNCTIONS = old_cap
            named.append(1 - cut.get(InstructionsMetric.OTHER, 0.0) / total)
            sizes_cap.append(len(json.dumps(cut, indent=1)))
        label = f"at most {cap}" if cap < 10_000 else "no cap"
        print(
            f"    {label:<12} functions: median {statistics.median(sizes_cap) / 1024:5.1f} KB, "
            f"named share median {statistics.median(named) * 100:.1f}%, min {min(named) * 100:.1f}%"
        )


def figure_xdist(
    work: Path, name: str = "xdist", suite: str = HEAVY_SUITE, dists: tuple[str, ...] = ("load",)
) -> None:
    print(f"== {name}: -n 2 on a heavy suite (speed-up, counts identical to serial) ==")
    folder = _project(work, name, suite)
    serial = Session(folder, json_name="serial.json")
    # The fixed cost: a session of one benchmark, after the serial run (the first session of a new
    # virtualenv reads torch's libraries from disk: 30 s instead of 20 s here).
    one = Session(folder, "-k", "test_blur and 96", json_name="one.json")
    fixed, work_s = one.wall, max(serial.wall - one.wall, 0.0)
    ideal = (fixed + work_s) / (fixed + work_s / 2) if fixed + work_s > 0 else 0.0
    for dist in dists:
        parallel = Session(folder, "-n", "2", f"--dist={dist}", json_name=f"parallel-{dist}.json")
        same = serial.counts == parallel.counts and bool(serial.counts)
        # The benchmarks' own work, beyond each worker's start (paid once per worker, in parallel):
        # the throughput a suite large enough to hide that start gets.
        throughput = work_s / max(parallel.wall - fixed, 1e-9)
        differing = sum(parallel.counts.get(k) != v for k, v in serial.counts.items())
        drifts = sorted(
            (abs(parallel.counts[k] / v - 1.0), k)
            for k, v in serial.counts.items()
            if k in parallel.counts
        )
        worst, worst_key = drifts[-1] if drifts else (0.0, "")
        outcome = (
            "identical"
            if same
            else f"DIFFER in {differing}, worst |delta| {worst * 100:.4f}% ({worst_key})"
        )
        print(
            f"  {len(serial.counts)} benchmarks; serial {serial.wall:.1f} s ({serial.load}), "
            f"-n 2 --dist {dist} {parallel.wall:.1f} s ({parallel.load}): "
            f"speed-up {serial.wall / parallel.wall:.2f}x on 2 cores (a "
            f"session of one benchmark {fixed:.1f} s: with that fixed cost per worker "
            f"the most -n 2 can give is "
            f"{ideal:.2f}x; the work beyond it ran {throughput:.2f}x as fast); counts "
            f"{outcome} "
            f"-> {met(same)}"
        )


def figure_xdist_large(work: Path) -> None:
    figure_xdist(work, "xdist_large", LARGE_HEAVY_SUITE, dists=("load", "worksteal"))


def figure_collect_callgrind(work: Path, k: int = 2) -> None:
    print(
        "== collect_callgrind: 20 small statements in one session "
        "vs torch's Timer.collect_callgrind =="
    )
    from torch.utils.benchmark import Timer

    s = Session(_project(work, "twenty", small_module(20)))
    seconds = []
    for stmt in SMALL_STATEMENTS[:k]:
        started = time.perf_counter()
        Timer(
            stmt, setup="import torch; x = torch.ones(4, 4); y = torch.ones(4, 4)"
        ).collect_callgrind(number=100)
        seconds.append(time.perf_counter() - started)
    twenty = statistics.mean(seconds) * 20
    print(
        f"  session {s.wall:.1f} s; 20 collect_callgrind calls {twenty:.0f} s "
        f"(extrapolated from {k}); "
        f"ratio 1/{twenty / s.wall:.0f} -> {met(s.wall <= twenty / 20)} ({load()})"
    )


def figure_parser(work: Path) -> None:
    print("== parser: ours against callgrind_annotate on a real dump ==")
    from pytest_torchbench.engines import callgrind as cg

    dump = work / "callgrind.out.real"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={dump}",
            sys.executable,
            "-c",
            "import json, re; json.dumps({'a': [1, 2, 3]}); re.compile('a+b')",
        ],
        check=True,
        capture_output=True,
    )
    started = time.perf_counter()
    theirs = cg.annotate_counts(dump)
    annotate_s = time.perf_counter() - started
    started = time.perf_counter()
    ours = {
        row.function: row.count
        for row in cg.function_counts(cg.parse_callgrind_file(dump), inclusive=False)
    }
    ours_s = time.perf_counter() - started
    differing = sorted(f for f in set(ours) | set(theirs) if ours.get(f) != theirs.get(f))
    print(
        f"  dump {dump.stat().st_size / 1024:.0f} KB, {len(theirs)} functions: "
        f"{'identical' if not differing else f'DIFFER in {len(differing)}'}; "
        f"ours {ours_s * 1000:.0f} ms, "
        f"callgrind_annotate {annotate_s * 1000:.0f} ms"
    )


CI_VARIABLES = [
    {
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567",
        "GITHUB_RUN_ID": "7301234567",
        "GITHUB_RUN_NUMBER": "41",
        "GITHUB_REF": "refs/pull/12/merge",
        "BUILD_NUMBER": "1041",
        "RUNNER_NAME": "runner-a",
    },
    {
        "CI": "1",
        "GITHUB_ACTIONS": "true",
        "GITHUB_SHA": "fedcba9876543210fedcba9876543210fedcba98",
        "GITHUB_RUN_ID": "7309999999999",
        "GITHUB_RUN_NUMBER": "1342",
        "GITHUB_REF": "refs/pull/1234/merge",
        "BUILD_NUMBER": "7",
        "RUNNER_NAME": "a-much-longer-runner-name-07",
    },
]


def figure_environment(work: Path) -> None:
    print(
        "== environment: unrelated and CI variables "
        "(worst |delta| vs the saved run; target <= 0.1%) =="
    )
    folder = _project(work, "environment", small_module(20))
    saved = Session(folder, "--bench-save=main")
    setups = [
        ("plain rerun", {}),
        ("+ 1,000-char variable", {"TORCHBENCH_FIGURE_UNRELATED": "u" * 1000}),
        ("CI variables, run A", CI_VARIABLES[0]),
        ("CI variables, run B", CI_VARIABLES[1]),
    ]
    rerun: dict[str, float] = {}
    for name, extra in setups:
        s = Session(folder, "--bench-compare=main", extra_env=extra)
        if not s.counts:
            print(f"  {name:<24} no results (exit {s.rc})")
            continue
        if not extra:
            rerun = s.counts
        worst, worst_key = max((abs(c / saved.counts[k] - 1.0), k) for k, c in s.counts.items())
        versus_rerun = max(
            (abs(c / rerun[k] - 1.0) for k, c in s.counts.items() if k in rerun),
            default=float("nan"),
        )
        print(
            f"  {name:<24} {len(s.counts):>2} results, exit {s.rc}, "
            f"worst |delta| vs saved {worst * 100:.4f}% "
            f"({worst_key}), vs the plain rerun {versus_rerun * 100:.4f}% "
            f"-> {met(worst <= 0.001)} ({s.load})"
        )


FIGURES: dict[str, Callable[[Path], None]] = {
    "small": figure_small,
    "heavy": figure_heavy,
    "sensitivity": figure_sensitivity,
    "reruns": figure_reruns,
    "baseline_size": figure_baseline_size,
    "xdist": figure_xdist,
    "xdist_large": figure_xdist_large,
    "collect_callgrind": figure_collect_callgrind,
    "parser": figure_parser,
    "environment": figure_environment,
}

#: Figures left out of the default run for their length.
OPT_IN = ("xdist_large",)
#: ``--tiny``'s figures: the package's calls beyond the Session class (InstructionsMetric, the
#: Callgrind reader), each on the fewest benchmarks.
TINY_FIGURES = ("sensitivity", "baseline_size", "parser")
TINY = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = [name for name in FIGURES if name not in OPT_IN]
    parser.add_argument(
        "--only",
        default=",".join(default),
        help=f"comma-separated figures to print (default: {', '.join(default)}; "
        f"also: {', '.join(OPT_IN)})",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=f"only {', '.join(TINY_FIGURES)}, on the fewest benchmarks: a check that it runs",
    )
    args = parser.parse_args()
    if args.tiny:
        global TINY
        TINY = True
        args.only = ",".join(TINY_FIGURES)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(FIGURES)}")
    work = Path(tempfile.mkdtemp(prefix="torchbench-figures-"))
    try:
        for name in chosen:
            FIGURES[name](work)
            print()
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the figures' projects, baselines and JSON


if __name__ == "__main__":
    main()
