"""A metric's measuring part: how it measures one benchmark's callable, and what the process it
measures in needs (seeding, a fresh copy of the code, huge pages, a launch under valgrind).

Read by the measuring session (``pytest/session.py``), the options (which modes may run together)
and the workers' launch (``pytest/workers.py``); a metric that needs processes of its own says how
to start them with an ``engines.launch.WorkerLaunch``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..engines.launch import WorkerLaunch
from .identity import Identity


@dataclasses.dataclass(frozen=True)
class MeasureContext:
    """What a metric's ``measure`` gets besides the callable: the marker's validated options
    (``marker.BenchOptions``, duck-typed here: metrics sit below the pytest glue), where the
    recording belongs (``session.Naming``: nodeid, label, sub_label, description), the session's
    ``--bench-min-run-time`` and the hook to run before warm-up and counted region (already
    seeded for counting metrics)."""

    options: Any
    naming: Any
    min_run_time: float | None = None
    #: The share of its usual measuring time a measurement takes (time: of its least and most run
    #: time): 1, except in a child of an alternated round, where each benchmark is measured in
    #: several rounds on both sides, each pair at the same moments of the machine.
    share: float = 1.0
    before_region: Callable[[], None] | None = None
    #: The two parts of ``before_region`` for an engine that wants them apart: the seeding alone,
    #: and the caller's own setup (pedantic's) alone. Instructions mode seeds only before its
    #: warm-up: re-seeding right before the counted region allocates there, and the counts of
    #: Python-heavy code then moved from run to run.
    seed: Callable[[], None] | None = None
    setup: Callable[[], None] | None = None
    #: pytest's root directory: source locations a metric stores are relative to it (deterministic).
    rootdir: str | None = None
    #: pedantic's setup when the benchmark has one: every call (warm-up and counted) gets its own
    #: arguments from it, made outside the count, as pytest-benchmark runs it before every round.
    #: Why: calls that share one setup's state measure the state the earlier calls left (a lock
    #: benchmark counted about a third of its one-call count when its calls shared one setup).
    before_each: Callable[[], None] | None = None
    #: The project's own top-level packages (``--bench-sites``, ini ``bench_sites``, else read from
    #: the rootdir's ``pyproject.toml`` and ``src/``): their lines are call sites even when they
    #: are installed into site-packages, as CI installs the library it tests.
    own_packages: tuple[str, ...] = ()
    #: (path, line, function) of the test's line that called ``benchmark``: a call site names it
    #: when the stack of a re-run no longer reaches the test (``sites.locate``).
    caller: tuple[str, int, str] | None = None
    #: ``benchmark.pedantic``'s exact rounds, for a metric that times (time measures these rounds
    #: of the target instead of calibrating its own calls of ``fn``); counting metrics count
    #: ``fn`` as always.
    rounds: FixedRounds | None = None
    #: This process ends after its run (a confirmation or explanation re-run): what an
    #: explanation leaves behind in it (the base revision's code run for call sites, with what it
    #: cached) reaches no later measurement that counts.
    disposable: bool = False


@dataclasses.dataclass(frozen=True)
class FixedRounds:
    """pytest-benchmark's ``pedantic`` sampling, chosen by the benchmark's author: ``rounds``
    blocks of ``iterations`` calls of ``target`` after ``warmup_rounds`` untimed ones, with
    arguments from ``arguments()`` before every round and ``teardown`` after it."""

    target: Callable[..., Any]
    arguments: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]
    rounds: int
    iterations: int
    warmup_rounds: int = 0
    teardown: Callable[..., Any] | None = None


class Measuring(Identity):
    """How a metric measures: :meth:`measure` (required) and, for engines with special needs,
    what the measuring process must do around it."""

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> Any:
        """Measure ``fn`` (already called once by the caller) and return a ``value_type``.
        ``context.before_region``, when set, runs right before the measured region (it seeds and
        runs pedantic's setup). Required: abstract on :class:`~.metric.Metric`."""
        raise NotImplementedError

    #: Counting metrics are seeded before warm-up and counted region (marker ``seed=``).
    seeded: ClassVar[bool] = True
    #: Modes this one cannot run with in the same session, each with why (for the usage error);
    #: one side of a pair says it. A plain tuple of names gives a generic why.
    excludes: ClassVar[Mapping[str, str] | tuple[str, ...]] = {}
    #: Measured after the session's other metrics of the same test: measuring it changes how the
    #: interpreter runs the benchmark's code afterwards (calls: a profile hook over the warm-up and
    #: the counted calls), and the others must count as they would without it.
    measured_last: ClassVar[bool] = False
    #: Measure a fresh, never-run copy of the benchmarked Python function
    #: (:func:`engines.fresh_code.fresh_callable`): for counts that must not depend on how often
    #: other tests already ran (and CPython specialised) the same code.
    fresh_code: ClassVar[bool] = False
    #: The ``torch.utils.benchmark.Timer`` method whose call this metric answers when it is among
    #: the session's modes (``bench_timer(...).collect_callgrind()`` for instructions), through
    #: :meth:`measure_timer_call`.
    timer_method: ClassVar[str | None] = None

    def unavailable(self) -> str | None:
        """Why this metric cannot measure in this process (one line for the usage error, exit 4),
        or None when it can. Asked once, when the mode is selected."""
        return None

    def prepare_process(self) -> None:
        """Set up this process for measuring, when this metric is among the session's modes.

        Called before the first conftest is imported (built-in modes named on the command line)
        and again at configure, in the controller and in every xdist worker, so it must be
        idempotent: for what must be in place before the code under test allocates (time: huge
        pages for large tensors, which torch decides at the process's first allocation)."""

    def before_first_call(self, fn: Callable[..., Any]) -> None:
        """Runs in the measuring process before the benchmark's own first, uncounted call of ``fn``
        (instructions: a ``torch.compile``d ``fn`` compiles there, so instrumentation is paused)."""

    def environment_facts(self) -> Mapping[str, str]:
        """Facts this metric adds to the process's fingerprint (e.g. the valgrind version)."""
        return {}

    def worker_launch(self) -> WorkerLaunch | None:
        """How to launch the processes this metric measures in, when it cannot measure in an
        ordinary one (instructions: under valgrind). The pytest glue (``pytest/workers.py``) then
        runs the tests in xdist workers started that way, serially in one. None: any process will
        do."""
        return None

    def measure_timer_call(
        self, fn: Callable[[], Any], number: int, task_spec: Any, context: MeasureContext
    ) -> tuple[Any, Any]:
        """Answer :attr:`timer_method` for ``fn``: (what the Timer method returns, the value
        recorded)."""
        raise NotImplementedError(f"metric {self.name!r} answers no Timer method")
