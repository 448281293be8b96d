"""What one call does on the GPU: the kernels it launches (by name) and the device time they take.

How a GPU activity is tied to an iteration: a kernel runs on the GPU's clock, after (often long
after) the CPU op that launched it, so its time says nothing about which call made it. The profiler
links them instead: every device activity (kernel, memcpy, memset) carries a
``linked_correlation_id`` equal to the ``correlation_id`` of the CPU op (``aten::...``) that
launched it, the same link torch's own ``key_averages`` uses to put kernel times under ops. The CPU
op lies inside an iteration marker (see ``iterations``), so the activity counts for that iteration.

Only the CPU side of the markers delimits iterations. With CUDA activity recorded, the profiler
records every ``record_function`` range twice: the CPU event, and a CUDA-side "user annotation" with
the same name and correlation id on the GPU's clock (it spans the range's device work). Taking both
as windows gave twice as many windows as iterations, overlapping on different clocks.

Device time per call is the time the device was busy with the call's activities: the union of
their ``[start, end]`` intervals, so kernels that overlap on several streams are not counted twice.
Unlike wall time it excludes the host's launch overhead and the gaps between kernels, which move
with the CPU and the driver from process to process; the kernels' own durations do not.

The rule is pure (:func:`per_iteration`, on :class:`Activity` records), so it is tested on the
recorded events of a real CUDA run without a GPU.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import torch
from torch.profiler import ProfilerActivity

from ...common.compat import kineto_events, sm_clock_reader
from .iterations import ITERATION_MARKER, CallHooks, Windows, record, representative, sync_cuda
from .options import ProfilerOptions

__all__ = [
    "Activity",
    "DeviceProfile",
    "NoCudaError",
    "busy_ns",
    "count_kernels",
    "kernel_launchers",
    "kernels_per_iteration",
    "measure_device",
    "per_iteration",
]

#: The device types whose events are GPU activities (the GPU side of the trace).
_DEVICE_TYPES = ("CUDA",)


class NoCudaError(RuntimeError):
    """Kernel counts or device time were asked for in a process without a usable CUDA device."""


class Activity(NamedTuple):
    """One profiler event, as the attribution rule needs it (from Kineto, or from a recording)."""

    name: str
    on_device: bool
    start_ns: int
    end_ns: int
    correlation_id: int
    linked_correlation_id: int

    @classmethod
    def of_kineto(cls, ev: Any) -> Activity:
        return cls(
            str(ev.name()),
            _device_name(ev.device_type()) in _DEVICE_TYPES,
            int(ev.start_ns()),
            int(ev.end_ns()),
            int(ev.correlation_id()),
            int(ev.linked_correlation_id()),
        )


def _device_name(device_type: Any) -> str:
    return str(device_type).rsplit(".", 1)[-1]


@dataclasses.dataclass
class Iteration:
    """One call's share of a profile: its host span and the device activities it launched."""

    host_ns: int
    activities: list[Activity]
    #: The name of the CPU op that launched each activity (same order), for explanations.
    launchers: list[str]


#: CUDA runtime and driver calls (``cudaLaunchKernel``, ``cuLaunchKernel``, ``cudaGraphLaunch``,
#: ``cudaMemcpyAsync``, ``cudaDeviceSynchronize``): CPU events whose correlation id is CUPTI's.
_RUNTIME_CALL = re.compile(r"^cu(?:da)?[A-Z]")


def per_iteration(events: Sequence[Activity], marker: str = ITERATION_MARKER) -> list[Iteration]:
    """Split a profile's events into iterations: the CPU-side ``marker`` ranges delimit them, and a
    device activity belongs to the iteration in which the runtime call that launched it started
    (``cudaLaunchKernel``, ``cudaGraphLaunch``...: a CPU event with the activity's own correlation
    id, CUPTI's). That covers kernels launched outside any op too (a CUDA graph's replay, a raw
    launch from an extension), which carry no link to an op. The op that launched an activity
    (its ``linked_correlation_id``) is kept for explanations; CUPTI's ids and the ops' ids are
    different counters, so they are kept in different maps. Activities launched outside every range
    (the profiler's own work, a flush between calls) belong to none."""
    windows = Windows(
        (ev.start_ns, ev.end_ns) for ev in events if ev.name == marker and not ev.on_device
    )
    runtime_window: dict[int, int] = {}
    runtime_name: dict[int, str] = {}
    op_name: dict[int, str] = {}
    for ev in events:
        if ev.on_device or ev.name == marker:
            continue
        if ev.linked_correlation_id != 0 or _RUNTIME_CALL.match(ev.name):
            i = windows.index(ev.start_ns)
            if i is not None and ev.correlation_id > 0:
                runtime_window[ev.correlation_id] = i
                runtime_name[ev.correlation_id] = ev.name
        elif ev.correlation_id > 0 and (
            ev.name.startswith("aten::") or ev.correlation_id not in op_name
        ):
            op_name[ev.correlation_id] = ev.name
    iterations = [Iteration(int(end - start), [], []) for start, end in windows.spans]
    for ev in events:
        if not ev.on_device or ev.name == marker:
            continue  # the device-side copy of a marker is no activity
        i = runtime_window.get(ev.correlation_id)
        if i is not None:
            iterations[i].activities.append(ev)
            launcher = op_name.get(ev.linked_correlation_id) if ev.linked_correlation_id else None
            iterations[i].launchers.append(launcher or runtime_name.get(ev.correlation_id, "?"))
    return iterations


