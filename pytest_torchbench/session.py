"""The measuring side of a run: one per process that runs tests (the only one serially, each xdist
worker otherwise). It turns a callable into a BenchmarkResult by running the engines of the session's
modes. It never reads baselines: judging is the controller's (see controller.py for why).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from .marker import BenchOptions
from .results import BenchmarkResult, Environment, InstructionsMetric, MemoryMetric, OpsMetric, TimeMetric, collect_environment


#: Bump when a change to the counting procedure moves counts (see environment()).
COUNTING_METHOD = "per-region-toggle-in-loop/2"

#: Tells a counted worker where its Callgrind dumps go (set in the counted environment).
DUMP_DIR_VARIABLE = "TORCHBENCH_CALLGRIND_DIR"


def _dump_dir() -> str:
    dump_dir = os.environ.get(DUMP_DIR_VARIABLE)
    if not dump_dir:
        from .engines import callgrind

        raise callgrind.NotUnderValgrind(
            "instruction counting runs in workers that pytest-torchbench launches under valgrind; "
            "this process was not (run pytest with --bench-mode=instructions)"
        )
    return dump_dir


def count_instructions(fn: Callable[[], Any], *, number: int | None, warmup: int | None, task_spec: Any,
                       before_warmup: Callable[[], None] | None = None) -> Any:
    """Count ``fn`` in this counted worker; torch's CallgrindStats back (total over ``number``).

    For ``bench_timer(...).collect_callgrind()``, whose caller wants the stats object itself: the
    dump is read here, under valgrind. Benchmarks go through :func:`count_region_for_controller`.
    """
    from .engines import callgrind

    return callgrind.measure(fn, number=number, warmup=warmup, task_spec=task_spec, out_dir=_dump_dir(),
                             before_warmup=before_warmup)


def count_region_for_controller(fn: Callable[[], Any], *, number: int | None, warmup: int | None,
                                num_threads: int,
                                before_warmup: Callable[[], None] | None = None,
                                before_region: Callable[[], None] | None = None) -> InstructionsMetric:
    """Count ``fn`` and hand the unread dump to the controller (``InstructionsMetric.dump``).

    Why: reading a dump (a pure-Python parse of ~60 KB) cost ~0.4 s per benchmark under valgrind,
    most of the marginal cost of a small benchmark; the controller reads it natively in ~20 ms.
    ``number``/``warmup`` None: chosen from a probe call (``callgrind.plan_calls``).
    """
    from .engines import callgrind

    region = callgrind.count_region(fn, number=number, warmup=warmup, out_dir=_dump_dir(),
                                    num_threads=num_threads, before_warmup=before_warmup,
                                    before_region=before_region)
    return InstructionsMetric.pending(str(region.dump), region.number, region.warmup)


@contextlib.contextmanager
def torch_threads(num_threads: int) -> Any:
    """Run with torch's intra-op thread count at ``num_threads``, restoring the previous count after.

    Why: the fingerprint records the benchmark's ``num_threads``; a count left by an earlier test
    (``torch.set_num_threads(4)`` in its body) must not be what the engines measure with.
    """
    import torch

    previous = torch.get_num_threads()
    if previous != num_threads:
        torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


class IsolationGuard:
    """Process state one test can leave behind for the next, captured before a test and restored after.

    torch's thread count (a benchmark calling ``torch.set_num_threads``) and a torch profiler left
    running (which makes every later profiler fail). Costs nothing while torch is not imported.
    """

    def __init__(self) -> None:
        torch = sys.modules.get("torch")
        self.num_threads: int | None = torch.get_num_threads() if torch is not None else None

    def restore(self, nodeid: str) -> list[str]:
        """Put the state back; one message per thing the test ``nodeid`` left behind."""
        torch = sys.modules.get("torch")
        if torch is None:
            return []
        messages = []
        if self.num_threads is not None and torch.get_num_threads() != self.num_threads:
            torch.set_num_threads(self.num_threads)
        from .engines.profiler import stop_leftover_profiler

        if stop_leftover_profiler():
            messages.append(
                f"{nodeid} left a torch profiler running; pytest-torchbench stopped it so that the "
                "next tests can profile (stop it in the test: `with torch.profiler.profile() as prof:`)"
            )
        return messages


@dataclasses.dataclass(frozen=True)
class Naming:
    """Where a recording belongs: its stable key, its baseline file, and its table coordinates."""

    nodeid: str
    module: str
    label: str
    sub_label: str
    description: str


def profile_extras(summary: Any) -> dict[str, Any]:
    """The part of a profile summary that travels with results (JSON): top ops and the trace."""
    return {
        "trace": str(summary.trace_path) if summary.trace_path else None,
        "iterations": summary.iterations,
        "top_ops": [op.to_dict() for op in summary.top_ops],
        "error": summary.error,
    }


def trace_file(output_dir: Path, nodeid: str, suffix: str = "") -> Path:
    """Where a test's profiler trace goes: one name rule for --bench-profile and bench_profiler."""
    from .engines.profiler import safe_file_stem

    return output_dir / "traces" / f"{safe_file_stem(nodeid)}{suffix}.json"


