"""Profiler engine: op counts, peak memory, traces and a user-facing profiler session.

This module knows nothing of pytest. It turns ``torch.profiler`` into the three things a
performance-regression gate needs:

* :func:`count_ops` -- deterministic per-iteration counts of ``aten::`` ops. Unlike times, these
  counts do not move with machine load, so they can be compared exactly against a baseline, and a
  difference explains *why* something got slower (one more ``aten::clone``, one more ``aten::copy_``).
* :func:`peak_memory` -- the peak bytes allocated within one iteration, relative to its start.
* :func:`profile_run` / :class:`ProfilerSession` -- traces and ``key_averages`` tables for humans.

How iterations are delimited: every call of ``fn`` is wrapped in a ``torch.profiler.record_function``
marker named :data:`ITERATION_MARKER`. Only events that start inside a marker's time window count, so
whatever the profiler itself does when it starts, stops or flushes (and anything ``fn`` does not do) is
never attributed to ``fn``. Counting per marker also lets us check that every iteration did the same
work instead of dividing a total and hoping the result is an integer.
"""
from __future__ import annotations

import bisect
import collections
import dataclasses
import gzip
import hashlib
import os
import re
import shutil
import unicodedata
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from .._compat import kineto_events, profiler_enabled

__all__ = [
    "ITERATION_MARKER",
    "TRACE_COMPRESS_THRESHOLD_BYTES",
    "OpStat",
    "ProfileSummary",
    "ProfilerActiveError",
    "ProfilerOptions",
    "ProfilerSession",
    "ScheduleOptions",
    "count_ops",
    "default_activities",
    "peak_memory",
    "profile_run",
    "safe_file_stem",
    "stop_leftover_profiler",
    "write_trace",
]

#: Name of the ``record_function`` range wrapped around each call of the measured callable. It is not
#: an ``aten::`` name, so it never shows up in op counts itself.
ITERATION_MARKER = "torchbench::iteration"

#: Chrome traces above this size are gzip-compressed (``.json.gz``). Small traces stay plain JSON so
#: they can be grepped and diffed; big ones shrink ~10x, and Perfetto and chrome://tracing both open
#: ``.json.gz`` directly.
TRACE_COMPRESS_THRESHOLD_BYTES = 5 * 1024 * 1024

#: Only events with one of these prefixes are counted as ops. ``aten::`` covers every dispatcher op
#: of core PyTorch, nested ones included; it excludes the iteration marker, ``[memory]`` events,
#: ``ProfilerStep#N``, autograd bookkeeping ranges (``autograd::engine::...``, ``*Backward0``) and
#: runtime calls such as ``cudaLaunchKernel``, whose number or presence depends on the profiler or
#: the driver rather than on the code under test.
DEFAULT_OP_PREFIXES: tuple[str, ...] = ("aten::",)


class ProfilerActiveError(RuntimeError):
    """Raised when a profiler is started while another one is already recording.

    torch supports only one active profiler per process; a second one either fails deep inside
    Kineto or silently steals the events, so we refuse early with a message a test author can act on.
    """


def _profiler_is_active() -> bool:
    """Whether any torch profiler (kineto or legacy autograd profiler) is recording right now."""
    return profiler_enabled()


def stop_leftover_profiler() -> bool:
    """Stop a torch profiler that is still recording (one a test started and never stopped).

    Why: torch allows one active profiler per process, so a profiler left running by one test
    makes every later profiler in the process fail, and records every op of later tests. Returns
    whether one was running. The profile object that started it is abandoned (its results lost).
    """
    if not _profiler_is_active():
        return False
    disable = getattr(torch._C._autograd, "_disable_profiler", None)
    if disable is not None:
        try:
            disable()
        except Exception:  # pragma: no cover - kineto already stopped it on its side
            pass
    on_stop = getattr(torch.autograd.profiler, "_run_on_profiler_stop", None)
    if on_stop is not None:
        on_stop()
    return True


def _ensure_no_active_profiler(what: str) -> None:
    if _profiler_is_active():
        raise ProfilerActiveError(
            f"a torch profiler is already active in this test; {what} cannot start a second one. "
            "Stop the other profiler first (only one torch profiler can record at a time), or use "
            "the bench_profiler fixture instead of opening your own torch.profiler.profile."
        )


# --------------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------------


def default_activities() -> tuple[ProfilerActivity, ...]:
    """CPU always, CUDA when a CUDA device is usable: the profiler's own default, made explicit so
    that it is recorded in results and the same options can be replayed."""
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    return tuple(activities)


