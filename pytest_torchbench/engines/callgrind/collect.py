"""Counting instructions of a callable inside an already-running Callgrind process.

Why this shape: starting valgrind and importing torch under it costs about 10 s, so one counted
process measures many benchmarks. Instrumentation is started once (START/STOP around every
region costs ~0.27 s each, as valgrind flushes its translations; toggling collection ~0.04 s),
and each benchmark's region is made independent of what ran before it:

* a freshly compiled timing-loop code object per benchmark (as ``timeit`` does), so CPython's
  bytecode specialisation of the loop is not inherited from another benchmark;
* at least ~100 warm-up calls, so shared helpers are re-specialised for this benchmark;
* ``gc.collect()`` then ``gc.disable()`` around the region (a collection inside it adds ~300k
  instructions), with ``gc.freeze()`` so that those collections stay cheap under valgrind.

Each region is dumped with a unique label to this process's own file (``...<pid>.<n>``), read
with :mod:`.parse`, deleted, and returned as torch's ``CallgrindStats``.
"""
from __future__ import annotations

import functools
import gc
import itertools
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils.benchmark.utils.common import TaskSpec
from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import (
    CallgrindStats,
    FunctionCounts,
)

from . import client_requests
from .parse import CallgrindPart, function_counts, parse_callgrind_file

__all__ = ["NotUnderValgrind", "DumpNotFound", "session_start", "measure"]


class NotUnderValgrind(RuntimeError):
    """:func:`measure` was called in a process that does not run under valgrind's Callgrind."""


class DumpNotFound(RuntimeError):
    """The dump of a region did not appear where the launch said it would."""


_session_started = False
_sequence = itertools.count(1)

# The toggles live inside the fresh loop, so the code around the counted region is the same
# (freshly compiled, run once before for the warm-up) for every benchmark, whatever ran before.
_LOOP_SOURCE = (
    "def _torchbench_timing_loop(_fn, _n, _on, _off):\n"
    "    _on()\n"
    "    for _ in range(_n):\n"
    "        _fn()\n"
    "    _off()\n"
)
_Loop = Callable[[Callable[[], object], int, Callable[[], object], Callable[[], object]], None]


def session_start() -> None:
    """Switch Callgrind's instrumentation on, once per process (later calls do nothing).

    Call it after the heavy imports and the benchmarks' setup: everything before it runs at
    about a third of the instrumented cost. It also pins torch to one thread and freezes the
    objects alive so far out of the garbage collector's sight.
    """
    global _session_started
    if _session_started:
        return
    if not client_requests.running_on_valgrind():
        raise NotUnderValgrind(
            "instruction counting must run inside valgrind --tool=callgrind "
            "(launch the process with launch.valgrind_argv(...))"
        )
    torch.set_num_threads(1)
    gc.collect()
    gc.freeze()
    client_requests.start_instrumentation()
    _session_started = True


def _fresh_loop() -> _Loop:
    namespace: dict[str, object] = {}
    exec(compile(_LOOP_SOURCE, "<torchbench-timing-loop>", "exec"), namespace)  # noqa: S102
    return namespace["_torchbench_timing_loop"]  # type: ignore[return-value]


def _run_loop(loop: _Loop, fn: Callable[[], object], n: int, toggle: Callable[[], object]) -> None:
    try:
        loop(fn, n, toggle, toggle)
    except BaseException:
        # fn raised between the two toggles: switch collection back off and drop the costs
        toggle()
        client_requests.zero_stats()
        raise


@functools.lru_cache(maxsize=1)
def _toggle() -> Callable[[], object]:
    return client_requests.toggle_collect_fast()


def _default_task_spec(fn: Callable[[], object]) -> TaskSpec:
    name = getattr(fn, "__qualname__", None) or repr(fn)
    return TaskSpec(stmt=f"{name}()", setup="", num_threads=1)


def _find_dump(out_dir: Path, label: str) -> tuple[Path, list[CallgrindPart]]:
    """This process's dump for ``label``: files of other pids (forked helpers) are never read."""
    prefix_suffix = f".{os.getpid()}."
    candidates = sorted(
        (
            path
            for path in out_dir.iterdir()
            if prefix_suffix in path.name and path.name.rsplit(".", 1)[-1].isdigit()
        ),
        key=lambda path: int(path.name.rsplit(".", 1)[-1]),
        reverse=True,
    )
    for path in candidates:
        parts = parse_callgrind_file(path)
        if parts and parts[-1].trigger.endswith(label):
            return path, parts
    raise DumpNotFound(
        f"no Callgrind dump labelled {label!r} for pid {os.getpid()} in {out_dir}; was valgrind "
        "launched with launch.valgrind_argv(..., launch.out_file_pattern(out_dir))?"
    )


