"""Callgrind instruction counts for many benchmarks in one valgrind process.

This engine knows nothing of pytest. The caller launches the counted process with
:func:`valgrind_argv` and :func:`counted_environment` (so that every launch is identical by
construction), optionally preloading the deterministic allocator from :func:`build_allocator`;
inside that process :func:`measure` counts one callable and returns torch's ``CallgrindStats``.
"""

from __future__ import annotations

from .allocator import (
    ALLOCATOR_NAME,
    AllocatorBuildError,
    allocator_hash,
    build_allocator,
    dropped_bytes,
    start_heap_epoch,
)
from .client_requests import UnsupportedPlatform, running_on_valgrind
from .launch import (
    ValgrindUnavailable,
    check_valgrind,
    counted_environment,
    counting_fingerprint,
    out_file_pattern,
    valgrind_argv,
)

__all__ = [
    "ALLOCATOR_NAME",
    "AllocatorBuildError",
    "CallgrindPart",
    "DumpNotFound",
    "NotUnderValgrind",
    "UnsupportedPlatform",
    "ValgrindUnavailable",
    "allocator_hash",
    "annotate_counts",
    "build_allocator",
    "dropped_bytes",
    "start_heap_epoch",
    "check_valgrind",
    "counted_environment",
    "counting_fingerprint",
    "function_counts",
    "exclusive_counts",
    "count_region",
    "read_region",
    "plan_calls",
    "Region",
    "measure",
    "out_file_pattern",
    "parse_callgrind",
    "parse_callgrind_file",
    "running_on_valgrind",
    "valgrind_argv",
]


_LAZY = {
    "measure": "collect",
    "NotUnderValgrind": "collect",
    "DumpNotFound": "collect",
    "CallgrindPart": "parse",
    "function_counts": "parse",
    "exclusive_counts": "parse",
    "count_region": "collect",
    "read_region": "collect",
    "plan_calls": "collect",
    "Region": "collect",
    "annotate_counts": "parse",
    "parse_callgrind": "parse",
    "parse_callgrind_file": "parse",
}


def __getattr__(name: str) -> object:
    # collect imports torch (parse only where torch's types are asked for); the launching side
    # (which may not need torch yet) only pays for that when it uses them.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)