@dataclasses.dataclass(frozen=True)
class ScheduleOptions:
    """Arguments of ``torch.profiler.schedule``; kept as data so they can be validated, printed and
    stored, which a schedule callable cannot."""

    wait: int
    warmup: int
    active: int
    repeat: int = 1
    skip_first: int = 0

    def __post_init__(self) -> None:
        for name in ("wait", "warmup", "active", "repeat", "skip_first"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"profiler schedule {name} must be a non-negative int, got {value!r}")
        if self.active < 1:
            raise ValueError("profiler schedule active must be >= 1")

    @property
    def steps_needed(self) -> int:
        """Steps until the first cycle's trace is complete."""
        return self.skip_first + self.wait + self.warmup + self.active

    def build(self) -> Callable[[int], Any]:
        return torch.profiler.schedule(
            wait=self.wait,
            warmup=self.warmup,
            active=self.active,
            repeat=self.repeat,
            skip_first=self.skip_first,
        )


_ACTIVITY_NAMES: dict[str, ProfilerActivity] = {
    "cpu": ProfilerActivity.CPU,
    "cuda": ProfilerActivity.CUDA,
}


@dataclasses.dataclass(frozen=True)
class ProfilerOptions:
    """How to configure ``torch.profiler.profile``; a plain value so marker keywords, ini options and
    stored results can all describe the same profiler set-up."""

    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    schedule: ScheduleOptions | None = None
    activities: tuple[ProfilerActivity, ...] = dataclasses.field(default_factory=default_activities)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ProfilerOptions:
        """Build options from user keywords (marker or fixture arguments).

        Unknown keywords are an error naming the keyword: a typo such as ``profile_memroy=True``
        would otherwise silently measure something else than the author asked for.
        ``schedule`` may be a :class:`ScheduleOptions`, a mapping of its fields or None;
        ``activities`` may hold ``ProfilerActivity`` members or the strings ``"cpu"`` / ``"cuda"``.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(
                f"unknown profiler option {unknown[0]!r}"
                + (f" (and {', '.join(map(repr, unknown[1:]))})" if len(unknown) > 1 else "")
                + f"; valid options are: {', '.join(sorted(known))}"
            )
        values: dict[str, Any] = {}
        for name in ("record_shapes", "profile_memory", "with_stack", "with_flops"):
            if name in kwargs:
                value = kwargs[name]
                if not isinstance(value, bool):
                    raise TypeError(f"profiler option {name!r} must be True or False, got {value!r}")
                values[name] = value
        if "schedule" in kwargs:
            values["schedule"] = _coerce_schedule(kwargs["schedule"])
        if "activities" in kwargs:
            values["activities"] = _coerce_activities(kwargs["activities"])
        return cls(**values)

    def profile_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``torch.profiler.profile`` (without ``on_trace_ready``)."""
        return {
            "activities": list(self.activities),
            "record_shapes": self.record_shapes,
            "profile_memory": self.profile_memory,
            "with_stack": self.with_stack,
            "with_flops": self.with_flops,
            "schedule": self.schedule.build() if self.schedule is not None else None,
        }

    @property
    def uses_cuda(self) -> bool:
        return ProfilerActivity.CUDA in self.activities


def _coerce_schedule(value: object) -> ScheduleOptions | None:
    if value is None or isinstance(value, ScheduleOptions):
        return value
    if isinstance(value, Mapping):
        fields = {f.name for f in dataclasses.fields(ScheduleOptions)}
        unknown = sorted(set(value) - fields)
        if unknown:
            raise TypeError(
                f"unknown profiler schedule option {unknown[0]!r}; valid: {', '.join(sorted(fields))}"
            )
        return ScheduleOptions(**value)
    raise TypeError(
        "profiler option 'schedule' must be None, a ScheduleOptions or a mapping with "
        f"wait/warmup/active[/repeat/skip_first], got {value!r}"
    )


def _coerce_activities(value: object) -> tuple[ProfilerActivity, ...]:
    if isinstance(value, (str, ProfilerActivity)):
        value = [value]
    if not isinstance(value, Iterable):
        raise TypeError(f"profiler option 'activities' must be a list of activities, got {value!r}")
    result: list[ProfilerActivity] = []
    for item in value:
        if isinstance(item, str):
            key = item.lower()
            if key not in _ACTIVITY_NAMES:
                raise ValueError(
                    f"unknown profiler activity {item!r}; use one of {', '.join(_ACTIVITY_NAMES)}"
                )
            item = _ACTIVITY_NAMES[key]
        if not isinstance(item, ProfilerActivity):
            raise TypeError(f"profiler activity must be a ProfilerActivity or a name, got {item!r}")
        if item not in result:
            result.append(item)
    if not result:
        raise ValueError("profiler option 'activities' must not be empty")
    return tuple(result)


