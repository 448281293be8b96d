"""Traces and summaries for humans: ``--bench-profile`` runs, the ``bench_profiler`` session, and
the one shape both leave in the results.

Both produce a :class:`ProfileSummary`; :meth:`ProfileSummary.record` is the form that travels in a
result's ``extras["profiles"]`` (JSON, xdist, every report), so the terminal, JSON, Markdown and
HTML read one list whichever way the profile was taken. :func:`trace_file` is the one rule for
where a test's trace goes.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch.profiler import ProfilerActivity, profile

from ...common.text import safe_file_stem
from .iterations import (
    ITERATION_MARKER,
    check_counts,
    ensure_no_active_profiler,
    profiler_output_silenced,
    record,
    sync_cuda,
)
from .options import ProfilerOptions

__all__ = [
    "PROFILE_SOURCES",
    "TRACE_COMPRESS_THRESHOLD_BYTES",
    "OpStat",
    "ProfileSummary",
    "ProfilerSession",
    "profile_run",
    "trace_file",
    "write_trace",
]

#: Chrome traces above this size are gzip-compressed (``.json.gz``). Small traces stay plain JSON so
#: they can be grepped and diffed; big ones shrink ~10x, and Perfetto and chrome://tracing both open
#: ``.json.gz`` directly.
TRACE_COMPRESS_THRESHOLD_BYTES = 5 * 1024 * 1024

#: Where a profile came from, as its record says: the ``--bench-profile`` re-runs, or a
#: ``with bench_profiler`` block of the test.
PROFILE_SOURCES = ("--bench-profile", "bench_profiler")


def trace_file(output_dir: Path, test_id: str, suffix: str = "") -> Path:
    """Where a test's profiler trace goes: one name rule for ``--bench-profile`` and
    ``bench_profiler`` (``<output>/traces/<safe stem of the test id><suffix>.json``; see
    ``text.safe_file_stem``)."""
    return Path(output_dir) / "traces" / f"{safe_file_stem(test_id)}{suffix}.json"


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

    def record(self, source: str, top_n: int = 5) -> dict[str, Any]:
        """The form a profile takes in a result's ``extras["profiles"]`` (JSON-safe), whichever way
        it was taken (``source``: one of :data:`PROFILE_SOURCES`): the trace file (absolute path,
        or None with ``error`` saying why), the iterations profiled and the ``top_n`` ops by self
        CPU time (totals over those iterations). The table text stays out: it is for terminals."""
        if source not in PROFILE_SOURCES:
            raise ValueError(f"profile source must be one of {PROFILE_SOURCES}, got {source!r}")
        return {
            "source": source,
            "trace": str(self.trace_path) if self.trace_path is not None else None,
            "iterations": self.iterations,
            "top_ops": [op.to_dict() for op in self.top_ops[:top_n]],
            "error": self.error,
        }


#: Left out of ``top_ops``: ``[memory]`` is not an op, the iteration marker's self time is the
#: Python overhead of the measured callable, which would otherwise top every list, and "Activity
#: Buffer Request" is the profiler's own CUDA buffer allocation (CUPTI), which topped the list on
#: a GPU above the model's ops. All stay in the torch table text.
_SKIP_IN_TOP = ("[memory]", ITERATION_MARKER, "Activity Buffer Request")


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
                self_device_time_us=float(self_dev)
                if has_device and self_dev is not None
                else None,
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
    ``<path>.gz``. We export to a temporary file in the target folder and rename it, so a crash
    never leaves a half-written trace under the final name. (torch's own ``.gz`` support goes
    through the system temp folder and an extra copy; doing it here keeps everything on one
    filesystem.)

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
    check_counts(iterations, warmup)
    if options.schedule is not None and iterations < options.schedule.steps_needed:
        raise ValueError(
            f"profiler schedule needs at least {options.schedule.steps_needed} iterations "
            f"(skip_first + wait + warmup + active), got iterations={iterations}"
        )
    prof = record(
        fn,
        iterations=iterations,
        warmup=warmup,
        what="profile_run",
        options=options,
        step=True,
    )
    summary = ProfileSummary(
        iterations=iterations,
        top_ops=_top_ops(prof, top_n),
        table=_table(prof, top_n),
        trace_path=None,
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
        ensure_no_active_profiler("bench_profiler")
        self.profiler = profile(**self.options.profile_kwargs())
        with profiler_output_silenced(self.options.one_cycle):  # Kineto's start-up lines
            self.profiler.__enter__()
        self._entered = True
        return self

    def step(self) -> None:
        """Mark an iteration boundary (drives the schedule, labels ``ProfilerStep#N`` in traces)."""
        if self.profiler is None:
            raise RuntimeError("ProfilerSession.step() called outside its 'with' block")
        with profiler_output_silenced(
            self.options.one_cycle
        ):  # a schedule starts and stops Kineto at a step
            self.profiler.step()

    def key_averages(self, *args: Any, **kwargs: Any) -> Any:
        if self.profiler is None:
            raise RuntimeError("ProfilerSession has not run yet")
        return self.profiler.key_averages(*args, **kwargs)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self.profiler is not None
        if self.options.uses_cuda:
            sync_cuda()
        with profiler_output_silenced(self.options.one_cycle):
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