class BenchSession:
    """Measures in the current process; knows the engines, not pytest's hooks, never baselines."""

    def __init__(
        self,
        modes: tuple[str, ...],
        min_run_time: float | None = None,
        output_dir: Path | None = None,
        profile: bool = False,
        extra_environment: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.modes = modes
        self.min_run_time = min_run_time
        self.output_dir = output_dir
        self.profile = profile
        self._environments: dict[tuple[str, int], Environment] = {}
        # Facts added by pytest_torchbench_environment hooks; asked for once per process.
        self._extra_environment = extra_environment
        self._extra_facts: dict[str, str] | None = None

    # -- environment and baseline, computed once per process ------------------------------------

    def environment(self, metric: str, num_threads: int) -> Environment:
        cache_key = (metric, num_threads)
        env = self._environments.get(cache_key)
        if env is None:
            env = collect_environment(num_threads)
            if metric == "instructions":
                from .engines import callgrind

                env = env.merged(callgrind.counting_fingerprint())
                # How regions are counted (toggles, warm-up, per-region instrumentation) moves
                # counts too: a baseline from another method is not comparable, not a regression.
                env = env.merged({"counting_method": COUNTING_METHOD})
            env = env.merged(self.extra_facts())
            self._environments[cache_key] = env
        return env

    def extra_facts(self) -> dict[str, str]:
        """The user's facts (pytest_torchbench_environment), merged in hook order, once."""
        if self._extra_facts is None:
            facts: dict[str, str] = {}
            if self._extra_environment is not None:
                facts = {str(k): str(v) for k, v in self._extra_environment().items()}
            self._extra_facts = facts
        return self._extra_facts

    # -- measuring -------------------------------------------------------------------------------

    def measure(self, fn: Callable[[], Any], options: BenchOptions, naming: Naming,
                modes: tuple[str, ...] | None = None,
                before_region: Callable[[], None] | None = None) -> BenchmarkResult:
        """Run every engine of the session's modes on ``fn`` (already called once by the caller).

        Counting modes call ``before_region`` (e.g. pedantic's setup) before their warm-up and
        before the counted region, after seeding with the marker's ``seed``.
        """
        result = _new_result(naming)
        with torch_threads(options.num_threads):  # what the fingerprint says, whatever ran before
            for mode in self.modes if modes is None else modes:
                metric = self._measure_one(mode, fn, options, naming, before_region)
                result.metrics[mode] = metric
                result.environments[mode] = self.environment(mode, options.num_threads)
            if self.profile:
                result.extras["profile"] = self._profile(fn, options, naming)
        return result

    def _profile(self, fn: Callable[[], Any], options: BenchOptions, naming: Naming) -> dict[str, Any]:
        """--bench-profile: a few more runs under torch.profiler, after (never during) measuring."""
        from .engines import profiler

        profiler_options = profiler.ProfilerOptions.from_kwargs(**dict(options.profile or {}))
        trace_path = trace_file(self.output_dir, naming.nodeid) if self.output_dir is not None else None
        summary = profiler.profile_run(fn, iterations=3, options=profiler_options, trace_path=trace_path, top_n=5)
        return profile_extras(summary)  # a trace that could not be written shows as its error line

    def time_spec(self, options: BenchOptions, naming: Naming) -> Any:
        """The time engine's settings from the marker (pytest-benchmark's keywords mapped in)."""
        from .engines import walltime

        defaults = walltime.TimeSpec()
        return walltime.TimeSpec(
            label=naming.label,
            sub_label=naming.sub_label,
            description=naming.description,
            num_threads=options.num_threads,
            threshold=options.threshold,
            min_run_time=options.min_run_time or self.min_run_time or defaults.min_run_time,
            max_run_time=options.max_run_time,
            block_time=max(defaults.block_time, options.min_time or 0.0),
            min_replicates=max(defaults.min_replicates, options.min_rounds or 0),
            timer=options.timer,
        )

    def _measure_one(self, mode: str, fn: Callable[[], Any], options: BenchOptions, naming: Naming,
                     before_region: Callable[[], None] | None = None) -> Any:
        if mode == "time":
            from .engines import walltime

            spec = self.time_spec(options, naming)
            if options.time_warmup:
                _time_warm_up(fn, options.warmup_iterations, spec.max_run_time)
            return TimeMetric.from_measurement(walltime.measure(fn, spec))
        from .seeding import chain, seeder

        # Seed first, so that a setup drawing random inputs draws the same ones every run.
        seed = seeder(options.seed)
        if mode == "instructions":
            # Seeded once, before the warm-up (see callgrind.count_region: re-seeding right before
            # the counted region moved Python-heavy counts); pedantic's setup before both.
            return count_region_for_controller(fn, number=options.number, warmup=options.warmup,
                                               num_threads=options.num_threads, before_warmup=seed,
                                               before_region=before_region)
        before_region = chain(seed, before_region)
        if mode == "ops":
            from .engines import profiler

            return OpsMetric(profiler.count_ops(fn, by_shape=options.ops_by_shape, before_region=before_region))
        if mode == "memory":
            from .engines import profiler

            peaks = profiler.peak_memory(fn, before_region=before_region)
            return MemoryMetric({
                device: int(value) for device, value in
                (("cpu", peaks.get("cpu_peak_bytes")), ("cuda", peaks.get("cuda_peak_bytes")))
                if value is not None
            })
        raise AssertionError(f"unknown mode {mode!r}")  # options validated the modes

    def record_measurement(self, metric: str, value: Any, num_threads: int, naming: Naming) -> BenchmarkResult:
        """A result measured by the user through bench_timer (their own Timer call)."""
        result = _new_result(naming)
        result.metrics[metric] = value
        result.environments[metric] = self.environment(metric, num_threads)
        return result


def _time_warm_up(fn: Callable[[], Any], max_calls: int | None, max_time: float) -> None:
    """pytest-benchmark's ``warmup=True``: call ``fn`` up to ``warmup_iterations`` times (default
    100,000, as there) but for no longer than ``max_time``, before timing."""
    import time

    deadline = time.perf_counter() + max_time
    for _ in range(100_000 if max_calls is None else max_calls):
        fn()
        if time.perf_counter() >= deadline:
            break


def _new_result(naming: Naming) -> BenchmarkResult:
    return BenchmarkResult(key=naming.nodeid, nodeid=naming.nodeid, module=naming.module, label=naming.label,
                           sub_label=naming.sub_label, description=naming.description)
