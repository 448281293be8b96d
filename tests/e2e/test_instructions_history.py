"""A benchmark's counts do not depend on what the counted worker did before it (real pytest
sessions, real valgrind workers).

Why it matters: reruns of one command were not bit-identical (1-9 instructions per call in a few of
20 small statements, in most runs). The cause was the worker's heap: which blocks a test's
allocations got depended on everything allocated before, including what execnet's receiver thread
allocated while the worker started (timing), and glibc's ``memcmp`` (shapes in TensorIterator,
strings in dict lookups) takes a longer path when an operand lies near a page's end. Each test now
starts a heap epoch in the deterministic allocator (``WorkerLaunch.isolate``, ``allocator.c``).
Here the worker's history is made very different on purpose: another thread allocating and
freeing while the worker collects, and an earlier test keeping thousands of blocks alive.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind"),
]

CONFTEST = """
import os, threading, time

KEEP = []
_stop = threading.Event()

def _busy():
    # another thread of the worker, allocating at moments that timing decides
    mine = []
    while not _stop.is_set():
        mine.append(bytes(100 + len(mine) % 900))
        KEEP.append(mine[-1])        # freed later by the main thread
        del mine[:-20]
        time.sleep(0.0005)

def pytest_configure(config):
    if hasattr(config, "workerinput") and os.environ.get("HISTORY") == "busy":
        KEEP.extend(bytes(17 + i % 1500) for i in range(20001))
        del KEEP[::2]
        threading.Thread(target=_busy, daemon=True).start()
        time.sleep(0.2)

def pytest_collection_finish(session):
    _stop.set()
"""

MODULE = """
import json, os, torch
import conftest

