"""Wall time as torch.utils.benchmark times it: blocks, adaptive stopping, a torch Measurement.

Why not call ``Timer.adaptive_autorange`` as is: its block size is chosen so that the timer's
overhead is a tiny share of a block, which for a statement of nanoseconds means long blocks and
only a handful of replicates. The gate compares the fastest block (per call): on a shared machine
other processes preempt the measuring thread and only ever add time, so many short blocks give
many chances of an undisturbed one (the fastest call stays put where the median moves: figures in
docs/design/time-gate.md and docs/design/measurements.md). So this engine keeps adaptive_autorange's
stopping rule (stop once the IQR/median is under ``threshold`` after ``min_run_time``, never past
``max_run_time`` nor past ``max_replicates`` blocks) but calibrates smaller blocks
(``block_time``: on a loaded machine longer blocks spread far more) and asks for at least
``min_replicates`` of them.
The timer's own overhead is a few hundred ns per block, identical in baseline and current runs.
Timer's default timer synchronises CUDA, so GPU work is timed to completion.

Blocks are timed as ``Timer.blocked_autorange`` times them (stdlib ``timeit``'s loop, which
torch's Timer wraps, under ``set_torch_threads``), not with ``Timer.timeit``: that one runs
``max(number // 100, 2)`` untimed calls before every block, so a block of one long call cost three
calls, and the stopping rule is checked at growing intervals, not after every block (it reads
every block so far). On 96 colour conversions of an image library (1 us to 10 ms a call) the two
took 2/3 of a time run's wall time (docs/design/time-gate.md, "At once"). Times saved by
``Timer.timeit``'s blocks are not compared with these (``BLOCKS``, a fact of time's environment):
some large memory-bound calls read apart between the two (docs/design/time-gate.md, "Faster
blocks, kept").

Each block's CPU time (this thread's, ``time.thread_time``) is read beside its wall time, by the
clock handed to the Timer (``_CpuClock``): other processes take wall time from a preempted thread
but not CPU time, so on a busy machine the CPU time of a long call still says how much work it did
while its wall time grows by multiples. The gate uses it when the machine was disturbed
(metrics/time.py).

Before the first measurement, glibc malloc's thresholds are fixed (``steady_allocator``): by
default glibc moves its mmap threshold after each large free and gives the top of the heap back
to the system when it passes a trim threshold, so whether a call's large tensors come from reused
heap memory or from fresh pages (page faults, zeroing: CPU time in the kernel) depends on what the
process allocated before: earlier benchmarks, results and baselines held in memory. The same
call then takes several times longer after other benchmarks than alone, and a compare run, which
holds the baselines too, met the slow state more often than the save run it was compared with
(docs/design/time-gate.md, "The allocator is fixed while measuring").

Huge pages (``prefer_huge_pages``, set by the plugin before any test runs): with 4 KiB pages the
same memory-bound call's fastest time moved from one process to the next (page walks, depending
on where its pages lay), much less with torch's ``THP_MEM_ALLOC_ENABLE``
(docs/design/time-gate.md, "Huge pages for large tensors").

In a pair (a base and a head process measuring a round of ``--bench-rounds`` together,
``engines/duet.py``), a measurement hands the CPU to the other process between blocks, every
10 ms: both sides' blocks then come from the same moments of the same CPU.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.benchmark import Measurement

from . import duet
from .reference import ReferenceProbe

_FN_NAME = "__torchbench_fn"
#: How blocks are timed, saved with the times (``time_blocks``): a baseline timed another way
#: (none saved, from before) is not comparable.
BLOCKS = "blocked_autorange"


@dataclasses.dataclass(frozen=True)
class TimeSpec:
    """How to measure one benchmark; defaults suit a 2-core CI machine and trivial statements."""

    label: str = ""
    sub_label: str = ""
    description: str = ""
    num_threads: int = 1
    threshold: float = 0.1
    min_run_time: float = 0.1
    # adaptive_autorange says 10 s; pytest-benchmark stops at 1 s; the fastest call settles sooner
    max_run_time: float = 0.25
    block_time: float = 0.0001
    min_replicates: int = 30
    timer: Callable[[], float] | None = None  # None: torch's default (syncs CUDA)
    max_replicates: int = 1000  # bounds the time and the baseline's size (raw times are stored)
    #: Blocks taken even past max_run_time (up to 10x it): the fastest of one or two blocks of a
    #: long call on a busy machine says nothing (under CPU hogs a long call got a single block).
    min_blocks: int = 5


class _CpuClock:
    """A Timer clock that also reads this thread's CPU time, just before each wall-clock reading.

    timeit reads the clock once before and once after a block, so the last two CPU readings
    bracket the last block. The CPU reading is a system call inside the wall-timed region: the
    same in baseline and current runs.
    """

    def __init__(self, wall: Callable[[], float]) -> None:
        self.wall = wall
        self.readings: list[float] = []

    def __call__(self) -> float:
        self.readings.append(time.thread_time())
        return self.wall()

    def last_block(self) -> float:
        return self.readings[-1] - self.readings[-2] if len(self.readings) >= 2 else float("nan")


def _block_timer(fn: Callable[[], Any], clock: Callable[[], float]) -> Callable[[int], float]:
    """A block's time: ``number`` calls of ``fn`` in stdlib timeit's loop, read by ``clock``
    (what torch's Timer runs for a block, without the untimed calls its ``timeit`` adds)."""
    inner = timeit.Timer(stmt=f"{_FN_NAME}()", globals={_FN_NAME: fn}, timer=clock)
    return lambda number: max(inner.timeit(number), 1e-9)  # as torch's Timer: never 0


def _task_spec(spec: TimeSpec) -> Any:
    """What torch's Measurement names the measured statement by."""
    from torch.utils.benchmark.utils.common import TaskSpec

    return TaskSpec(
        stmt=f"{_FN_NAME}()",
        setup="pass",
        label=spec.label or None,
        sub_label=spec.sub_label or None,
        description=spec.description or None,
        num_threads=spec.num_threads,
    )


def _calibrate_number(block: Callable[[int], float], block_time: float) -> int:
    """The smallest power-of-two call count whose block lasts at least ``block_time``.

    A block that seems long enough is timed once more (when under 50 ms: a 2 s call is not run
    again) and the shorter of the two counts: one preemption during calibration makes a block
    seem long enough that is not, and every block after it too short. One untimed call first
    (the caller made one): a second call that is still slow (a recompile, a lazy cache) would
    make a microsecond call look long enough alone."""
    block(1)
    number = 1
    while True:
        elapsed = block(number)
        if block_time <= elapsed < 0.05:
            elapsed = min(elapsed, block(number))
        if elapsed >= block_time or number >= 1 << 30:
            return number
        # jump close to the target, then keep doubling: fewer wasted calibration calls
        estimate = int(number * block_time / max(elapsed, 1e-9))
        number = max(number * 2, 1 << max(estimate.bit_length() - 1, 0))


#: glibc mallopt parameters (malloc.h) and the values steady_allocator sets: every allocation
#: comes from the heap (no mmap: glibc's mmap threshold cannot exceed 32 MiB, and a larger
#: temporary was either mapped afresh, with a page fault per page on every call, or taken from a
#: free heap chunk, depending on history, and its CPU time per call with it), and the heap is never
#: trimmed, so a call's memory is reused from call to call whatever ran before. glibc still maps
#: memory when the heap cannot grow.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
_MMAP_THRESHOLD = 32 << 20
_TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: 2 GiB, the most it can say
_allocator_state: str | None = None


def steady_allocator() -> str:
    """Fix glibc malloc's mmap and trim thresholds for this process (once); say what was done.

    Returns "glibc thresholds fixed", or why not ("not glibc", "disabled by
    TORCHBENCH_MALLOC=default"). Setting the thresholds also turns glibc's dynamic adjustment of
    them off. The cost: memory freed by benchmarks stays with the process until it exits.
    """
    global _allocator_state
    if _allocator_state is not None:
        return _allocator_state
    if os.environ.get("TORCHBENCH_MALLOC", "").strip().lower() == "default":
        _allocator_state = "disabled by TORCHBENCH_MALLOC=default"
        return _allocator_state
    _allocator_state = "not glibc"
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None)
            _ = libc.gnu_get_libc_version  # glibc only: musl's mallopt does nothing
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            return _allocator_state
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        if (
            mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1
            and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) == 1
            and mallopt(_M_MMAP_MAX, 0) == 1
        ):
            _allocator_state = "glibc thresholds fixed"
    return _allocator_state