def busy_ns(activities: Iterable[Activity]) -> int:
    """Nanoseconds the device was busy with ``activities``: the length of the union of their
    spans."""
    total = 0
    current_start = current_end = None
    for start, end in sorted((a.start_ns, a.end_ns) for a in activities):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def kernels_per_iteration(iterations: Sequence[Iteration]) -> list[collections.Counter[str]]:
    """Per iteration, the device activities it launched, by name."""
    return [collections.Counter(a.name for a in it.activities) for it in iterations]


@dataclasses.dataclass
class DeviceProfile:
    """What the device did in each profiled call of a callable."""

    iterations: list[Iteration]

    def kernel_counts(self) -> dict[str, float]:
        """Activities of one call, by name: the counts most calls agree on (integers)."""
        chosen = representative(kernels_per_iteration(self.iterations))
        return {key: float(chosen[key]) for key in sorted(chosen)}

    def device_ns(self) -> list[int]:
        return [busy_ns(it.activities) for it in self.iterations]

    def host_ns(self) -> list[int]:
        return [it.host_ns for it in self.iterations]


class _L2Flush:
    """Overwrites a buffer twice the size of the device's L2 cache, as triton's ``do_bench`` does,
    so each call starts with a cold cache: a benchmark whose inputs fit in L2 otherwise measures
    the cache, not the memory system it meets in a real model."""

    def __init__(self) -> None:
        device = torch.cuda.current_device()
        size = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
        self.buffer = torch.empty(
            max(2 * size, 64 * 1024 * 1024), dtype=torch.int8, device=f"cuda:{device}"
        )

    def __call__(self) -> None:
        self.buffer.zero_()


def _require_cuda() -> None:
    if not torch.cuda.is_available():
        raise NoCudaError("no CUDA device: torch.cuda.is_available() is False in this process")


def measure_device(
    fn: Callable[[], object],
    *,
    iterations: int = 3,
    warmup: int = 1,
    before_region: Callable[[], object] | None = None,
    before_each: Callable[[], object] | None = None,
    flush_l2: bool = False,
    after_calls: Callable[[], object] | None = None,
) -> DeviceProfile:
    """Warm ``fn`` up, then profile ``iterations`` calls with CPU and CUDA activities, each call in
    its marker (with ``flush_l2``, the L2 cache is overwritten before each call, outside the marker,
    so the flush's kernel belongs to no call; ``before_each``, pedantic's setup, runs before every
    call, warm-up and profiled, outside the markers too; ``after_calls`` once the last call's work
    is done, before the profiler stops). Raises :class:`NoCudaError` without a CUDA device."""
    _require_cuda()
    flush = _L2Flush() if flush_l2 else None
    each: Callable[[], object] | None = before_each
    if flush is not None:
        each = flush if before_each is None else (lambda: (before_each(), flush()))
    prof = record(
        fn,
        iterations=iterations,
        warmup=warmup,
        what="measuring device activity",
        options=ProfilerOptions(activities=(ProfilerActivity.CPU, ProfilerActivity.CUDA)),
        hooks=CallHooks(before_region=before_region, before_each=each, after_calls=after_calls),
    )
    raw = kineto_events(prof)
    if raw is None:  # pragma: no cover - depends on torch internals
        raise RuntimeError("this torch version does not expose the profiler's raw events")
    found = per_iteration([Activity.of_kineto(ev) for ev in raw])
    if len(found) != iterations:  # pragma: no cover - would mean the profiler lost our markers
        raise RuntimeError(
            f"profiler recorded {len(found)} iteration markers for {iterations} iterations"
        )
    return DeviceProfile(found)


def count_kernels(
    fn: Callable[[], object],
    *,
    iterations: int = 3,
    warmup: int = 1,
    before_region: Callable[[], object] | None = None,
    before_each: Callable[[], object] | None = None,
) -> dict[str, float]:
    """GPU activities (kernels, memcpy, memset) one call of ``fn`` launches, by name.

    ``fn`` is warmed up (cuDNN/cuBLAS choose their algorithms in the first calls), then called
    ``iterations`` times under the profiler. Raises :class:`NoCudaError` without a CUDA device."""
    return measure_device(
        fn,
        iterations=iterations,
        warmup=warmup,
        before_region=before_region,
        before_each=before_each,
    ).kernel_counts()


