"""The profiler engine: ``torch.profiler`` turned into what a regression gate needs. No pytest here.

One module per job:

- ``options``: profiler options as plain values (marker, fixture, ``--bench-profile``), validated
  once
- ``iterations``: the one profiled loop (:func:`record`: warm-up, one marker per call) and the rule
  that puts an event in its iteration (:class:`Windows`); only one profiler at a time
- ``ops``: ``aten::`` op counts per call (:func:`count_ops`), and their call sites in the user's
  code (:func:`op_call_sites`, for failed benchmarks only)
- ``memory``: peak bytes per call, CPU and CUDA (:func:`peak_memory`)
- ``kernels``: what one call does on the GPU: kernel launches by name (:func:`count_kernels`),
  device time (:func:`measure_device`), which op launched a kernel (:func:`kernel_launchers`)
- ``traces``: traces and top-op summaries for humans (:func:`profile_run`,
  :class:`ProfilerSession`), the one shape they take in results (:meth:`ProfileSummary.record`) and
  where traces go (:func:`trace_file`)

The names below are the engine's API; metrics, the session and the fixtures import them from here.
"""

from __future__ import annotations

from .iterations import ITERATION_MARKER, CallHooks, ProfilerActiveError, stop_leftover_profiler
from .kernels import NoCudaError, count_kernels, kernel_launchers, measure_device
from .memory import MEMORY_METHOD, peak_memory
from .ops import count_ops, op_call_sites
from .options import ProfilerOptions, ScheduleOptions, cuda_usable, default_activities
from .traces import (
    PROFILE_SOURCES,
    TRACE_COMPRESS_THRESHOLD_BYTES,
    OpStat,
    ProfilerSession,
    ProfileSummary,
    profile_run,
    trace_file,
    write_trace,
)

__all__ = [
    "ITERATION_MARKER",
    "MEMORY_METHOD",
    "CallHooks",
    "NoCudaError",
    "OpStat",
    "PROFILE_SOURCES",
    "ProfileSummary",
    "ProfilerActiveError",
    "ProfilerOptions",
    "ProfilerSession",
    "ScheduleOptions",
    "TRACE_COMPRESS_THRESHOLD_BYTES",
    "count_kernels",
    "count_ops",
    "kernel_launchers",
    "measure_device",
    "cuda_usable",
    "default_activities",
    "op_call_sites",
    "peak_memory",
    "profile_run",
    "stop_leftover_profiler",
    "trace_file",
    "write_trace",
]