#: torch's own switch (c10's CPU allocator): allocations of 2 MiB or more are page-aligned and
#: advised MADV_HUGEPAGE. torch reads it once, at the process's first CPU allocation of any size
#: (``torch.zeros(1)`` is enough; measured with torch 2.13: set after that, it changes nothing).
HUGE_PAGES_VARIABLE = "THP_MEM_ALLOC_ENABLE"
_THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"
_huge_pages_state: str | None = None


def kernel_huge_pages() -> str:
    """The kernel's transparent-huge-page policy (``always``, ``madvise``, ``never``), or
    ``none``."""
    try:
        with open(_THP_SETTING, encoding="ascii", errors="replace") as setting:
            text = setting.read()
    except OSError:
        return "none"
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else "none"


def prefer_huge_pages() -> str:
    """Have torch back tensors of 2 MiB or more with transparent huge pages; say what was done.

    Why: memory-bound calls on image batches spent their time in page walks, and how much depended
    on where the process's pages happened to lie, which changes from process to process
    (docs/design/time-gate.md, "Huge pages for large tensors"). A gate compares sessions, so that
    between-process spread became false regressions. It must run before the process's first tensor
    of any size (the plugin calls it before the first conftest is imported); it leaves a value the
    user set alone, and ``TORCHBENCH_MALLOC=default`` leaves torch as it is.
    """
    global _huge_pages_state
    if _huge_pages_state is not None:
        return _huge_pages_state
    if os.environ.get("TORCHBENCH_MALLOC", "").strip().lower() == "default":
        _huge_pages_state = "torch default (TORCHBENCH_MALLOC=default)"
    elif HUGE_PAGES_VARIABLE in os.environ:
        _huge_pages_state = (
            f"{HUGE_PAGES_VARIABLE}={os.environ[HUGE_PAGES_VARIABLE]} (set by the user)"
        )
    elif kernel_huge_pages() in ("always", "madvise"):
        # xdist workers started after this inherit it, so they measure the same way
        os.environ[HUGE_PAGES_VARIABLE] = "1"
        _huge_pages_state = "tensors >= 2 MiB"
    else:
        _huge_pages_state = "torch default"
    return _huge_pages_state