# --------------------------------------------------------------------------------------------------
# Op counts
# --------------------------------------------------------------------------------------------------


def _check_counts(iterations: int, warmup: int) -> None:
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an int >= 1, got {iterations!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")


def _run_marked(fn: Callable[[], object], iterations: int) -> None:
    """Call ``fn`` inside one marker per iteration. The result is dropped inside the marker so that
    freeing it is attributed to the iteration that made it, not to the next one."""
    for _ in range(iterations):
        with record_function(ITERATION_MARKER):
            fn()


def _sync_cuda() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _iteration_windows(events: Sequence[Any]) -> list[tuple[float, float]]:
    windows = [
        (ev.time_range.start, ev.time_range.end) for ev in events if ev.name == ITERATION_MARKER
    ]
    windows.sort()
    return windows


def _op_key(ev: Any, by_shape: bool) -> str:
    if by_shape:
        return f"{ev.name} {list(ev.input_shapes) if ev.input_shapes is not None else []}"
    return str(ev.name)


def _per_iteration_counts(
    events: Sequence[Any], *, by_shape: bool, prefixes: tuple[str, ...]
) -> list[collections.Counter[str]]:
    """One Counter per iteration marker. An op belongs to the marker whose window contains its
    start; that covers nested ops and ops run on other threads (autograd's device threads) while the
    iteration was running."""
    windows = _iteration_windows(events)
    counters: list[collections.Counter[str]] = [collections.Counter() for _ in windows]
    if not windows:
        return counters
    starts = [w[0] for w in windows]
    for ev in events:
        name = ev.name
        if not name.startswith(prefixes):
            continue
        t = ev.time_range.start
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t <= windows[i][1]:
            counters[i][_op_key(ev, by_shape)] += 1
    return counters


def _representative(counters: list[collections.Counter[str]]) -> collections.Counter[str]:
    """The per-iteration count to report: the counts most iterations agree on (ties go to the later
    iteration, which had more warm-up). For deterministic code every iteration agrees; taking a
    whole iteration's counts, rather than a per-op mean, keeps the numbers integers and consistent
    with each other when one iteration took a one-off path (a cache fill, a lazy init)."""
    frozen = [tuple(sorted(c.items())) for c in counters]
    tally = collections.Counter(frozen)
    best = max(range(len(frozen)), key=lambda i: (tally[frozen[i]], i))
    return counters[best]


def count_ops(
    fn: Callable[[], object],
    *,
    iterations: int = 3,
    warmup: int = 1,
    by_shape: bool = False,
    prefixes: tuple[str, ...] = DEFAULT_OP_PREFIXES,
    before_region: Callable[[], object] | None = None,
) -> dict[str, float]:
    """Count the ``aten::`` ops one call of ``fn`` dispatches, nested ops included.

    ``fn`` is first called ``warmup`` times without the profiler (lazy initialisation, caches), then
    ``iterations`` times under a CPU-only profiler, each call inside its own marker. The counts are
    those of one iteration (see :func:`_representative`), so they do not depend on ``iterations`` nor
    on anything the profiler does outside the markers. Counting *nested* ops gives the most
    explanatory diff (``aten::linear`` -> ``aten::addmm`` -> ``aten::copy_``), at the price that one
    extra top-level op can show up as several changed lines.

    With ``by_shape`` the keys carry the input shapes, e.g. ``"aten::add [[4, 4], [4, 4], []]"``.
    Returns a dict sorted by key; values are floats (for storage alongside other metrics) holding
    integers. ``before_region`` (e.g. seeding) runs before the warm-up and before the profiled
    iterations, outside any iteration marker.
    """
    _check_counts(iterations, warmup)
    _ensure_no_active_profiler("count_ops")
    if before_region is not None:
        before_region()
    for _ in range(warmup):
        fn()
    if before_region is not None:
        before_region()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=by_shape) as prof:
        _run_marked(fn, iterations)
        _sync_cuda()
    counters = _per_iteration_counts(prof.events(), by_shape=by_shape, prefixes=prefixes)
    if len(counters) != iterations:  # pragma: no cover - would mean the profiler lost our markers
        raise RuntimeError(
            f"profiler recorded {len(counters)} iteration markers for {iterations} iterations"
        )
    chosen = _representative(counters)
    return {key: float(chosen[key]) for key in sorted(chosen)}