def kernel_launchers(
    fn: Callable[[], object],
    *,
    before_region: Callable[[], object] | None = None,
) -> dict[str, list[str]]:
    """For each activity one call of ``fn`` launches, the ops that launched it (most frequent
    first): the link from a changed kernel to the op, and from there to the user's line (op call
    sites)."""
    profile = measure_device(fn, iterations=1, warmup=1, before_region=before_region)
    by_kernel: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for it in profile.iterations:
        for activity, op in zip(it.activities, it.launchers):
            by_kernel[activity.name][op] += 1
    return {kernel: [op for op, _ in ops.most_common()] for kernel, ops in by_kernel.items()}


def sm_clock_mhz() -> int | None:
    """The current CUDA device's SM clock in MHz as NVML reports it, or None where it cannot be
    read (no ``pynvml``, from the nvidia-ml-py package; no NVML; not an NVIDIA device)."""
    if getattr(torch.version, "hip", None) or not torch.cuda.is_available():
        return None
    reader = _clock_reader(torch.cuda.current_device())
    if reader is None:
        return None
    try:
        value = reader()
    except Exception:  # noqa: BLE001 - a failing NVML read only means no clock figure
        return None
    return value if value > 0 else None


_CLOCK_READERS: dict[int, Callable[[], int]] = {}


def _clock_reader(device: int) -> Callable[[], int] | None:
    """The device's clock reader, kept once found (a missing one is looked for again: NVML can
    fail for a moment)."""
    if device not in _CLOCK_READERS:
        found = sm_clock_reader(device)
        if found is None:
            return None
        _CLOCK_READERS[device] = found
    return _CLOCK_READERS[device]


#: Settling: the clock counts as settled once every reading of the last SETTLED_WINDOW seconds lies
#: within SETTLED_SPREAD of the others; sustained work stops there or at the caller's ``most``.
SETTLED_WINDOW = 0.6
SETTLED_SPREAD = 0.02


def settle(
    fn: Callable[[], object],
    least: float,
    most: float,
    *,
    clock: Callable[[], int | None] = sm_clock_mhz,
    sync: Callable[[], None] = sync_cuda,
    now: Callable[[], float] = time.perf_counter,
) -> int | None:
    """Call ``fn`` back to back (waiting for the device every few calls, so the launch queue stays
    short) for at least ``least`` seconds, then, where the SM clock can be read, until it has
    settled or ``most`` seconds have passed. Returns the last clock reading (None where none could
    be read).

    Why: a compute-bound kernel runs at whatever clock the GPU holds, and the clock follows the
    load: the maximum after idling, then down to where the power limit holds it under sustained
    work, over seconds. Profiling partway down gives each process its own time for the same
    kernel; profiling once the clock has stopped moving gives the time that sustained work gets,
    run after run (an H200's figures: docs/design/gpu.md). Light work never moves the clock: it
    settles in SETTLED_WINDOW."""
    sync()
    start = last_sync = now()
    readings: list[tuple[float, int]] = []
    reading = clock()
    calls = 0
    while True:
        fn()
        calls += 1
        if calls % 16 and now() - last_sync < 0.02:
            continue
        sync()
        last_sync = now()
        elapsed = last_sync - start
        if elapsed < least:
            continue
        if reading is None or elapsed >= most:
            break
        reading = clock()
        if reading is None:
            break
        readings.append((elapsed, reading))
        recent = [mhz for at, mhz in readings if at >= elapsed - SETTLED_WINDOW]
        if readings[0][0] <= elapsed - SETTLED_WINDOW and max(recent) <= min(recent) * (
            1 + SETTLED_SPREAD
        ):
            break
    sync()
    return reading


def seconds_per_call(fn: Callable[[], object]) -> float:
    """Wall seconds per call of ``fn``, device work included: a few synchronised calls (at least 3,
    up to 20 ms of them; one call when a call takes over a second)."""
    sync_cuda()
    start = time.perf_counter()
    calls = 0
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed > 1.0 or (calls >= 3 and elapsed >= 0.02) or calls >= 1000:
            break
    sync_cuda()
    return (time.perf_counter() - start) / calls


def median_and_iqr(values: Sequence[float]) -> tuple[float, float]:
    """Median and interquartile range (0 for fewer than 4 values)."""
    if not values:
        return 0.0, 0.0
    median = float(statistics.median(values))
    if len(values) < 4:
        return median, 0.0
    quartiles = statistics.quantiles(values, n=4, method="inclusive")
    return median, float(quartiles[2] - quartiles[0])