def measure(
    fn: Callable[[], object],
    *,
    number: int = 100,
    warmup: int = 100,
    task_spec: TaskSpec | None = None,
    out_dir: str | os.PathLike[str],
    keep_output: bool = False,
    per_region: bool = False,
    before_region: Callable[[], object] | None = None,
) -> CallgrindStats:
    """Count the instructions of ``number`` calls of ``fn`` in this (valgrind) process.

    ``counts()`` of the result is the total over the ``number`` calls, as with torch's
    ``collect_callgrind``; divide by ``number_per_run`` for a per-call figure. Keep ``number``
    fixed per benchmark between runs that are compared: the per-call count depends on it a
    little (specialisation). ``out_dir`` is the folder of the ``--callgrind-out-file`` pattern.
    The baseline stats are empty (no empty-statement baseline is collected); the region includes
    a constant overhead of some hundred instructions (the loop set-up and the two toggles).
    With ``keep_output`` the dump's text is kept in ``stmt_callgrind_out``.

    With ``per_region`` instrumentation is switched on just before the warm-up and off after the
    dump, instead of once for the whole process: a flush of valgrind's translations per region
    (~0.25 s), but everything between regions (a test runner's own work, parsing the dump,
    judging) then runs uninstrumented, several times faster.

    ``before_region`` (e.g. seeding random generators) is called before the warm-up and again
    before the counted region, never inside it: its own instructions are not counted.
    """
    if number < 1 or warmup < 0:
        raise ValueError(f"need number >= 1 and warmup >= 0 (got {number}, {warmup})")
    if not per_region:
        session_start()
    elif not client_requests.running_on_valgrind():
        raise NotUnderValgrind(
            "instruction counting must run inside valgrind --tool=callgrind "
            "(launch the process with launch.valgrind_argv(...))"
        )
    task_spec = task_spec or _default_task_spec(fn)
    label = f"torchbench-{os.getpid()}-{next(_sequence)}"
    loop = _fresh_loop()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(task_spec.num_threads)
    gc_was_enabled = gc.isenabled()
    toggle = _toggle()
    if before_region is not None:
        before_region()
    if per_region:
        client_requests.start_instrumentation()
    # CPython's type attribute cache (4096 slots, indexed by type version tag and name address)
    # still holds what earlier benchmarks looked up; their entries evict ours in a pattern that
    # depends on history. Emptying it before the warm-up makes the region see only its own.
    sys._clear_type_cache()
    try:
        # The warm-up runs the very same loop, toggles included; what it collects is zeroed.
        _run_loop(loop, fn, warmup, toggle)
        if before_region is not None:
            before_region()
        gc.collect()
        gc.freeze()
        gc.disable()
        client_requests.zero_stats()
        _run_loop(loop, fn, number, toggle)
        client_requests.dump_stats_at(label)
    finally:
        if per_region:
            client_requests.stop_instrumentation()
        if gc_was_enabled:
            gc.enable()
        torch.set_num_threads(previous_threads)
    path, parts = _find_dump(Path(out_dir), label)
    text = path.read_text(encoding="utf-8", errors="replace") if keep_output else None
    path.unlink()
    return CallgrindStats(
        task_spec=task_spec,
        number_per_run=number,
        built_with_debug_symbols=_built_with_debug_symbols(),
        baseline_inclusive_stats=FunctionCounts((), inclusive=True),
        baseline_exclusive_stats=FunctionCounts((), inclusive=False),
        stmt_inclusive_stats=function_counts(parts, inclusive=True, drop_program_totals=True),
        stmt_exclusive_stats=function_counts(parts, inclusive=False),
        stmt_callgrind_out=text,
    )


@functools.lru_cache(maxsize=1)
def _built_with_debug_symbols() -> bool:
    """As torch decides it: the build type recorded in ``torch.__config__.show()``."""
    return "BUILD_TYPE=RelWithDebInfo" in torch.__config__.show()
