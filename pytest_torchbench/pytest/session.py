"""The measuring side of a run: one per process that runs tests (the only one serially, each xdist
worker otherwise). It turns a callable into a BenchmarkResult by running the engines of the
session's modes. It never reads baselines: judging is the controller's (see controller.py for
why). It keeps each test's measured callables until the test's teardown: where the controller
judges in this same process (a serial run without valgrind), it hands a failed verdict back to
:meth:`BenchSession.explain`, which re-runs the callable for details only a re-run can give (op
call sites), for that test only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..common.vocabulary import Verdict
from ..engines.fresh_code import fresh_callable
from ..judging.results import BenchmarkResult, Environment, collect_environment
from ..metrics import registry
from ..metrics.explaining import Explaining, LineChanges
from ..metrics.measuring import FixedRounds, MeasureContext, Measuring
from . import children, turns
from .marker import BenchOptions
from .seeding import chain, seeder


@contextlib.contextmanager
def torch_threads(num_threads: int) -> Any:
    """Run with torch's intra-op thread count at ``num_threads``, restoring the previous count
    after.

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
    """Process state one test can leave behind for the next, captured before a test and restored
    after.

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
        from ..engines.profiler import stop_leftover_profiler

        if stop_leftover_profiler():
            messages.append(
                f"{nodeid} left a torch profiler running; pytest-torchbench stopped it so that the "
                "next tests can profile (stop it in the test: "
                "`with torch.profiler.profile() as prof:`)"
            )
        return messages


#: The share of its usual measuring time (``MeasureContext.share``) a time measurement takes in a
#: session whose every benchmark is judged on alternated rounds: the rounds' head measured it, in
#: turns with the base, and its figures replace this session's (``BaselineSource.head_measured``).
BRIEF_SHARE = 0.02


@dataclasses.dataclass(frozen=True)
class Naming:
    """Where a recording belongs: its stable key, its baseline file, and its table coordinates."""

    nodeid: str
    module: str
    label: str
    sub_label: str
    description: str


class BenchSession:
    """Measures in the current process; knows the engines, not pytest's hooks, never baselines."""

    def __init__(
        self,
        modes: tuple[str, ...],
        min_run_time: float | None = None,
        output_dir: Path | None = None,
        profile: bool = False,
        extra_environment: Callable[[], Mapping[str, Any]] | None = None,
        rootdir: str | None = None,
        own_packages: tuple[str, ...] = (),
    ) -> None:
        self.modes = modes
        self.own_packages = own_packages  # the project's packages: call sites even when installed
        #: A counting mode seeds each benchmark test before its fixtures run (plugin's setup hook).
        self.seeds_tests = any(registry.get(mode, Measuring).seeded for mode in modes)
        self.rootdir = rootdir  # source locations in results are relative to it
        self.min_run_time = min_run_time
        self.share = turns.measuring_share()  # half in a child of an alternated round
        self.output_dir = output_dir
        self.profile = profile
        self._environments: dict[tuple[str, int], Environment] = {}
        # Facts added by pytest_torchbench_environment hooks; asked for once per process.
        self._extra_environment = extra_environment
        self._extra_facts: dict[str, str] | None = None
        # What each metric measured for the running test, kept until its teardown so that a
        # failed verdict can be explained by re-running the callable (Metric.explain): only
        # where the judging process is the measuring one (a serial run without valgrind).
        self._measured: dict[tuple[str, str], tuple[Callable[[], Any], MeasureContext]] = {}

    # -- environment and baseline, computed once per process ------------------------------------

    def environment(self, metric: str, num_threads: int) -> Environment:
        cache_key = (metric, num_threads)
        env = self._environments.get(cache_key)
        if env is None:
            env = collect_environment(num_threads)
            env = env.merged(
                registry.get(metric, Measuring).environment_facts()
            )  # e.g. valgrind's version
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

    def counted_callable(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` as the counting engines should run it: a fresh copy of its code when a mode
        asks for one (``Metric.fresh_code``), so its count does not depend on earlier tests."""
        if any(registry.get(mode, Measuring).fresh_code for mode in self.modes):
            return fresh_callable(fn)
        return fn

    def before_first_call(self, fn: Callable[..., Any]) -> None:
        """Before the benchmark's own first call of ``fn`` (``Metric.before_first_call``)."""
        for mode in self.modes:
            registry.get(mode, Measuring).before_first_call(fn)

    def measure(
        self,
        fn: Callable[[], Any],
        options: BenchOptions,
        naming: Naming,
        modes: tuple[str, ...] | None = None,
        region: Region | None = None,
    ) -> BenchmarkResult:
        """Run every engine of the session's modes on ``fn`` (already called once by the caller),
        around it what ``region`` says (:class:`Region`). Modes are measured in the order given,
        those that disturb the others (``Measuring.measured_last``) last.
        """
        region = region or Region()
        result = _new_result(naming)
        ordered = sorted(
            self.modes if modes is None else modes,
            key=lambda m: registry.get(m, Measuring).measured_last,
        )
        with torch_threads(options.num_threads):  # what the fingerprint says, whatever ran before
            for mode in ordered:
                result.metrics[mode] = self._measure_one(mode, fn, options, naming, region)
                result.environments[mode] = self.environment(mode, options.num_threads)
            if self.profile and region.rounds is None:  # pedantic's profile: its counted region
                result.extras["profiles"] = [self._profile(fn, options, naming)]
        return result

    def _profile(
        self, fn: Callable[[], Any], options: BenchOptions, naming: Naming
    ) -> dict[str, Any]:
        """--bench-profile: a few more runs under torch.profiler, after (never during) measuring."""
        from ..engines import profiler

        profiler_options = profiler.ProfilerOptions.from_kwargs(**dict(options.profile or {}))
        trace_path = (
            profiler.trace_file(self.output_dir, naming.nodeid)
            if self.output_dir is not None
            else None
        )
        summary = profiler.profile_run(
            fn, iterations=3, options=profiler_options, trace_path=trace_path, top_n=5
        )
        return summary.record(
            "--bench-profile"
        )  # a trace that could not be written shows as its error line

    def add_profiles(
        self, results: list[BenchmarkResult], records: list[dict[str, Any]], naming: Naming
    ) -> None:
        """The test's ``bench_profiler`` blocks join its results (the first one's
        ``extras["profiles"]``, beside any ``--bench-profile`` record), or make a result of their
        own when the test measured nothing else: one path and one shape for every profile, so
        every report shows them."""
        if not records:
            return
        if not results:
            results.append(_new_result(naming))
        results[0].extras.setdefault("profiles", []).extend(records)

    def _measure_one(
        self,
        mode: str,
        fn: Callable[[], Any],
        options: BenchOptions,
        naming: Naming,
        region: Region,
    ) -> Any:
        metric = registry.get(mode, Measuring)  # options validated the modes
        seed = None
        if metric.seeded:
            # Seed first, so that a setup drawing random inputs draws the same ones every run.
            seed = seeder(options.seed)
        context = MeasureContext(
            options=options,
            naming=naming,
            min_run_time=self.min_run_time,
            share=self.share,
            before_region=chain(seed, region.before_region),
            seed=seed,
            setup=region.before_region if seed is not None else None,
            rootdir=self.rootdir,
            before_each=region.before_each,
            own_packages=self.own_packages,
            caller=region.caller,
            rounds=region.rounds,
            disposable=children.in_rerun(),
        )
        value = metric.measure(fn, context)
        if registry.get(mode, Explaining).explains_failures:
            self._measured[(naming.nodeid, mode)] = (fn, context)
        return value

    # -- explaining a failure (same process only) -------------------------------------------------

    def explain(
        self,
        result: BenchmarkResult,
        verdicts: list[Verdict],
        baseline: BenchmarkResult | None,
        root: Path,
        changed: LineChanges | None = None,
    ) -> tuple[list[Verdict], list[Verdict]]:
        """The failed verdicts of ``result`` with the details only a re-run can give (op call
        sites, those on lines ``changed`` since the baseline's revision tagged), where this process
        still holds the callable that was measured; and, second, the failed verdicts it could not
        explain because the test ran in another process (the controller re-runs those at the end
        of the session: ``pytest/children.py``)."""
        explained, elsewhere = [], []
        for verdict in verdicts:
            metric = registry.find(verdict.metric, Explaining)
            then = baseline.metrics.get(verdict.metric) if baseline is not None else None
            measured = self._measured.get((result.nodeid, verdict.metric))
            if (
                not verdict.failed
                or metric is None
                or not metric.explains_failures
                or then is None
                or (measured is not None and result.key != result.nodeid)
            ):
                # (a second recording of the test: the kept callable is not its own)
                explained.append(verdict)
            elif measured is None:
                elsewhere.append(verdict)
                explained.append(verdict)
            else:
                values = (result.metrics[verdict.metric], then)
                explained.append(self._explained(verdict, measured, values, (root, changed)))
                if metric.explained_apart and changed is not None and not children.in_rerun():
                    elsewhere.append(explained[-1])  # its fullest explanation: in the re-run
        return explained, elsewhere

    @staticmethod
    def _explained(
        verdict: Verdict,
        measured: tuple[Callable[[], Any], Any],
        values: tuple[Any, Any],
        where: tuple[Path, LineChanges | None],
    ) -> Verdict:
        """``verdict`` explained by its metric's re-run of the kept callable: ``values`` are this
        run's and the baseline's; ``where``: the root and the lines changed since the baseline."""
        fn, context = measured
        try:
            details = registry.get(verdict.metric, Explaining).explain(
                fn, context, *values, verdict.limit, *where
            )
        except Exception as exc:  # noqa: BLE001 - an explanation must never hide the verdict
            return verdict.with_details(
                after=[f"(could not re-run it for details: {type(exc).__name__}: {exc})"]
            )
        return verdict.replace(details=details)

    def forget(self, nodeid: str) -> None:
        """Drop what was kept for explaining ``nodeid`` (its callable holds the test's tensors)."""
        for key in [k for k in self._measured if k[0] == nodeid]:
            del self._measured[key]

    def answer_timer_call(
        self,
        method: str,
        fn: Callable[[], Any],
        number: int,
        task_spec: Any,
        options: BenchOptions,
        naming: Naming,
        before: Callable[[], Any] | None = None,
    ) -> tuple[Any, BenchmarkResult] | None:
        """A ``Timer`` method call (``collect_callgrind``) answered by the session's metric whose
        ``timer_method`` it is: (what the method returns, the result recorded); None when no
        metric of this session answers it. ``before`` runs first, uncounted (the caller's first
        call)."""
        for mode in self.modes:
            metric = registry.get(mode, Measuring)
            if metric.timer_method != method:
                continue
            if before is not None:
                before()

            seed = seeder(options.seed)
            with torch_threads(options.num_threads):
                returned, value = metric.measure_timer_call(
                    fn,
                    number,
                    task_spec,
                    MeasureContext(
                        options=options,
                        naming=naming,
                        min_run_time=self.min_run_time,
                        before_region=seed,
                        seed=seed,
                    ),
                )
            return returned, self.record_measurement(mode, value, options.num_threads, naming)
        return None

    def record_measurement(
        self, metric: str, value: Any, num_threads: int, naming: Naming
    ) -> BenchmarkResult:
        """A result measured by the user through bench_timer (their own Timer call)."""
        result = _new_result(naming)
        result.metrics[metric] = value
        result.environments[metric] = self.environment(metric, num_threads)
        return result


@dataclasses.dataclass(frozen=True)
class Region:
    """What runs around the measured calls of one benchmark, besides the seeding (the session's).

    ``before_region`` (pedantic's setup) runs before the warm-up and before the counted region,
    after the seeding; ``before_each`` before every call, warm-up and counted, outside the count
    (``MeasureContext.before_each``); ``caller`` is the test's line that called ``benchmark``;
    ``rounds``: pedantic's exact rounds, which time measures (``MeasureContext.rounds``)."""

    before_region: Callable[[], None] | None = None
    before_each: Callable[[], None] | None = None
    caller: tuple[str, int, str] | None = None
    rounds: FixedRounds | None = None


def _new_result(naming: Naming) -> BenchmarkResult:
    return BenchmarkResult(
        key=naming.nodeid,
        nodeid=naming.nodeid,
        module=naming.module,
        label=naming.label,
        sub_label=naming.sub_label,
        description=naming.description,
    )