# --------------------------------------------------------------------------------------------------
# Peak memory
# --------------------------------------------------------------------------------------------------


def _cpu_memory_events(prof: profile) -> list[tuple[int, int, int]] | None:
    """(start_ns, order, nbytes) of CPU ``[memory]`` events from the raw Kineto results.

    The aggregated ``FunctionEvent`` view folds allocations into the op that made them and loses the
    alloc/free order a peak needs, so we read the raw events. That is a private torch API; None means
    it is not available in this torch and the caller falls back.
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


def _raw_marker_windows(prof: profile) -> list[tuple[int, int]]:
    raw = kineto_events(prof) or []
    return sorted(
        (ev.start_ns(), ev.end_ns()) for ev in raw if ev.name() == ITERATION_MARKER
    )


def _peak_of_running_sum(deltas: Iterable[int]) -> int:
    current = peak = 0
    for delta in deltas:
        current += delta
        peak = max(peak, current)
    return peak


def peak_memory(fn: Callable[[], object], *, iterations: int = 1, warmup: int = 1,
                before_region: Callable[[], object] | None = None) -> dict[str, int | None]:
    """Peak bytes allocated during one call of ``fn``, relative to what was allocated before it.

    CPU: the running sum of the profiler's ``[memory]`` events (allocations positive, frees
    negative) inside each iteration marker; its maximum is the peak. Memory that existed before the
    call is not counted, and memory freed inside the call lowers the running sum, so this is the
    high-water mark of the *extra* memory the call needed, as seen by PyTorch's allocator (not the
    process RSS, not numpy or Python objects).

    CUDA (when available): ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``,
    minus the memory allocated at the start, i.e. the same quantity measured by the caching
    allocator; None when CUDA is not available.

    With several iterations the largest per-iteration peak is returned.
    """
    _check_counts(iterations, warmup)
    _ensure_no_active_profiler("peak_memory")
    if before_region is not None:  # e.g. seeding: before the warm-up and the measured iterations
        before_region()
    for _ in range(warmup):
        fn()
    if before_region is not None:
        before_region()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _run_marked(fn, iterations)
    mem = _cpu_memory_events(prof)
    if mem is None:  # pragma: no cover - depends on torch internals
        raise RuntimeError("this torch version does not expose the profiler's raw memory events")
    mem.sort()
    cpu_peak = 0
    for start, end in _raw_marker_windows(prof):
        deltas = [nbytes for (t, _, nbytes) in mem if start <= t <= end]
        cpu_peak = max(cpu_peak, _peak_of_running_sum(deltas))

    cuda_peak: int | None = None
    if torch.cuda.is_available():
        cuda_peak = 0
        for _ in range(iterations):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fn()
            torch.cuda.synchronize()
            cuda_peak = max(cuda_peak, torch.cuda.max_memory_allocated() - base)
    return {"cpu_peak_bytes": cpu_peak, "cuda_peak_bytes": cuda_peak}


# --------------------------------------------------------------------------------------------------
# Traces and summaries
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OpStat:
    """One row of the top-ops table. Times are totals over all profiled iterations, in microseconds;
    device times are None when no device activity was recorded."""

    name: str
    calls: int
    self_cpu_time_us: float
    cpu_total_us: float
    self_device_time_us: float | None = None
    device_total_us: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ProfileSummary:
    """What a profiled run leaves for reports: the heaviest ops, the table torch prints, where the
    trace went and, when it could not be written, why (one line, for the caller to show)."""

    iterations: int
    top_ops: list[OpStat]
    table: str
    trace_path: Path | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "iterations": self.iterations,
            "top_ops": [op.to_dict() for op in self.top_ops],
            "table": self.table,
            "trace_path": str(self.trace_path) if self.trace_path is not None else None,
            "error": self.error,
        }


#: Left out of ``top_ops``: ``[memory]`` is not an op, and the iteration marker's self time is the
#: Python overhead of the measured callable, which would otherwise top every list. Both stay in the
#: torch table text.
_SKIP_IN_TOP = ("[memory]", ITERATION_MARKER)


def _top_ops(prof: profile, top_n: int) -> list[OpStat]:
    averages = prof.key_averages()
    has_device = any(ProfilerActivity.CUDA == a for a in getattr(prof, "activities", ()))
    rows: list[OpStat] = []
    for avg in averages:
        if avg.key in _SKIP_IN_TOP:
            continue
        self_dev = getattr(avg, "self_device_time_total", None)
        dev_total = getattr(avg, "device_time_total", None)
        rows.append(
            OpStat(
                name=str(avg.key),
                calls=int(avg.count),
                self_cpu_time_us=float(avg.self_cpu_time_total),
                cpu_total_us=float(avg.cpu_time_total),
                self_device_time_us=float(self_dev) if has_device and self_dev is not None else None,
                device_total_us=float(dev_total) if has_device and dev_total is not None else None,
            )
        )
    rows.sort(key=lambda r: (-r.self_cpu_time_us, r.name))
    return rows[:top_n]


def _table(prof: profile, row_limit: int) -> str:
    sort_by = "self_cpu_time_total"
    return str(prof.key_averages().table(sort_by=sort_by, row_limit=row_limit))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def write_trace(prof: profile, trace_path: Path | str) -> tuple[Path | None, str | None]:
    """Export ``prof``'s Chrome/Perfetto trace; returns (path written, error line).

    Compression policy: a path ending in ``.gz`` is always gzip-compressed; otherwise the trace is
    written as plain JSON and, when larger than :data:`TRACE_COMPRESS_THRESHOLD_BYTES`, replaced by
    ``<path>.gz``. We export to a temporary file in the target folder and rename it, so a crash never
    leaves a half-written trace under the final name. (torch's own ``.gz`` support goes through the
    system temp folder and an extra copy; doing it here keeps everything on one filesystem.)

    Never raises for I/O problems: a trace is a by-product, and losing it must not fail the test.
    """
    path = Path(trace_path)
    always_gzip = path.name.endswith(".gz")
    plain = path.with_name(path.name[: -len(".gz")]) if always_gzip else path
    tmp = plain.with_name(f".{plain.name}.{os.getpid()}.tmp")
    try:
        plain.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(tmp))
        if always_gzip or tmp.stat().st_size > TRACE_COMPRESS_THRESHOLD_BYTES:
            final = plain.with_name(plain.name + ".gz")
            tmp_gz = tmp.with_name(tmp.name + ".gz")
            with open(tmp, "rb") as src, gzip.open(tmp_gz, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, length=1 << 20)
            os.replace(tmp_gz, final)
            tmp.unlink()
        else:
            final = plain
            os.replace(tmp, final)
        return final, None
    except Exception as exc:  # OSError mostly; torch wraps some as RuntimeError
        for leftover in (tmp, tmp.with_name(tmp.name + ".gz")):
            try:
                leftover.unlink()
            except OSError:
                pass
        return None, f"could not write profiler trace to {path}: {_one_line(exc)}"


def profile_run(
    fn: Callable[[], object],
    *,
    iterations: int,
    options: ProfilerOptions,
    trace_path: Path | None,
    warmup: int = 1,
    top_n: int = 20,
) -> ProfileSummary:
    """Profile ``iterations`` calls of ``fn`` and summarise them for a report.

    Each call is one profiler step (``prof.step()`` after it), so a schedule in ``options`` selects
    which calls are recorded; ``iterations`` must then cover at least one full cycle. Times in the
    summary are totals over the recorded calls. The trace is written with :func:`write_trace`; if it
    cannot be written the summary still comes back, with ``trace_path`` None and ``error`` set.
    """
    _check_counts(iterations, warmup)
    if options.schedule is not None and iterations < options.schedule.steps_needed:
        raise ValueError(
            f"profiler schedule needs at least {options.schedule.steps_needed} iterations "
            f"(skip_first + wait + warmup + active), got iterations={iterations}"
        )
    _ensure_no_active_profiler("profile_run")
    for _ in range(warmup):
        fn()
    _sync_cuda()
    with profile(**options.profile_kwargs()) as prof:
        for _ in range(iterations):
            with record_function(ITERATION_MARKER):
                fn()
            if options.uses_cuda:
                _sync_cuda()
            prof.step()
    summary = ProfileSummary(
        iterations=iterations, top_ops=_top_ops(prof, top_n), table=_table(prof, top_n), trace_path=None
    )
    if trace_path is not None:
        summary.trace_path, summary.error = write_trace(prof, trace_path)
    return summary


class ProfilerSession:
    """A configured ``torch.profiler.profile`` for one test, handed to users by a fixture.

    It is a context manager; inside it, ``.profiler`` is the real torch object, so everything torch
    documents (``step``, ``export_stacks``, ``export_memory_timeline``, ``key_averages``) works.
    On exit it writes the trace to ``trace_path`` (when given) and keeps the ``key_averages`` table
    in ``.table``; failures to write are kept in ``.error`` instead of raised, because they must not
    turn a passing test into a failing one.
    """

    def __init__(
        self,
        options: ProfilerOptions | None = None,
        *,
        trace_path: Path | None = None,
        row_limit: int = 20,
    ) -> None:
        self.options = options if options is not None else ProfilerOptions()
        self.requested_trace_path = Path(trace_path) if trace_path is not None else None
        self.row_limit = row_limit
        self.profiler: profile | None = None
        self.trace_path: Path | None = None
        self.table: str | None = None
        self.error: str | None = None
        self._entered = False

    def __enter__(self) -> ProfilerSession:
        if self._entered:
            raise RuntimeError("a ProfilerSession can be entered only once")
        _ensure_no_active_profiler("bench_profiler")
        self.profiler = profile(**self.options.profile_kwargs())
        self.profiler.__enter__()
        self._entered = True
        return self

    def step(self) -> None:
        """Mark an iteration boundary (drives the schedule, labels ``ProfilerStep#N`` in traces)."""
        if self.profiler is None:
            raise RuntimeError("ProfilerSession.step() called outside its 'with' block")
        self.profiler.step()

    def key_averages(self, *args: Any, **kwargs: Any) -> Any:
        if self.profiler is None:
            raise RuntimeError("ProfilerSession has not run yet")
        return self.profiler.key_averages(*args, **kwargs)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self.profiler is not None
        if self.options.uses_cuda:
            _sync_cuda()
        self.profiler.__exit__(exc_type, exc, tb)  # type: ignore[arg-type]
        if self.profiler.profiler is None:
            # A schedule that never reached its active phase: nothing was recorded.
            self.error = "profiler recorded nothing (the schedule never reached its active steps)"
            return
        try:
            self.table = _table(self.profiler, self.row_limit)
        except Exception as err:  # pragma: no cover - defensive
            self.error = f"could not summarise profile: {_one_line(err)}"
        if self.requested_trace_path is not None:
            self.trace_path, trace_error = write_trace(self.profiler, self.requested_trace_path)
            self.error = self.error or trace_error

    def summary(self) -> ProfileSummary:
        """The same summary :func:`profile_run` gives, for reports."""
        if self.profiler is None or self.profiler.profiler is None:
            return ProfileSummary(0, [], self.table or "", self.trace_path, self.error)
        return ProfileSummary(
            iterations=max(self.profiler.step_num, 1),
            top_ops=_top_ops(self.profiler, self.row_limit),
            table=self.table or "",
            trace_path=self.trace_path,
            error=self.error,
        )


# --------------------------------------------------------------------------------------------------
# File names
# --------------------------------------------------------------------------------------------------

_MAX_STEM = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {f"COM{i}" for i in range(1, 10)} | {
    f"LPT{i}" for i in range(1, 10)
}


def safe_file_stem(test_id: str, *, max_length: int = _MAX_STEM) -> str:
    """A file name stem for a pytest node id: readable, safe on every common filesystem, deterministic
    and unique per id.

    ``tests/a/test_x.py::TestC::test_f[param]`` becomes ``tests_a_test_x.py__TestC__test_f-param-<hash>``
    where ``<hash>`` is 8 hex digits of the full id. The readable part folds characters (``/`` and
    ``::`` to ``_``, anything outside ``[A-Za-z0-9._-]`` to ``_``, trailing ``._-`` stripped), so
    ids such as ``test[a]``, ``test[a.]``, ``test[a_]`` and ``test[a-]`` share it; the hash, always
    appended, keeps their traces apart. The stem leaves room for suffixes like
    ``.pt.trace.json.gz`` under the 255-byte name limit.
    """
    if max_length < 16:
        raise ValueError("max_length must be at least 16")
    digest = hashlib.sha1(test_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    base, bracket, param = test_id.partition("[")
    if bracket and param.endswith("]"):
        param = param[:-1]

    def clean(text: str) -> str:
        text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
        return _UNSAFE.sub("_", text)

    stem = clean(base.replace("::", "__").replace("/", "_").replace("\\", "_"))
    if bracket:
        stem += "-" + clean(param)
    stem = stem.strip("._-")
    if stem.split(".")[0].upper() in _WINDOWS_RESERVED:
        stem = "_" + stem
    if not stem:
        return f"test-{digest}"
    return stem[: max_length - 9].rstrip("._-") + "-" + digest
