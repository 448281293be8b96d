"""Counting instructions of a callable inside an already-running Callgrind process.

Why this shape: starting valgrind and importing torch under it is slow, so one counted
process measures many benchmarks, and each benchmark's region is made independent of what ran
before it:

* a freshly compiled timing-loop code object per benchmark (as ``timeit`` does), so CPython's
  bytecode specialisation of the loop is not inherited from another benchmark;
* a warm-up of 100 calls for small benchmarks, so shared helpers are re-specialised for this one;
* ``gc.collect()``, ``gc.freeze()`` and ``gc.disable()`` before the region (a collection inside it
  adds ~300k instructions), done before instrumentation starts, where a collection is cheap.

What it costs (docs/design/counting.md, "Switching instrumentation on and off";
benchmarks/figures_instructions.py): switching instrumentation on or off makes valgrind drop its
translations, and retranslating torch's call path and pytest's own code afterwards was most of a
small benchmark's marginal cost. So instrumentation is switched on at the first region and left
on while benchmarks are small (pytest's work between them then runs instrumented but not
collected, which costs less than switching); after a heavy region it is switched off, so that
the next test's setup (large inputs) runs several times faster. Counts do not depend on that
history: collection is toggled inside the loop.

How many calls: the same on every run of the same code (counts per call depend a little on it):
the baseline's when the caller hands it over (:func:`plan_followed`), else chosen by
:func:`plan_calls` from one counted probe call, unless the caller fixes them.

Each region is dumped under a unique label to this process's own file (``...<pid>.<n>``);
:func:`count_region` leaves the dump unread (the pytest plugin's controller reads it natively),
:func:`measure` reads it here and returns torch's ``CallgrindStats``.
"""

from __future__ import annotations

import dataclasses
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

from . import client_requests, shared_keys
from .parse import function_counts, parse_callgrind_file

__all__ = [
    "NotUnderValgrind",
    "DumpNotFound",
    "Region",
    "RegionHooks",
    "measure",
    "count_region",
    "read_region",
    "plan_calls",
    "plan_followed",
    "dump_total",
    "pause_instrumentation",
    "pause_on_imports",
    "PauseOnImport",
]


class NotUnderValgrind(RuntimeError):
    """:func:`measure` was called in a process that does not run under valgrind's Callgrind."""


class DumpNotFound(RuntimeError):
    """The dump of a region did not appear where the launch said it would."""


#: Whether Callgrind's instrumentation is on in this process (switched on at the first region).
_instrumenting = False
#: Whether a region (its probe, warm-up and counted calls) is running: nothing may pause it then.
_in_region = False
_sequence = itertools.count(1)
_dumps = itertools.count(1)  # Callgrind numbers this process's dumps 1, 2, ... (``<file>.<n>``)

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

# With a setup before every call (pedantic's): collection is switched on for each call alone, so
# the setup runs between calls, uncounted. The per-call toggles add a constant of their own.
_SETUP_LOOP_SOURCE = (
    "def _torchbench_setup_loop(_fn, _n, _on, _off, _setup):\n"
    "    for _ in range(_n):\n"
    "        _setup()\n"
    "        _on()\n"
    "        _fn()\n"
    "        _off()\n"
)


def _fresh_loop() -> _Loop:
    namespace: dict[str, object] = {}
    exec(compile(_LOOP_SOURCE, "<torchbench-timing-loop>", "exec"), namespace)  # noqa: S102
    return namespace["_torchbench_timing_loop"]  # type: ignore[return-value]


def _fresh_setup_loop(setup: Callable[[], object]) -> _Loop:
    """A fresh per-call-setup loop with ``setup`` bound: called as the plain loop is."""
    namespace: dict[str, object] = {}
    exec(compile(_SETUP_LOOP_SOURCE, "<torchbench-timing-loop>", "exec"), namespace)  # noqa: S102
    loop: Callable[..., None] = namespace["_torchbench_setup_loop"]  # type: ignore[assignment]
    return functools.partial(loop, _setup=setup)


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


#: Adaptive rule (see :func:`plan_calls`): a heavy benchmark's region aims at about this many
#: instructions. Why this small: under valgrind a call costs about the same whether instrumented
#: or not, so a heavy benchmark costs its number of calls; counts are deterministic, so more calls
#: add no precision, only time. The larger budget tried before made a heavy benchmark take several
#: times as many calls (docs/design/counting.md, "How many calls are counted").
REGION_BUDGET = 1 << 21  # ~2.1M: 1-4 calls of a heavy benchmark
#: Benchmarks of at most this many instructions per call are small: they keep 100 counted calls
#: and 100 warm-up calls, as before the rule existed, so they keep their sensitivity and their
#: specialisation warm-up (shared helpers re-specialised; 10 calls were not enough).
SMALL_INSTRUCTIONS = 1 << 19  # ~524k
#: Calls per region of small benchmarks (and their warm-up).
SMALL_NUMBER = 100
#: At most this many counted calls for a heavy benchmark (4: the number just above
#: SMALL_INSTRUCTIONS).
MAX_HEAVY_NUMBER = REGION_BUDGET // SMALL_INSTRUCTIONS