def test_first(benchmark):
    if os.environ.get("HISTORY") == "busy":
        conftest.KEEP.extend(bytes(13 + i % 700) for i in range(5001))
        # the busy thread's blocks freed here
        conftest.KEEP[:] = conftest.KEEP[len(conftest.KEEP) // 3:]
    x = torch.ones(4, 4)
    benchmark(lambda: x + 1)

def test_probe(benchmark):
    x = torch.ones(4, 4); y = torch.ones(4, 4)
    blocks = [bytes(n) for n in (48, 300, 1200, 5000)]
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump([x._cdata % 4096, y._cdata % 4096] + [id(b) % 4096 for b in blocks], out)
    benchmark(lambda: torch.mm(x, y))
"""


def counted_run(project: Path, report: Path, *args: str, **variables: str) -> dict[str, dict]:
    """One real ``--bench-mode=instructions`` session: each benchmark's key -> its instructions."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **variables}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [
            "timeout",
            "600",
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            "--bench-mode=instructions",
            f"--bench-json={report}",
            *args,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {
        r["key"]: r["metrics"]["instructions"] for r in json.loads(report.read_text())["benchmarks"]
    }


def gaps_alone_vs_after(
    project: Path, tmp: Path, keys: list[str], subset: str, **switch: str
) -> dict[str, float]:
    """Instructions per call between each of ``keys`` counted after the project's other tests and
    alone (``-k subset``), with ``switch`` (a variable the project's conftest reads) in the
    workers."""
    label = "-".join(switch.values())
    after = counted_run(project, tmp / f"all-{label}.json", **switch)
    alone = counted_run(project, tmp / f"alone-{label}.json", "-k", subset, **switch)
    gaps = {}
    for key in keys:
        # heavy: a few counted calls
        assert after[key]["number_per_run"] == alone[key]["number_per_run"] < 100, (
            key,
            after[key],
            alone[key],
        )
        gaps[key] = abs(after[key]["instructions_per_run"] - alone[key]["instructions_per_run"])
    return gaps


def switched_gaps(
    tmp: Path, module: str, source: str, conftest: str, variable: str
) -> dict[str, float]:
    """A project of ``module`` (whose ``test_heavy`` is the benchmark) and a ``conftest`` that
    switches a pin off in the workers when ``variable`` is "off": the gap between ``test_heavy``
    alone and after the module's other tests, with the pin "on" and "off"."""
    project = tmp / "project"
    project.mkdir()
    (project / module).write_text(source)
    (project / "conftest.py").write_text(conftest)
    key = f"{module}::test_heavy"
    return {
        switch: gaps_alone_vs_after(project, tmp, [key], "heavy", **{variable: switch})[key]
        for switch in ("on", "off")
    }


def session(project: Path, tmp: Path, history: str) -> tuple[list[int], dict[str, float]]:
    # The probe test opens this path inside its heap epoch: one length for every history, or the
    # string's size class (which follows the temporary folder's length) moves its blocks (CI's one
    # failure, 2026-11-26: docs/design/counting.md, "What is left").
    tmp.mkdir(exist_ok=True)
    report, probe = tmp / f"report-{history[0]}.json", tmp / f"probe-{history[0]}.json"
    measured = counted_run(project, report, PROBE_OUT=str(probe), HISTORY=history)
    counts = {
        key.rsplit("::", 1)[-1]: value["instructions_per_run"] for key, value in measured.items()
    }
    return json.loads(probe.read_text()), counts


def test_a_tests_heap_and_counts_do_not_depend_on_the_workers_history(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_history.py").write_text(MODULE)
    # Up to four sessions of each history, until a quiet one and a busy one put the probe's blocks
    # at the same offsets and count it the same, to the instruction. Why not one of each: both
    # also move from run to run of one history, timing deciding. Seven sessions of both histories
    # here (2026-11-26) put the probe's tensors at two places 144 bytes apart, four and three of
    # them, in both histories alike; and CI (2026-11-27) counted a quiet and a busy session with
    # equal offsets 9 instructions per call apart, as one of six sessions of one project here had
    # done the day before (docs/design/counting.md, "What is left"). A history that moves the
    # blocks or the count moves them in every session, as the probe paths' lengths did, and
    # fails here.
    sessions: dict[str, list[tuple[list[int], dict[str, float]]]] = {"quiet": [], "busy": []}
    same_place: list[tuple[dict[str, float], dict[str, float]]] = []
    counted_alike = False
    for attempt in range(4):
        for history, seen in sessions.items():
            seen.append(session(project, tmp_path / f"session-{attempt}", history))
        same_place = [
            (q, b)
            for q_offsets, q in sessions["quiet"]
            for b_offsets, b in sessions["busy"]
            if q_offsets == b_offsets
        ]
        counted_alike = any(q["test_probe"] == b["test_probe"] for q, b in same_place)
        if counted_alike or (same_place and sys.version_info >= (3, 12)):
            # on 3.12+ the count's history effect is systematic (the xfail below): no use waiting
            break
    seen_everywhere = {
        history: [(offsets[:3], counts["test_probe"]) for offsets, counts in seen]
        for history, seen in sessions.items()
    }
    # the probe test's tensors and blocks lie at the same page offsets, whatever came before...
    assert same_place, seen_everywhere
    # ...and so its counts are the same, to the instruction
    if sys.version_info >= (3, 12) and not counted_alike:
        # Measured on 3.12.1 (2026-11-26): offsets equal, 10,990.33 against 10,999.33 instructions
        # per call; the cause is not found (docs/python-versions.md). The offsets still hold.
        pytest.xfail(
            f"on Python 3.12+ the probe's count follows the worker's history by a few instructions "
            f"per call: {seen_everywhere}"
        )
    assert counted_alike, seen_everywhere


LINES = 64
# The same lines in each of the three forms below: a plain function, one under torch's decorator, a
# marked test's body (small ints only: no float or int objects allocated, their free lists follow
# history).
STEPPED_LINES = "".join("    n = n % 5 + cfg.step\n" for _ in range(LINES))

# One function, benchmarked by parametrised tests that pass it different types (as a dtype or
# config parametrisation does): in the original code the earlier tests specialise its attribute
# reads for their type; the last test passes another.
SHARED_FUNCTION = (
    """
import pytest, torch


class InDict:
    def __init__(self):
        self.step = 1


class InSlots:
    __slots__ = ("step",)

    def __init__(self):
        self.step = 1


def scaled_sum(x, cfg):
    # small ints only: no float or int objects allocated (their free lists follow history)
    n = 1
"""
    + STEPPED_LINES
    + """    return torch.mul(x, n).sum()


@pytest.mark.parametrize("n", [16, 32, 64])
def test_op(benchmark, n):
    benchmark(scaled_sum, torch.ones(n), InDict())


def test_last(benchmark):
    benchmark(scaled_sum, torch.ones(4_000_000), InSlots())


# The same through torch's decorator: the user's function is in the wrapper's closure.
@torch.no_grad()
def decorated_sum(x, cfg):
    n = 1
"""
    + STEPPED_LINES
    + """    return torch.mul(x, n).sum()


@pytest.mark.parametrize("n", [16, 32, 64])
def test_decorated(benchmark, n):
    benchmark(decorated_sum, torch.ones(n), InDict())


def test_decorated_last(benchmark):
    benchmark(decorated_sum, torch.ones(4_000_000), InSlots())


# The same as a marked test without the fixture: the test's own body is the benchmark.
@pytest.mark.benchmark
@pytest.mark.parametrize("n,cfg", [(16, InDict()), (32, InDict()), (64, InDict()),
                                   (4_000_000, InSlots())], ids=["16", "32", "64", "last"])
def test_marked(n, cfg):
    x = torch.ones(n)
    n = 1
"""
    + STEPPED_LINES
    + """    torch.mul(x, n).sum()
"""
)

# Turns fresh copies off in the worker (the counterfactual: without them, does the test see a gap?).
FRESH_CODE_SWITCH = """
import os

def pytest_configure(config):
    if os.environ.get("FRESH_CODE") == "off":
        from pytest_torchbench.metrics.instructions import Instructions
        Instructions.fresh_code = False
"""


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info < (3, 11),
    reason="the gap it removes comes from CPython's specialising interpreter (3.11+)",
)
def test_a_heavy_benchmark_counts_its_function_as_a_fresh_process_would(tmp_path: Path) -> None:
    """One function benchmarked by four parametrised tests: the last one, a heavy benchmark
    counted after one warm-up call, must count the same alone (``-k``) as after the other three.
    The same holds for the function inside ``@torch.no_grad()`` (the fresh copy is made inside
    the decorator) and for a marked test's own body (no fixture: the test is the benchmark).

    Without fresh copies (``engines/fresh_code.py``), CPython has quickened and specialised
    ``scaled_sum`` for the earlier tests' argument type, and the last test runs it through
    failing specialisations in the full run, freshly specialised alone. First measured on
    ``add``/``mul``/``sum`` of one type: 0.05% fewer instructions in the full run than alone, 0.002%
    with the copy.

    Both sessions also run with the copies switched off in the worker (a conftest): the test
    shows that the gap exists and that the copies remove most of it, and judges what is left
    against that gap, not against a fixed fraction (a fixed 1e-4 failed CI on the helpers test
    below: its noise follows the environment)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_shared.py").write_text(SHARED_FUNCTION)
    (project / "conftest.py").write_text(FRESH_CODE_SWITCH)
    keys = [
        "test_shared.py::test_last",
        "test_shared.py::test_decorated_last",
        "test_shared.py::test_marked[last]",
    ]
    gaps = {
        fresh: gaps_alone_vs_after(project, tmp_path, keys, "last", FRESH_CODE=fresh)
        for fresh in ("on", "off")
    }
    # measured (instructions per call): on 402, off 11,675; with 24 lines on 162, off 4,235. What is
    # left with the copies grows with the lines, is in CPython's eval loop, and is there with the
    # quickening marking switched off too; not explained (at 24 lines, 746 fewer in
    # _PyEval_EvalFrameDefault in the -k run, and 590 of ceval.c's attributed to
    # _PyObject_MakeTpCall)
    # On 3.12+ the copies remove less of the gap: 4,085 left of 10,182 (issue 26, Python 3.12.1;
    # where the rest comes from is not found: docs/python-versions.md). The bound still fails when
    # the copies stop working.
    share = 5 if sys.version_info < (3, 12) else 2
    for key in keys:
        assert gaps["off"][key] > 4000, (
            key,
            gaps,
        )  # 64 attribute reads through failing specialisations
        assert gaps["on"][key] < gaps["off"][key] / share, (key, gaps)


STEPS = 24

# Python helpers shared by every test: the benchmarked function is copied fresh for each test,
# these are not. Straight-line code (a loop would quicken them within one call), many of them so
# that the difference the marking removes stands far above the heap's and type cache's noise.
SHARED_HELPERS = (
    """
import pytest, torch

EPS = 1e-6


class Config:
    def __init__(self):
        self.scale = 1.0 + EPS
        self.offset = EPS


CONFIG = Config()

"""
    + "".join(
        f"""
def step{i}(n, cfg):
    return cfg.scale * n + cfg.offset + EPS
"""
        for i in range(STEPS)
    )
    + """

def pipeline(x):
    n = 1.0
"""
    + "".join(f"    n = step{i}(n, CONFIG)\n" for i in range(STEPS))
    + """    return torch.mul(x, n)


def test_helpers_used_often(benchmark):
    x = torch.ones(64)
    # 3.11 quickens at the 8th call, 3.10 makes its inline cache at the 1024th
    for _ in range(1100):
        pipeline(x)
    benchmark(pipeline, x)


def test_heavy(benchmark):
    benchmark(pipeline, torch.ones(4_000_000))
"""
)

# Turns the marking off in the worker (the counterfactual: without it, does the test see a gap?).
MARKING_SWITCH = """
import os

def pytest_configure(config):
    if os.environ.get("MARKING") == "off":
        from pytest_torchbench.engines.callgrind import quickening
        quickening.quicken_at_next_call = lambda objects=None: 0
        quickening.quicken_new_modules = lambda: 0
"""


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info[:2] not in ((3, 10), (3, 11)),
    reason="the marking works on CPython 3.11's warm-up counter and 3.10's call count",
)
def test_helpers_a_heavy_benchmark_shares_with_earlier_tests_count_as_in_a_fresh_process(
    tmp_path: Path,
) -> None:
    """A heavy benchmark (counted after one call) whose Python helpers an earlier test already
    called 1,100 times counts as it does alone (``-k``).

    Before the counted worker marked every function to be quickened at its next call
    (``engines/callgrind/quickening.py``), the helpers ran specialised after the earlier test and
    as plain bytecode alone: CPython 3.11 quickens a function at its 8th call. Measured on a
    192x192 blur whose ``F.pad`` six other blurs had called: 0.085% apart, 0.023% after. CPython
    3.10 gives code its inline cache for global and attribute loads at the 1024th call instead.

    The same two sessions run with the marking switched off in the worker (a conftest), so the
    test shows both that the gap exists and that the marking removes it; the remaining noise
    (it follows the environment: 0 instructions per call here with 24 helpers; 146 on a CI
    machine with an earlier three-helper version, whose fixed 1e-4 bound it broke) is judged
    against that gap, not against a fixed fraction."""
    gaps = switched_gaps(tmp_path, "test_helpers.py", SHARED_HELPERS, MARKING_SWITCH, "MARKING")
    # measured (instructions per call, two runs): on 0 and 0, off 16,383 and 16,383
    assert gaps["off"] > 2000, gaps  # 24 helpers run as plain bytecode alone, specialised after
    assert gaps["on"] < gaps["off"] / 10, gaps


# Counts the probe (the benchmark's second call) of a one-call plan, as before 2026-11-28.
THIRD_CALL_SWITCH = """
import os

def pytest_configure(config):
    if os.environ.get("THIRD") == "off":
        from pytest_torchbench.engines.callgrind import collect
        planned = collect.plan_calls
        collect.plan_calls = lambda probe: (1, 0) if planned(probe) == (1, 1) else planned(probe)
"""


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info < (3, 12),
    reason=(
        "CPython 3.12+ specialises at an instruction's second execution (3.11 below: the marking)"
    ),
)
def test_a_heavy_benchmarks_counted_call_comes_after_the_specialising_one(tmp_path: Path) -> None:
    """CPython 3.12 and 3.13 specialise an instruction at its second execution. A heavy benchmark
    (one counted call) was counted at its second call, the probe: alone, that call did the
    specialising of the helpers' straight-line code; after a test that had run them, it did not.
    gpytorch's kernel benchmark failed under ``-n 2`` for it (+3.6% on 3.12, +4.0% alone on 3.13:
    docs/design/measurements.md). The counted call is now the third; the same two sessions run
    with the probe counted (a conftest) show the gap this removes."""
    gaps = switched_gaps(tmp_path, "test_helpers.py", SHARED_HELPERS, THIRD_CALL_SWITCH, "THIRD")
    # measured 2026-11-28 (instructions per call): on 0 and off 17,218 on 3.12.1, 0 and 16,834 on
    # 3.13.0
    assert gaps["off"] > 2000, gaps  # the helpers specialised inside the counted call alone
    assert gaps["on"] < gaps["off"] / 10, gaps


# A class whose instances set names their __init__ does not; an earlier test makes many instances
# (3.11-3.13: they take the shared table's free slots) and keeps them alive while one of them
# outgrows the table (3.10: the class stops sharing keys).
SHARED_CLASS = """
import torch


