"""Peak memory: the high-water mark of the bytes one call allocates, CPU and (when used) CUDA."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator

import torch
from torch.profiler import ProfilerActivity, profile

from ...common.compat import cpu_allocation_events
from .iterations import CallHooks, Windows, record
from .options import ProfilerOptions

__all__ = ["MEMORY_METHOD", "peak_memory"]

#: How a peak is counted; a baseline counted otherwise is not comparable. /2: only blocks the call
#: allocated itself, Python's cyclic collector off during the calls; /1 (no name recorded): every
#: free the profiler reported, the collector on.
MEMORY_METHOD = "own-blocks/2"


def _cpu_allocations(prof: profile) -> list[tuple[int, int, int, int]] | None:
    """(start_ns, order, address, nbytes) of the CPU allocations and frees the profiler recorded.

    From the profiler's event tree (``compat.cpu_allocation_events``), the one view that gives a
    block's address; the raw Kineto events give only its size. None means this torch does not
    have it and the caller cannot count.
    """
    events = cpu_allocation_events(prof)
    if events is None:
        return None
    return [
        (
            event.start_time_ns,
            order,
            int(event.extra_fields.ptr),
            int(event.extra_fields.alloc_size),
        )
        for order, event in enumerate(events)
    ]


def _peak_of_own_blocks(events: Iterable[tuple[int, int]]) -> int:
    """The highest total of the blocks allocated in ``events`` (address, nbytes) and not yet freed.

    A free of a block allocated before (no allocation of that address in ``events``) is left out:
    the profiler reports one only when an earlier profiled session allocated that address, with
    that session's size, which is chance (malloc's address reuse), not the code measured."""
    live: dict[int, int] = {}
    current = peak = 0
    for address, nbytes in events:
        if nbytes > 0:
            current += nbytes - live.get(address, 0)
            live[address] = nbytes
            peak = max(peak, current)
        elif address in live:
            current -= live.pop(address)
    return peak


def _cuda_in_use() -> bool:
    """Whether this process uses CUDA: available, and initialised (by the callable or its test).
    A CPU-only benchmark on a GPU machine reports no CUDA peak rather than a meaningless 0."""
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized())


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (restored after), so no collection
    starts inside a measured call.

    Why: a collection starts where the process's count of new objects happens to cross its
    threshold, so it freed the garbage in reference cycles (autograd graphs held by a loss's
    outputs, its own or an earlier call's) at a different point of the measured call in every
    process. Garbage made meanwhile waits for the first collection after the block."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def peak_memory(
    fn: Callable[[], object],
    *,
    iterations: int = 1,
    warmup: int = 1,
    before_region: Callable[[], object] | None = None,
    before_each: Callable[[], object] | None = None,
) -> dict[str, int | None]:
    """Peak bytes allocated during one call of ``fn``, relative to what was allocated before it.

    CPU: the running total of the blocks the call allocates (from the profiler's allocation
    events inside each iteration marker), less those it frees; its maximum is the peak. Memory
    that existed before the call is not counted, and neither is freeing it
    (:func:`_peak_of_own_blocks`), so this is the high-water mark of the *extra* memory the call
    needed, as seen by PyTorch's allocator (not the process RSS, not numpy or Python objects).

    CUDA (when the process uses CUDA, see :func:`_cuda_in_use`): ``torch.cuda.max_memory_allocated``
    after ``reset_peak_memory_stats``, minus the memory allocated at the start, i.e. the same
    quantity measured by the caching allocator; None otherwise.

    Python's garbage collector is off from the warm-up to the last call
    (:func:`_collector_paused`): garbage in reference cycles, the call's own included, is freed
    after them, never at a point of a call that depends on the process's history.

    With several iterations the largest per-iteration peak is returned.
    """
    with _collector_paused():
        prof = record(
            fn,
            iterations=iterations,
            warmup=warmup,
            what="peak_memory",
            options=ProfilerOptions(activities=(ProfilerActivity.CPU,), profile_memory=True),
            hooks=CallHooks(before_region=before_region, before_each=before_each),
        )
    cpu_peak = _cpu_peak(prof)
    cuda_peak = _cuda_peak(fn, iterations, before_each) if _cuda_in_use() else None
    return {"cpu_peak_bytes": cpu_peak, "cuda_peak_bytes": cuda_peak}


def _cpu_peak(prof: profile) -> int:
    allocations = _cpu_allocations(prof)
    if allocations is None:  # pragma: no cover - depends on torch internals
        raise RuntimeError("this torch version does not expose the profiler's allocation events")
    allocations.sort()
    windows = Windows.of_raw(prof)
    per_window: list[list[tuple[int, int]]] = [[] for _ in range(len(windows))]
    for t, _, address, nbytes in allocations:
        i = windows.index(t)
        if i is not None:
            per_window[i].append((address, nbytes))
    return max((_peak_of_own_blocks(events) for events in per_window), default=0)


def _cuda_peak(
    fn: Callable[[], object], iterations: int, before_each: Callable[[], object] | None
) -> int:
    peak = 0
    with _collector_paused():
        for _ in range(iterations):
            if before_each is not None:
                before_each()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fn()
            torch.cuda.synchronize()
            peak = max(peak, torch.cuda.max_memory_allocated() - base)
    return peak