def huge_pages_fact() -> str:
    """What decides whether tensors get huge pages: the kernel's policy and torch's switch, and
    whether torch honours the switch (it reads it once: code that allocated before it was set, a
    plugin imported with ``-p`` say, leaves this process without huge pages whatever it says)."""
    policy, value = kernel_huge_pages(), os.environ.get(HUGE_PAGES_VARIABLE, "-")
    fact = f"kernel {policy}; {HUGE_PAGES_VARIABLE}={value}"
    if policy in ("always", "madvise") and value == "1" and not _torch_uses_huge_pages():
        fact += ", not applied (torch had allocated memory before it was set)"
    return fact


def _torch_uses_huge_pages() -> bool:
    """Whether torch's CPU allocator follows its huge-page switch in this process: with it, every
    allocation of 2 MiB or more starts on a page boundary; without it, on a 64-byte one, which is
    a page boundary by chance for at most 1 in 64 allocations (two held at once: 1 in 4096)."""
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    probes = [torch.empty(2 << 20, dtype=torch.uint8) for _ in range(2)]
    return all(probe.data_ptr() % page == 0 for probe in probes)


def load_average() -> float | None:
    """The 1-minute load average (runnable processes), or None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


_LOADAVG = "/proc/loadavg"


class RunnableSampler:
    """The machine's runnable threads (this process's included), read from /proc/loadavg's
    running count at most every ``interval`` seconds; their mean over a measurement.

    Why not the load average: it follows the machine over the last minute, so a benchmark
    measured seconds after other processes started reads the quiet minute before them."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.counts: list[int] = []
        self._last = -float("inf")

    def maybe_sample(self) -> None:
        now = time.perf_counter()
        if now - self._last < self.interval:
            return
        self._last = now
        try:
            with open(_LOADAVG, encoding="ascii") as loadavg:
                running = loadavg.read().split()[3].split("/")[0]
            self.counts.append(int(running))
        except (OSError, IndexError, ValueError):
            return

    def mean(self) -> float | None:
        return sum(self.counts) / len(self.counts) if self.counts else None