def plan_calls(probe_instructions: int) -> tuple[int, int]:
    """``(number, warmup)`` for a benchmark whose first counted call took ``probe_instructions``.

    Why this rule: counts per call depend a little on ``number`` (specialisation), so the number
    must be the same on every run of the same code; it is therefore derived from a deterministic
    quantity (the probe's instruction count, bit-identical on reruns) through coarse power-of-two
    buckets. Small benchmarks (at most :data:`SMALL_INSTRUCTIONS`, ~524k) keep 100 calls and 100
    warm-up calls. Heavy ones get ``number = 2**floor(log2(REGION_BUDGET / probe))``, at most
    :data:`MAX_HEAVY_NUMBER` (4), at least 1, and half as many warm-up calls (at least one, the
    probe itself): a heavy call is seconds under valgrind, its count does not need averaging, and
    the warm-up only has to bring torch's caches to their steady state and CPython's
    specialisation past a code object's second execution (so the counted calls are at least the
    third: the caller's own first call, the probe, then the region). A probe near a bucket
    edge can land in the neighbouring bucket in a run with other tests around it (-k, order):
    that is why a benchmark with a baseline follows the baseline's plan instead
    (:func:`count_region`'s ``plan``).
    """
    if probe_instructions <= SMALL_INSTRUCTIONS:
        return SMALL_NUMBER, SMALL_NUMBER
    number = 1 << max(0, (REGION_BUDGET // probe_instructions).bit_length() - 1)
    number = min(number, MAX_HEAVY_NUMBER)
    return number, max(1, number // 2)


def _bucket_plans() -> tuple[tuple[int, int], ...]:
    """Every plan :func:`plan_calls` gives, from the smallest work to the heaviest (each bucket
    spans a factor of two, so doubling the probe meets them all)."""
    plans: list[tuple[int, int]] = []
    probe = SMALL_INSTRUCTIONS
    while probe <= 2 * REGION_BUDGET:
        plan = plan_calls(probe)
        if plan not in plans:
            plans.append(plan)
        probe = probe + 1 if probe == SMALL_INSTRUCTIONS else probe * 2
    return tuple(plans)


#: The plans of the adaptive rule in order: (100, 100), then the heavy ones.
BUCKET_PLANS = _bucket_plans()


def plan_followed(plan: tuple[int, int], probe_instructions: int) -> bool:
    """Whether a baseline's ``(number, warmup)`` is followed for work whose probe counted
    ``probe_instructions``: when it is a plan of the adaptive rule (a baseline file is text anyone
    can edit; a number a marker once fixed is not one) and its bucket is the probe's own or a
    neighbour. Why a neighbour only: that covers a probe that crossed an edge by a fraction of a
    percent, and work that grew or shrank past one edge; followed further, a few calls of work
    that became small count with too little warm-up (history shows), and a plan kept by runs that
    save and compare at once would never be derived again."""
    if plan not in BUCKET_PLANS:
        return False
    return abs(BUCKET_PLANS.index(plan) - BUCKET_PLANS.index(plan_calls(probe_instructions))) <= 1


@dataclasses.dataclass(frozen=True)
class Region:
    """A counted region's dump, not yet read: reading it is left to whoever can do it natively."""

    dump: Path
    label: str
    number: int
    warmup: int
    adaptive: bool


def _labelled(path: Path, label: str) -> bool:
    with open(path, "rb") as handle:
        head = handle.read(4096)
    return any(
        line.startswith(b"desc: Trigger:") and line.rstrip().endswith(b" " + label.encode())
        for line in head.splitlines()
    )


def _dump_stats_at(label: str, out_dir: Path) -> Path:
    """CALLGRIND_DUMP_STATS_AT(label) and the file it wrote.

    The file is named from this process's own dump counter, not found by listing the folder:
    what a listing allocates depends on how many files the controller has not yet deleted, which
    is a matter of timing, and what is allocated between regions moves later regions' counts.
    """
    client_requests.dump_stats_at(label)
    expected = out_dir / f"callgrind.out.{os.getpid()}.{next(_dumps)}"
    if expected.is_file() and _labelled(expected, label):
        return expected
    return _dump_for(out_dir, label)


def _dump_for(out_dir: Path, label: str) -> Path:
    """This process's newest dump labelled ``label`` (only the header is read, not the costs).

    Files of other pids (forked helpers write their own) are never considered.
    """
    marker = f".{os.getpid()}."
    candidates = sorted(
        (p for p in out_dir.iterdir() if marker in p.name and p.name.rsplit(".", 1)[-1].isdigit()),
        key=lambda p: int(p.name.rsplit(".", 1)[-1]),
        reverse=True,
    )
    for path in candidates:
        if _labelled(path, label):
            return path
    raise DumpNotFound(
        f"no Callgrind dump labelled {label!r} for pid {os.getpid()} in {out_dir}; was valgrind "
        "launched with launch.valgrind_argv(..., launch.out_file_pattern(out_dir))?"
    )


def dump_total(path: Path) -> int:
    """The region's total ``Ir`` from the dump's ``totals:`` line, without parsing the costs."""
    data = path.read_bytes()
    at = data.rfind(b"\ntotals:")
    if at < 0:
        return sum(part.total for part in parse_callgrind_file(path))
    line = data[at + 1 : data.find(b"\n", at + 1) if data.find(b"\n", at + 1) > 0 else None]
    return int(line.split(b":", 1)[1].split()[0])


@dataclasses.dataclass(frozen=True)
class RegionHooks:
    """Work around a region's calls that is none of theirs: each runs with collection off.

    Why seeding runs only once: the draws after it are the same on every run anyway (the number
    of warm-up calls is), while re-seeding between the warm-up and the region allocates there and
    moved Python-heavy counts from run to run (docs/design/counting.md, "Seeding").
    """

    #: Once, before the probe and the warm-up (seeding random generators).
    before_warmup: Callable[[], object] | None = None
    #: Before the probe and again before the counted calls (pedantic's setup: fresh arguments;
    #: not the seeding, which is ``before_warmup``'s alone).
    setup: Callable[[], object] | None = None
    #: Before every call, probe, warm-up and counted (pedantic's setup, when every call needs its
    #: own arguments): each counted call is counted alone.
    before_each: Callable[[], object] | None = None


@dataclasses.dataclass(frozen=True)
class _Counting:
    """One region being counted: how it calls ``fn`` (its fresh loop, collection toggled inside
    it), and its dump's label and folder."""

    fn: Callable[[], object]
    loop: _Loop
    toggle: Callable[[], object]
    label: str
    out: Path

    def run(self, n: int) -> None:
        _run_loop(self.loop, self.fn, n, self.toggle)

    def dump(self, label: str) -> Path:
        return _dump_stats_at(label, self.out)


def count_region(
    fn: Callable[[], object],
    *,
    number: int | None = None,
    warmup: int | None = None,
    out_dir: str | os.PathLike[str],
    num_threads: int = 1,
    hooks: RegionHooks | None = None,
    plan: tuple[int, int] | None = None,
) -> Region:
    """Count ``number`` calls of ``fn`` in this (valgrind) process; the dump is left unread.

    ``number``/``warmup`` None: chosen by :func:`plan_calls` from a probe (one counted call; the
    probe counts as one warm-up call, and it is the region only when no warm-up is asked for).
    ``plan``: the ``(number, warmup)`` the baseline was counted with (its warm-up including the
    probe), taken in place of the probe's own plan when :func:`plan_followed` allows.
    The probe still runs, so the calls made are those of a run whose probe planned the same. Why:
    a probe near a bucket edge picked the other bucket in a run with other tests around it, and a
    count over another number of calls cannot be compared; with the baseline's plan the
    comparison holds, and work that grew past its bucket is judged as the change it is
    (docs/design/counting.md, "How many calls are counted").
    Instrumentation is switched on if it is off and left on after a small region (see the module
    docstring). Garbage is collected and frozen before the region and the collector stays off
    until the region's dump is written. ``hooks``: uncounted work around the calls
    (:class:`RegionHooks`).
    """
    _check_can_count(number, warmup)
    hooks = hooks or RegionHooks()
    out = Path(out_dir)
    # No pid in the label: strings built before the region should be the same on every run.
    label = f"torchbench-region-{next(_sequence):06d}"
    loop = _fresh_loop() if hooks.before_each is None else _fresh_setup_loop(hooks.before_each)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    gc_was_enabled = gc.isenabled()
    counting = _Counting(fn=fn, loop=loop, toggle=_toggle(), label=label, out=out)
    for hook in (hooks.before_warmup, hooks.setup):
        if hook is not None:
            hook()
    _settle_before_region()
    _enter_region()
    keep_instrumenting = False
    try:
        if number is not None and warmup is not None:
            region = _count(counting, (number, warmup), hooks.setup)
            keep_instrumenting = _is_small(dump_total(region.dump) // number)
            return region
        probe = _count_probe(counting)
        probe_total = dump_total(probe.dump)
        keep_instrumenting = _is_small(probe_total)
        number, warmup = _planned(number, warmup, plan, probe_total)
        if number == 1 and warmup == 0:
            # No warm-up asked for (the marker's warmup=0): the probe, made after the caller's
            # own first call, is the one counted call. Otherwise it is a warm-up call: a second
            # call is where CPython 3.12+ specialises code first run in the first, so counting
            # it counted that work alone but not after tests that ran the same code
            # (docs/design/counting.md, "How many calls are counted").
            return probe
        probe.dump.unlink()
        return _count(counting, (number, warmup), hooks.setup, probed=True)
    finally:
        _leave_region(keep_instrumenting)
        if gc_was_enabled:
            gc.enable()
        torch.set_num_threads(previous_threads)


def _check_can_count(number: int | None, warmup: int | None) -> None:
    if (number is not None and number < 1) or (warmup is not None and warmup < 0):
        raise ValueError(f"need number >= 1 and warmup >= 0 (got {number}, {warmup})")
    if not client_requests.running_on_valgrind():
        raise NotUnderValgrind(
            "instruction counting must run inside valgrind --tool=callgrind "
            "(launch the process with launch.valgrind_argv(...))"
        )


def _settle_before_region() -> None:
    """Leave the region only its own work: the new modules' classes tracked, garbage collected
    and frozen, the collector off, the type attribute cache emptied."""
    # Classes of modules imported since the worker settled (by this test, or lazily by torch):
    # their attribute keys too in the state that no longer follows history (shared_keys). Before
    # the collection and the type cache's emptying: its own lookups and allocations are not the
    # region's.
    shared_keys.track_new_modules()
    gc.collect()
    gc.freeze()
    gc.disable()
    # CPython's type attribute cache (4096 slots, indexed by type version tag and name address)
    # still holds what earlier benchmarks looked up; their entries evict ours in a pattern that
    # depends on history. Emptying it before the warm-up makes the region see only its own. Not
    # on 3.10: there emptying it also invalidates every type's version tag and hands tags out
    # again from 0 in lookup order, so an inline cache of an attribute load misses whenever its
    # type's new tag differs (which follows the lookup order) and gives up for good after 20
    # misses: a helper's loads ran cached or not after as many regions of earlier tests
    # (docs/design/counting.md, "Quickening the helpers it calls"). Misses of the type cache are
    # left out of counts anyway.
    if sys.version_info[:2] != (3, 10):
        sys._clear_type_cache()


def _enter_region() -> None:
    """Switch instrumentation on if it is off; nothing may pause it until the region is left."""
    global _instrumenting, _in_region
    if not _instrumenting:
        client_requests.start_instrumentation()
        _instrumenting = True
    _in_region = True


def _leave_region(keep_instrumenting: bool) -> None:
    """Switch instrumentation off unless it is kept on (after a small region: the module
    docstring says why)."""
    global _instrumenting, _in_region
    _in_region = False
    if not keep_instrumenting:
        client_requests.stop_instrumentation()
        _instrumenting = False


def _count_probe(counting: _Counting) -> Region:
    """The probe: one counted call, whose total decides the number of calls."""
    label = f"{counting.label}-probe"
    client_requests.zero_stats()
    counting.run(1)
    return Region(counting.dump(label), label, 1, 0, True)


def _planned(
    number: int | None, warmup: int | None, plan: tuple[int, int] | None, probe_total: int
) -> tuple[int, int]:
    """``(number, warmup)`` after a probe: the baseline's ``plan`` where :func:`plan_followed`
    allows, else :func:`plan_calls`'s, each unless the caller fixed it. The warm-up includes the
    probe."""
    planned_number, planned_warmup = plan_calls(probe_total)
    if plan is not None and plan_followed(plan, probe_total):
        planned_number, planned_warmup = plan
    return (
        planned_number if number is None else number,
        planned_warmup if warmup is None else warmup,
    )


def _count(
    counting: _Counting,
    planned: tuple[int, int],
    setup: Callable[[], object] | None,
    *,
    probed: bool = False,
) -> Region:
    """The warm-up, ``setup``, then the counted calls and their dump. ``planned``'s
    warm-up includes the probe when there was one (``probed``): it is not made again."""
    number, warmup = planned
    remaining_warmup = max(0, warmup - 1) if probed else warmup
    counting.run(remaining_warmup)
    if setup is not None:
        setup()
    client_requests.zero_stats()
    counting.run(number)
    dump = counting.dump(counting.label)
    return Region(dump, counting.label, number, remaining_warmup + (1 if probed else 0), probed)


def pause_instrumentation() -> None:
    """Switch instrumentation off if it is on, before uncounted work known to be heavy; the next
    region switches it on again.

    Why: instrumentation stays on after small regions, so whatever runs between them runs
    instrumented. For most tests that is their setup and first call, which is cheap; for the first
    call of a ``torch.compile``d function it is the compilation, several times slower instrumented
    (docs/design/counting.md, "Switching instrumentation on and off")."""
    global _instrumenting
    if _instrumenting and not _in_region:
        client_requests.stop_instrumentation()
        _instrumenting = False


class PauseOnImport:
    """A ``sys.meta_path`` finder that finds nothing: it pauses instrumentation (outside regions)
    whenever a module not yet imported is about to be, then lets the other finders import it.

    Why: executing a module is uncounted work that can be heavy, and with instrumentation left
    on after small regions it ran instrumented: a real suite's test body calling
    ``torch.compile`` (which imports torch._dynamo) took several times as long after a small
    benchmark as with this finder (docs/design/counting.md, "Switching instrumentation on and
    off"). The import system asks finders only for modules missing from
    ``sys.modules``, so this costs nothing on the imports that are already done."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        pause_instrumentation()
        return None


def pause_on_imports() -> None:
    """Install :class:`PauseOnImport` first in ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, PauseOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, PauseOnImport())  # type: ignore[arg-type]


def _is_small(instructions_per_call: int) -> bool:
    """Whether instrumentation stays on after this region (see :func:`count_region`)."""
    return instructions_per_call <= SMALL_INSTRUCTIONS


def read_region(region: Region, task_spec: TaskSpec | None = None) -> CallgrindStats:
    """Parse a region's dump into torch's ``CallgrindStats`` and delete the dump."""
    parts = parse_callgrind_file(region.dump)
    region.dump.unlink()
    return CallgrindStats(
        task_spec=task_spec or TaskSpec(stmt=region.label, setup="", num_threads=1),
        number_per_run=region.number,
        built_with_debug_symbols=_built_with_debug_symbols(),
        baseline_inclusive_stats=FunctionCounts((), inclusive=True),
        baseline_exclusive_stats=FunctionCounts((), inclusive=False),
        stmt_inclusive_stats=function_counts(parts, inclusive=True, drop_program_totals=True),
        stmt_exclusive_stats=function_counts(parts, inclusive=False),
        stmt_callgrind_out=None,
    )


def measure(
    fn: Callable[[], object],
    *,
    number: int | None = 100,
    warmup: int | None = 100,
    task_spec: TaskSpec | None = None,
    out_dir: str | os.PathLike[str],
    before_warmup: Callable[[], object] | None = None,
    setup: Callable[[], object] | None = None,
) -> CallgrindStats:
    """Count the instructions of ``number`` calls of ``fn`` in this (valgrind) process.

    ``counts()`` of the result is the total over the ``number`` calls, as with torch's
    ``collect_callgrind``; divide by ``number_per_run`` for a per-call figure. ``number`` or
    ``warmup`` None: adaptive (:func:`plan_calls`). Keep ``number`` fixed per benchmark between
    runs that are compared: the per-call count depends on it a little (specialisation).
    ``out_dir`` is the folder of the ``--callgrind-out-file`` pattern. The baseline stats are
    empty (no empty-statement baseline is collected); the region includes a constant overhead of
    some hundred instructions (the loop set-up and the two toggles). The dump is parsed here,
    under valgrind (``bench_timer(...).collect_callgrind()``); for benchmarks the plugin hands
    :func:`count_region`'s dump to its controller, which reads it natively.
    """
    task_spec = task_spec or _default_task_spec(fn)
    region = count_region(
        fn,
        number=number,
        warmup=warmup,
        out_dir=out_dir,
        num_threads=task_spec.num_threads,
        hooks=RegionHooks(before_warmup=before_warmup, setup=setup),
    )
    return read_region(region, task_spec)


@functools.lru_cache(maxsize=1)
def _built_with_debug_symbols() -> bool:
    """As torch decides it: the build type recorded in ``torch.__config__.show()``."""
    return "BUILD_TYPE=RelWithDebInfo" in torch.__config__.show()
