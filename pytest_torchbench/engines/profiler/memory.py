"""Peak memory: the high-water mark of the bytes one call allocates, CPU and (when used) CUDA."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch.profiler import ProfilerActivity, profile

from ...common.compat import kineto_events
from .iterations import CallHooks, Windows, record
from .options import ProfilerOptions

__all__ = ["peak_memory"]


def _cpu_memory_events(prof: profile) -> list[tuple[int, int, int]] | None:
    """(start_ns, order, nbytes) of CPU ``[memory]`` events from the raw Kineto results.

    The aggregated ``FunctionEvent`` view folds allocations into the op that made them and loses the
    alloc/free order a peak needs, so we read the raw events. That is a private torch API; None
    means it is not available in this torch and the caller falls back.
    """
    raw = kineto_events(prof)
    if raw is None:
        return None
    out: list[tuple[int, int, int]] = []
    for order, ev in enumerate(raw):
        if ev.name() != "[memory]" or ev.device_type() != torch.autograd.DeviceType.CPU:
            continue
        out.append((ev.start_ns(), order, int(ev.nbytes())))
    return out


def _peak_of_running_sum(deltas: Iterable[int]) -> int:
    current = peak = 0
    for delta in deltas:
        current += delta
        peak = max(peak, current)
    return peak


def _cuda_in_use() -> bool:
    """Whether this process uses CUDA: available, and initialised (by the callable or its test).
    A CPU-only benchmark on a GPU machine reports no CUDA peak rather than a meaningless 0."""
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


def peak_memory(
    fn: Callable[[], object],
    *,
    iterations: int = 1,
    warmup: int = 1,
    before_region: Callable[[], object] | None = None,
    before_each: Callable[[], object] | None = None,
) -> dict[str, int | None]:
    """Peak bytes allocated during one call of ``fn``, relative to what was allocated before it.

    CPU: the running sum of the profiler's ``[memory]`` events (allocations positive, frees
    negative) inside each iteration marker; its maximum is the peak. Memory that existed before the
    call is not counted, and memory freed inside the call lowers the running sum, so this is the
    high-water mark of the *extra* memory the call needed, as seen by PyTorch's allocator (not the
    process RSS, not numpy or Python objects).

    CUDA (when the process uses CUDA, see :func:`_cuda_in_use`): ``torch.cuda.max_memory_allocated``
    after ``reset_peak_memory_stats``, minus the memory allocated at the start, i.e. the same
    quantity measured by the caching allocator; None otherwise.

    With several iterations the largest per-iteration peak is returned.
    """
    prof = record(
        fn,
        iterations=iterations,
        warmup=warmup,
        what="peak_memory",
        options=ProfilerOptions(activities=(ProfilerActivity.CPU,), profile_memory=True),
        hooks=CallHooks(before_region=before_region, before_each=before_each),
    )
    mem = _cpu_memory_events(prof)
    if mem is None:  # pragma: no cover - depends on torch internals
        raise RuntimeError("this torch version does not expose the profiler's raw memory events")
    mem.sort()
    windows = Windows.of_raw(prof)
    per_window: list[list[int]] = [[] for _ in range(len(windows))]
    for t, _, nbytes in mem:
        i = windows.index(t)
        if i is not None:
            per_window[i].append(nbytes)
    cpu_peak = max((_peak_of_running_sum(deltas) for deltas in per_window), default=0)

    cuda_peak: int | None = None
    if _cuda_in_use():
        cuda_peak = 0
        for _ in range(iterations):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fn()
            torch.cuda.synchronize()
            cuda_peak = max(cuda_peak, torch.cuda.max_memory_allocated() - base)
    return {"cpu_peak_bytes": cpu_peak, "cuda_peak_bytes": cuda_peak}
