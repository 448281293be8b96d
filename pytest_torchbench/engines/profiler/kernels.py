"""CUDA kernel launches per call, by kernel name: a deterministic GPU counterpart of op counts.

How a kernel is tied to an iteration: a kernel runs on the GPU's clock, after (often long after)
the CPU op that launched it, so its time says nothing about which call made it. The profiler
links them instead: every device event (kernel, memcpy, memset) carries a
``linked_correlation_id`` equal to the ``correlation_id`` of the CPU op (``aten::...``) that
launched it, the same link torch's own ``key_averages`` uses to put kernel times under ops. The
CPU op lies inside an iteration marker (see ``iterations``), so the kernel counts for that
iteration. As with ops, the counts of one iteration are reported (the one most iterations agree
on), so they are integers and identical run to run for deterministic code.
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Iterable

import torch
from torch.profiler import ProfilerActivity

from ..._compat import kineto_events
from .iterations import Windows, record, representative

__all__ = ["NoCudaError", "count_kernels", "kernels_per_iteration"]

#: The device types whose events count as launches (the GPU side of the trace).
_DEVICE_TYPES = ("CUDA",)


class NoCudaError(RuntimeError):
    """Kernel counts were asked for in a process without a usable CUDA device."""


def kernels_per_iteration(
    windows: Windows,
    cpu_events: Iterable[tuple[float, int]],
    device_events: Iterable[tuple[str, int]],
) -> list[collections.Counter[str]]:
    """Per iteration window, the device events launched from it, by name.

    ``cpu_events``: (start, correlation_id) of CPU events; ``device_events``: (name,
    linked_correlation_id) of GPU events. Pure, so the attribution rule is tested without a GPU.
    A device event whose launching CPU event lies outside every window (the profiler's own work)
    is not counted."""
    window_of: dict[int, int] = {}
    for start, correlation in cpu_events:
        if correlation > 0:
            i = windows.index(start)
            if i is not None:
                window_of[correlation] = i
    counters: list[collections.Counter[str]] = [collections.Counter() for _ in range(len(windows))]
    for name, linked in device_events:
        i = window_of.get(linked)
        if i is not None:
            counters[i][name] += 1
    return counters


def _is_device(ev: Any) -> bool:
    return str(ev.device_type()).rsplit(".", 1)[-1] in _DEVICE_TYPES


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
    ``iterations`` times under the profiler with CPU and CUDA activities, each call in its marker.
    Raises :class:`NoCudaError` without a usable CUDA device.
    """
    if not torch.cuda.is_available():
        raise NoCudaError("no CUDA device: torch.cuda.is_available() is False in this process")
    prof = record(fn, iterations=iterations, warmup=warmup, what="count_kernels", before_region=before_region,
                  before_each=before_each, activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    raw = kineto_events(prof)
    if raw is None:  # pragma: no cover - depends on torch internals
        raise RuntimeError("this torch version does not expose the profiler's raw events")
    counters = kernels_per_iteration(
        Windows.of_raw(prof),
        # CPU ops (frontend events: no link of their own); CUDA runtime calls such as
        # cudaLaunchKernel are CPU events too, but linked, and their ids are CUPTI's.
        ((ev.start_ns(), ev.correlation_id()) for ev in raw
         if not _is_device(ev) and ev.linked_correlation_id() == 0),
        ((ev.name(), ev.linked_correlation_id()) for ev in raw if _is_device(ev)),
    )
    if len(counters) != iterations:  # pragma: no cover - would mean the profiler lost our markers
        raise RuntimeError(f"profiler recorded {len(counters)} iteration markers for {iterations} iterations")
    chosen = representative(counters)
    return {key: float(chosen[key]) for key in sorted(chosen)}
