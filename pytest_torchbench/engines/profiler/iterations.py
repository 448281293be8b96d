"""Iterations under the profiler: the one loop every profiled measurement runs, and the one rule
that assigns an event to the iteration it belongs to.

How iterations are delimited: every call of the measured callable is wrapped in a
``torch.profiler.record_function`` marker named :data:`ITERATION_MARKER`. An event belongs to the
marker whose time window contains its start, so whatever the profiler itself does when it starts,
stops or flushes (and anything the callable does not do) is never attributed to it; nested ops and
ops run on other threads while the iteration ran (autograd's device threads) are. Counting per
marker also lets a caller check that every iteration did the same work instead of dividing a total.

Op counts, peak memory, kernel launches, call sites and ``--bench-profile`` summaries all go
through :func:`record` and :class:`Windows`: the marker logic is written once.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch.profiler import profile, record_function

from ...common.compat import kineto_events, profiler_enabled, stop_profiler
from ...common.statistics import representative
from .options import ProfilerOptions

__all__ = [
    "ITERATION_MARKER",
    "CallHooks",
    "ProfilerActiveError",
    "Windows",
    "check_counts",
    "ensure_no_active_profiler",
    "record",
    "representative",
    "stop_leftover_profiler",
    "sync_cuda",
]

#: Name of the ``record_function`` range wrapped around each call of the measured callable. It is
#: not an ``aten::`` name, so it never shows up in op counts itself.
ITERATION_MARKER = "torchbench::iteration"


class ProfilerActiveError(RuntimeError):
    """Raised when a profiler is started while another one is already recording.

    torch supports only one active profiler per process; a second one either fails deep inside
    Kineto or silently steals the events, so we refuse early with a message a test author can act
    on.
    """


def stop_leftover_profiler() -> bool:
    """Stop a torch profiler that is still recording (one a test started and never stopped).

    Why: torch allows one active profiler per process, so a profiler left running by one test
    makes every later profiler in the process fail, and records every op of later tests. Returns
    whether one was running. The profile object that started it is abandoned (its results lost).
    """
    if not profiler_enabled():
        return False
    stop_profiler()
    return True


def ensure_no_active_profiler(what: str) -> None:
    if profiler_enabled():
        raise ProfilerActiveError(
            f"a torch profiler is already active in this test; {what} cannot start a second one. "
            "Stop the other profiler first (only one torch profiler can record at a time), or use "
            "the bench_profiler fixture instead of opening your own torch.profiler.profile."
        )


def check_counts(iterations: int, warmup: int) -> None:
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an int >= 1, got {iterations!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")


def sync_cuda() -> None:
    """Wait for queued CUDA work (only when this process initialised CUDA: never starts it)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


@dataclasses.dataclass(frozen=True)
class CallHooks:
    """Work around :func:`record`'s calls that is none of theirs: each runs outside the iteration
    markers, so its ops and allocations are not an iteration's."""

    #: Before the warm-up and again before the profiled calls (e.g. seeding).
    before_region: Callable[[], object] | None = None
    #: Before every call, warm-up and profiled (pedantic's setup, when every call needs its own
    #: arguments).
    before_each: Callable[[], object] | None = None
    #: Once the last call's device work is done, before the profiler stops (gpu_time reads the SM
    #: clock there).
    after_calls: Callable[[], object] | None = None


def record(
    fn: Callable[[], object],
    *,
    iterations: int,
    warmup: int,
    what: str,
    options: ProfilerOptions,
    hooks: CallHooks | None = None,
    step: bool = False,
) -> profile:
    """Warm ``fn`` up, then call it ``iterations`` times under a ``torch.profiler.profile``
    configured by ``options``, each call inside its own :data:`ITERATION_MARKER`; returns the
    finished profile.

    ``hooks`` run around the calls, outside the markers (:class:`CallHooks`). ``step``: each call
    is one profiler step (``prof.step()`` after it, CUDA synchronised first), so a schedule in
    ``options`` selects which calls are recorded. The callable's result is dropped inside the
    marker, so freeing it is attributed to the iteration that made it, not to the next one.
    ``what`` names the caller in the error raised when another profiler is already recording.
    A schedule that repeats (``options.one_cycle`` False) keeps torch's warning that later cycles
    drop earlier events.
    """
    check_counts(iterations, warmup)
    ensure_no_active_profiler(what)
    hooks = hooks or CallHooks()
    if hooks.before_region is not None:
        hooks.before_region()
    for _ in range(warmup):
        if hooks.before_each is not None:
            hooks.before_each()
        fn()
    if hooks.before_region is not None:
        hooks.before_region()
    sync_cuda()
    prof = profile(**options.profile_kwargs())
    one_cycle = options.one_cycle
    with profiler_output_silenced(one_cycle):  # Kineto's start-up lines; the calls below keep fd 2
        prof.__enter__()
    try:
        for _ in range(iterations):
            if hooks.before_each is not None:
                hooks.before_each()
            with record_function(ITERATION_MARKER):
                fn()
            if step:
                sync_cuda()
                with profiler_output_silenced(one_cycle):  # a schedule starts and stops Kineto here
                    prof.step()
        sync_cuda()
        if hooks.after_calls is not None:
            hooks.after_calls()
    finally:
        with profiler_output_silenced():
            prof.__exit__(None, None, None)
    return prof