def _machine_state(runnable: RunnableSampler) -> dict[str, Any]:
    """The machine's state beside a measurement: the load average, the CPU count, the runnable
    threads during it."""
    return {"load": load_average(), "cpus": os.cpu_count(), "runnable": runnable.mean()}


def measure(fn: Callable[[], Any], spec: TimeSpec | None = None) -> Measurement:
    """Measure ``fn`` (already warmed up by the caller's first call) and return torch's Measurement.

    ``metadata`` carries how undisturbed the measurement was, for the gate to say so: ``cpu_share``
    is this thread's CPU time over the wall time of the whole measurement (1.0: it had a core all
    the time; 0.4: other processes had it 60% of the time; only meaningful for single-threaded
    CPU work, so None otherwise), ``load`` the load average when it ended, ``runnable`` the mean
    count of the machine's runnable threads during it (``RunnableSampler``; None without
    /proc/loadavg) and ``cpus`` the machine's CPU count (per CPU, the machine's state),
    ``cpu_times`` each block's CPU time in seconds (same order as ``raw_times``; None where CPU
    time says nothing) and
    ``reference`` the machine's own speed beside it (engines/reference.py; None with CUDA in use),
    ``turns`` how many times it handed the CPU to the other process of a pair while that one
    measured the same benchmark (engines/duet.py; None outside a pair, and where the measurement
    was not pinned to the pair's CPU: more than one thread, CUDA). The reference's samples and
    the waits for the other process are left out of the wall and CPU times behind ``cpu_share``.
    """
    spec = spec or TimeSpec()
    steady_allocator()
    uses_cuda = _cuda_in_use()  # before the clock runs: torch's own clock would start CUDA itself
    from torch.utils.benchmark.utils.common import set_torch_threads

    clock = _CpuClock(spec.timer or default_clock())
    block = _block_timer(fn, clock)
    probe = _started_probe()
    baton = duet.current
    if baton is not None:  # one of a pair: on the pair's CPU (one thread only), in turns
        baton.measuring(baton.next_key(), pin=spec.num_threads == 1 and not uses_cuda)
    try:
        with set_torch_threads(spec.num_threads):
            return _measure(block, clock, spec, probe, baton, uses_cuda)
    finally:
        if baton is not None and baton.key is not None:  # the call raised: hand over all the same
            baton.finished_measurement()