class Record:
    def __init__(self, value):
        self.value = value


def fill(n):
    total = 0
    for i in range(n):
        record = Record(i)
        record.doubled = i * 2
        record.tripled = i * 3
        record.squared = i * i
        record.halved = i // 2
        record.negated = -i
        record.shifted = i << 1
        total += record.doubled + record.tripled + record.squared
    return total


def test_many_records(benchmark):
    records = [Record(i) for i in range(100)]
    for record in records:
        record.doubled = record.tripled = record.squared = 0
        record.halved = record.negated = record.shifted = 0
    benchmark(torch.add, torch.ones(4), len(records))


def test_heavy(benchmark):
    benchmark(fill, 20_000)
"""

KEYS_SWITCH = """
import os

def pytest_configure(config):
    if os.environ.get("KEYS") == "off":
        from pytest_torchbench.engines.callgrind import shared_keys
        shared_keys.track = lambda objects=None: 0
        shared_keys.track_new_modules = lambda: 0
"""


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] <= (3, 13),
    reason="the pin is on for CPython 3.10-3.13",
)
def test_how_many_instances_earlier_tests_made_does_not_move_a_count(tmp_path: Path) -> None:
    """A benchmark whose objects set attributes their ``__init__`` does not counts the same alone
    (``-k``) and after a test that made 100 instances of the same class.

    CPython 3.11-3.13 shares a class's attribute names between its instances in one table whose
    free slots every new instance lowers; once none is free, each new name goes into a dictionary of
    the instance's own. Alone, the benchmark's first record put all seven names in the table; after
    the earlier test only one more fit, and every record of the counted calls made a dictionary:
    tensordict's own benchmarks moved up to 5.2% this way. 3.10 gets there by another rule: the
    class stops sharing keys for good when a record outgrows its table while others are alive,
    as the earlier test's are; alone, the first record grows the table and the class goes on
    sharing. The counted worker puts every class in one state once, when it settles
    (``engines/callgrind/shared_keys.py``). The same two sessions run with that switched off in
    the worker, so the test shows both that the gap exists and that the listing removes it."""
    gaps = switched_gaps(tmp_path, "test_records.py", SHARED_CLASS, KEYS_SWITCH, "KEYS")
    # measured (instructions per call, 2026-11-28): on 0, off 51,847,359 (3.11); on 11, off
    # 7,520,042 (3.10)
    assert gaps["off"] > 100_000, gaps  # a dictionary for each of 20,000 records, or none
    assert gaps["on"] < 1000, gaps