#: torch's own warning at a profiler's start (torch 2.11 gives it, once per process, whether or
#: not a schedule repeats; 2.13 does not): a schedule's later cycles drop earlier events unless
#: ``acc_events=True``. Ignored only where the run is one cycle (``one_cycle``).
_PROFILER_WARNINGS = (r"Warning: Profiler clears events at the end of each cycle",)


@contextlib.contextmanager
def profiler_output_silenced(one_cycle: bool = True) -> Iterator[None]:
    """Keep the profiler's own output out of the user's: file descriptor 2 sent to /dev/null, and
    torch's warnings about its profiler's bookkeeping (:data:`_PROFILER_WARNINGS`) ignored, for
    the block. Used around the profiler's own start, step and stop only (and the op call-site
    re-run, outside the test), never around a test's code, whose output and warnings stay theirs.

    Why fd 2: torch 2.13's Kineto writes ``USDT:... profiler_start`` / ``profiler_stop`` to fd 2 on
    every profiler start and stop, whatever ``KINETO_LOG_LEVEL`` says (and other builds warn about
    their activity buffers there). Inside a test pytest captures it into the test's "Captured
    stderr" section, as if the user's code wrote it; a re-run outside the test's capture (op call
    sites, judged after the call) would print it into the terminal between the progress dots.
    Python's own ``sys.stderr`` is not fd 2 under pytest's capture and is kept. Why the warnings:
    torch 2.11 warns at its first profiler start that "Profiler clears events at the end of each
    cycle", which pytest's warnings summary then showed under the user's test, with a
    site-packages path; true only of a schedule that repeats, whose runs (``one_cycle`` False:
    a user's ``bench_profiler`` schedule) keep it."""
    with warnings.catch_warnings():
        for message in _PROFILER_WARNINGS if one_cycle else ():
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):
            yield  # no usable fd 2 (an embedding host): nothing to silence
            return
        try:
            with open(os.devnull, "wb") as devnull:
                os.dup2(devnull.fileno(), 2)
            yield
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


class Windows:
    """Sorted, non-overlapping time windows (iterations, or call sites) and which one a time falls
    in.

    Times are whatever unit the events use (microseconds for ``prof.events()``, nanoseconds for
    the raw Kineto events); a window contains both its ends.
    """

    def __init__(self, spans: Iterable[tuple[float, float]]) -> None:
        self.spans = sorted(spans)
        self._starts = [start for start, _ in self.spans]

    def __len__(self) -> int:
        return len(self.spans)

    def index(self, t: float) -> int | None:
        """The window containing ``t``, or None when it lies outside every window."""
        i = bisect.bisect_right(self._starts, t) - 1
        if i >= 0 and t <= self.spans[i][1]:
            return i
        return None

    @classmethod
    def of_events(cls, events: Sequence[Any], name: str = ITERATION_MARKER) -> Windows:
        """Windows of the ``prof.events()`` (FunctionEvent) ranges called ``name``."""
        return cls(
            (ev.time_range.start, ev.time_range.end)
            for ev in events
            if ev.name == name
            and str(getattr(ev, "device_type", "CPU")).rsplit(".", 1)[-1] == "CPU"
        )

    @classmethod
    def of_raw(cls, prof: profile, name: str = ITERATION_MARKER) -> Windows:
        """Windows of the raw Kineto CPU events called ``name`` (nanoseconds).

        CPU events only: with CUDA activity recorded, each ``record_function`` range also appears as
        a CUDA-side annotation of the same name on the GPU's clock (see ``kernels``)."""
        raw = kineto_events(prof) or []
        return cls(
            (ev.start_ns(), ev.end_ns())
            for ev in raw
            if ev.name() == name and str(ev.device_type()).rsplit(".", 1)[-1] == "CPU"
        )