def _measure(
    block: Callable[[int], float],
    clock: _CpuClock,
    spec: TimeSpec,
    probe: ReferenceProbe | None,
    baton: duet.Baton | None,
    uses_cuda: bool,
) -> Measurement:
    wall_start, cpu_start = time.perf_counter(), time.thread_time()
    number = _calibrate_number(block, spec.block_time)
    probe_wall = probe_cpu = waited = 0.0
    raw_times: list[float] = []
    cpu_times: list[float] = []
    runnable = RunnableSampler()
    total = 0.0
    task_spec = _task_spec(spec)
    next_check = spec.min_replicates  # the stopping rule reads every block: checked ever less often
    while True:
        elapsed = block(number)
        raw_times.append(elapsed)
        cpu_times.append(clock.last_block())
        del clock.readings[:-2]
        total += elapsed
        runnable.maybe_sample()
        if probe is not None:
            before, before_cpu = time.perf_counter(), time.thread_time()
            probe.maybe_sample()
            probe_wall += time.perf_counter() - before
            probe_cpu += time.thread_time() - before_cpu
        if baton is not None:
            waited += baton.boundary()  # the other process of the pair measures its turn
        if len(raw_times) >= spec.max_replicates or total >= 10 * spec.max_run_time:
            break
        if total >= spec.max_run_time and len(raw_times) >= spec.min_blocks:
            break
        if total >= spec.min_run_time and len(raw_times) >= next_check:
            next_check = len(raw_times) + max(1, len(raw_times) // 16)
            candidate = Measurement(number_per_run=number, raw_times=raw_times, task_spec=task_spec)
            if candidate.meets_confidence(threshold=spec.threshold):
                break
    wall = time.perf_counter() - wall_start - probe_wall - waited
    cpu = time.thread_time() - cpu_start - probe_cpu
    if probe is not None:
        probe.sample()
    turns = baton.finished_measurement() if baton is not None else None
    single_threaded_cpu = spec.num_threads == 1 and not uses_cuda
    metadata = {
        "cpu_share": min(1.0, cpu / wall) if single_threaded_cpu and wall > 0 else None,
        **_machine_state(runnable),
        "cpu_times": cpu_times if single_threaded_cpu else None,
        "reference": probe.result() if probe is not None else None,
        "turns": turns,
    }
    return Measurement(
        number_per_run=number, raw_times=list(raw_times), task_spec=task_spec, metadata=metadata
    )


def _started_probe() -> ReferenceProbe | None:
    """The machine's reference workload, sampled once before a measurement; None with CUDA in use
    (the benchmark's time is the GPU's, which a CPU workload says nothing about)."""
    if _cuda_in_use():
        return None
    probe = ReferenceProbe()
    probe.sample()
    return probe


def default_clock() -> Callable[[], float]:
    """The clock of a measurement: torch's (it waits for the accelerator's queued work before
    reading the time), except where CUDA is available but this process never started it: then
    ``timeit.default_timer``.

    Why: on a machine with a GPU, torch's clock calls ``torch.cuda.synchronize()`` on every read,
    which starts CUDA in a process that never used it, so a CPU benchmark paid a device sync per
    block and lost its CPU-time figures (seen on an H200 machine). Other accelerators (MPS, XPU)
    keep torch's clock and its synchronisation."""
    import torch
    from torch.utils.benchmark.utils.timer import timer as torch_timer

    if torch.cuda.is_available() and not torch.cuda.is_initialized():
        import timeit

        return timeit.default_timer
    return torch_timer  # type: ignore[no-any-return]


def _cuda_in_use() -> bool:
    """GPU work waits on the device, off the CPU: CPU share says nothing about disturbance then."""
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


def measure_rounds(
    target: Callable[..., Any],
    make_arguments: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]],
    *,
    rounds: int,
    iterations: int,
    warmup_rounds: int = 0,
    teardown: Callable[..., Any] | None = None,
    spec: TimeSpec | None = None,
) -> Measurement:
    """pytest-benchmark's ``pedantic``: exactly ``rounds`` blocks of ``iterations`` calls.

    The author chose the sampling, so there is no calibration or adaptive stopping; arguments
    come from ``make_arguments`` before every round (the pedantic ``setup``) and ``teardown``
    runs after it, both outside the timed block. As in ``timeit``, the garbage collector is off
    inside a block. One raw time per round, as torch's Measurement holds them.
    """
    import gc

    import torch
    from torch.utils.benchmark.utils.common import TaskSpec

    spec = spec or TimeSpec()
    clock = spec.timer or default_clock()
    task_spec = TaskSpec(
        stmt=getattr(target, "__qualname__", None) or repr(target),
        setup="",
        label=spec.label or None,
        sub_label=spec.sub_label or None,
        description=spec.description or None,
        num_threads=spec.num_threads,
    )
    probe = _started_probe()
    uses_cuda = _cuda_in_use()
    baton = duet.current
    if baton is not None:
        baton.measuring(baton.next_key(), pin=spec.num_threads == 1 and not uses_cuda)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(spec.num_threads)
    raw_times: list[float] = []
    runnable = RunnableSampler()
    try:
        for index in range(warmup_rounds + rounds):
            args, kwargs = make_arguments()
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                start = clock()
                for _ in range(iterations):
                    target(*args, **kwargs)
                elapsed = clock() - start
            finally:
                if gc_was_enabled:
                    gc.enable()
            if teardown is not None:
                teardown(*args, **kwargs)
            if index >= warmup_rounds:
                raw_times.append(elapsed)
            runnable.maybe_sample()
            if probe is not None:
                probe.maybe_sample()
            if baton is not None:
                if uses_cuda:
                    # the teardown's queued work is not the peer's to wait for
                    torch.cuda.synchronize()
                baton.boundary()
    finally:
        torch.set_num_threads(previous_threads)
        turns = baton.finished_measurement() if baton is not None else None
    if probe is not None:
        probe.sample()
    metadata = {
        "reference": probe.result() if probe is not None else None,
        "turns": turns,
        **_machine_state(runnable),
    }
    return Measurement(
        number_per_run=iterations, raw_times=raw_times, task_spec=task_spec, metadata=metadata
    )
