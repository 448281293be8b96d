"""What tests hold: the ``benchmark`` callable and the ``bench_timer`` Timer factory.

Both feed an ItemRecorder (one per test) that the pytest glue judges and reports after the test's
call phase. With no bench option they only run the code once, so a normal ``pytest`` stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import textwrap
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..common.statistics import RoundStats
from ..judging.results import BenchmarkResult, TimeMetric
from ..metrics.measuring import FixedRounds
from .marker import BenchOptions
from .session import BenchSession, Naming, Region

if TYPE_CHECKING:
    from torch.utils.benchmark import Measurement, Timer

    _TimerBase = Timer
else:
    _TimerBase = object  # torch's Timer is only imported on first use (_recording_timer_class)


class ItemRecorder:
    """The results one test produced, with keys made unique and stable within the test."""

    def __init__(self, naming: Naming, options: BenchOptions) -> None:
        self.naming = naming
        self.options = options
        self.results: list[BenchmarkResult] = []
        self.measured_body = False
        # pytest-benchmark's benchmark.group / benchmark.extra_info: read when the test ends,
        # because suites set them before or after measuring.
        self.group: str | None = options.group
        self.extra_info: dict[str, Any] = {}

    def key_for(self, description: str | None) -> str:
        """The test's node id, plus ' [description]' when the recording names itself.

        Keys are baseline identities: they must not depend on how many recordings came before,
        except to separate unnamed repeats (``#2``, ``#3``), which is the best that can be done.
        """
        base = self.naming.nodeid if not description else f"{self.naming.nodeid} [{description}]"
        taken = {r.key for r in self.results}
        key, n = base, 1
        while key in taken:
            n += 1
            key = f"{base} #{n}"
        return key

    def add(self, result: BenchmarkResult, description: str | None = None) -> BenchmarkResult:
        result.key = self.key_for(description)
        self.results.append(result)
        return result

    def finish(self) -> None:
        """Stamp group and extra_info (as they are when the test ends) on every result."""
        group = "" if self.group is None else str(self.group)
        extra_info = plain_json(self.extra_info)
        for result in self.results:
            result.group = group
            result.extra_info = dict(extra_info)


def plain_json(value: Any) -> Any:
    """``extra_info`` as plain JSON: numbers, strings, booleans, None, lists and string-keyed
    objects stay; anything else (a dtype, a torch.Size, NaN) becomes its ``str``, so results,
    the JSON report and baselines can always be written and read back."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    return str(value)


class FixtureAlreadyUsed(Exception):
    """The ``benchmark`` fixture was used a second time in one test (pytest-benchmark's name)."""


class StatsUnavailable(AttributeError):
    """``benchmark.stats`` read where there are no wall times. An AttributeError, so that
    ``getattr(benchmark, "stats", None)`` still works; with a message that says what to use."""


class BenchmarkStats:
    """What ``benchmark.stats`` is in time mode: pytest-benchmark's ``Metadata`` shape, with its
    ``Stats`` (:class:`~pytest_torchbench.common.statistics.RoundStats`) at ``.stats``, so suites
    that read ``benchmark.stats.stats.mean`` or ``benchmark.stats["median"]`` run unchanged."""

    def __init__(self, fixture: BenchmarkFixture, times: list[float], iterations: int) -> None:
        self.name = fixture.name
        self.fullname = fixture.fullname
        self.group = fixture.group
        self.param = fixture.param
        self.params = fixture.params
        self.extra_info = fixture.extra_info
        self.iterations = iterations
        self.stats = RoundStats(times)

    def __getitem__(self, key: str) -> Any:
        return getattr(self.stats, key)

    def __bool__(self) -> bool:
        return bool(self.stats)


def _check_pedantic(
    target: Any, rounds: Any, warmup_rounds: Any, iterations: Any, has_setup: bool
) -> None:
    """pytest-benchmark's refusals of ``pedantic``'s arguments, with its words."""
    if not callable(target):
        raise TypeError(f"benchmark.pedantic(target, ...) needs a callable, got {target!r}")
    for name, value, minimum in (
        ("iterations", iterations, 1),
        ("rounds", rounds, 1),
        ("warmup_rounds", warmup_rounds, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(
                f"benchmark.pedantic: {name}={value!r} must be an integer >= {minimum}"
            )
    if iterations > 1 and has_setup:
        raise ValueError(
            "benchmark.pedantic: can't use more than 1 `iterations` with a `setup` function"
        )


@dataclasses.dataclass(frozen=True)
class _PedanticArguments:
    """The arguments of one call: those given, or what ``setup`` returns (None keeps those)."""

    setup: Callable[[], Any] | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def __call__(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.setup is None:
            return self.args, self.kwargs
        made = self.setup()
        if not made:
            return self.args, self.kwargs
        if self.args or self.kwargs:
            raise TypeError(
                "benchmark.pedantic: can't use `args` or `kwargs` if `setup` returns the arguments"
            )
        try:
            new_args, new_kwargs = made
        except (TypeError, ValueError):
            raise TypeError(
                f"benchmark.pedantic: setup must return None or (args, kwargs), got {made!r}"
            ) from None
        return tuple(new_args), dict(new_kwargs)


@dataclasses.dataclass(frozen=True)
class _PedanticCall:
    """One ``benchmark.pedantic`` call's target and its pytest-benchmark settings."""

    target: Callable[..., Any]
    arguments: _PedanticArguments
    teardown: Callable[..., Any] | None
    rounds: int
    warmup_rounds: int
    iterations: int


class BenchmarkFixture:
    """``benchmark(fn, *args, **kwargs)``: measure ``fn`` in the session's modes, return its result.

    It also speaks pytest-benchmark's fixture API, so such suites run unchanged: ``pedantic``,
    ``extra_info``, ``group``, ``name``, ``fullname``, ``param``, ``params``, ``enabled``.
    """

    def __init__(
        self, recorder: ItemRecorder, session: BenchSession | None, node: Any = None
    ) -> None:
        self._recorder = recorder
        self._session = session
        self.name: str = getattr(node, "name", recorder.naming.label)
        self.fullname: str = recorder.naming.nodeid
        callspec = getattr(node, "callspec", None)
        self.param: str | None = callspec.id if callspec is not None else None
        self.params: dict[str, Any] | None = dict(callspec.params) if callspec is not None else None
        self._used: str | None = (
            None  # how it was used: "benchmark(...)" or "benchmark.pedantic(...)"
        )
        self._result: BenchmarkResult | None = None  # what the use measured

    @property
    def stats(self) -> BenchmarkStats | None:
        """pytest-benchmark's statistics of the wall times (seconds per call) in time mode.

        None before the fixture was used and in a plain run, as pytest-benchmark's is before use
        and when disabled. In the counting modes there are no times: reading it is an error that
        says where the counts are."""
        if self._session is None or self._used is None:
            return None
        measured = self._result.metrics.get("time") if self._result is not None else None
        if isinstance(measured, TimeMetric):
            return BenchmarkStats(self, measured.times, measured.number_per_run)
        modes = ",".join(self._session.modes)
        if "time" in self._session.modes:
            return None  # the use raised before it was measured
        raise StatsUnavailable(
            "benchmark.stats holds wall-time statistics, measured with --bench-mode=time only; "
            f"this run (--bench-mode={modes}) counts instead: judge the counts with --bench-fail "
            "or the marker's limits=, and read them in the --bench-json file or the run's table"
        )

    def _use(self, how: str) -> None:
        """Once per test, as in pytest-benchmark, and in every mode.

        Why: a second call's result would be keyed by its position (``#2``), so adding or moving a
        call re-keys the others and their baselines; and a test that passes in a plain run must
        not fail only when measured, or the reverse. Several measurements in one test are
        ``bench_timer`` calls, each with its own ``description``."""
        if self._used is not None:
            raise FixtureAlreadyUsed(
                "the benchmark fixture can be used once per test (as in pytest-benchmark); it was "
                f"used as {self._used} already in {self.fullname}: measure each thing in a test of "
                "its own (parametrize it), or with bench_timer(stmt, globals=..., description=...) "
                "once per thing"
            )
        self._used = how

    @property
    def enabled(self) -> bool:
        """False in a plain ``pytest`` run: ``fn`` is only called once."""
        return self._session is not None

    @property
    def disabled(self) -> bool:
        return self._session is None

    @property
    def group(self) -> str | None:
        return self._recorder.group

    @group.setter
    def group(self, value: str | None) -> None:
        self._recorder.group = value

    @property
    def extra_info(self) -> dict[str, Any]:
        return self._recorder.extra_info

    @extra_info.setter
    def extra_info(self, value: dict[str, Any]) -> None:
        self._recorder.extra_info = value

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not callable(fn):
            raise TypeError(f"benchmark(fn, *args, **kwargs) needs a callable, got {fn!r}")
        self._use("benchmark(...)")
        if self._session is not None:
            self._session.before_first_call(fn)
        result = fn(*args, **kwargs)  # the real call: its exceptions fail the test as usual
        if self._session is None:
            return result

        # A partial, not a closure: no bytecode of ours between the loop and the user's code.
        # A closure's code is shared by every test; its first call in a worker was inside the
        # first region, where its quickening (callgrind.quickening) was counted, and under -n
        # which test that is depends on the scheduling.
        target = functools.partial(self._session.counted_callable(fn), *args, **kwargs)
        measured = self._session.measure(
            target,
            self._recorder.options,
            self._recorder.naming,
            region=Region(caller=_callers_line()),
        )
        self._result = self._recorder.add(measured)
        return result

    def pedantic(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        setup: Callable[[], Any] | None = None,
        teardown: Callable[..., Any] | None = None,
        rounds: int = 1,
        warmup_rounds: int = 0,
        iterations: int = 1,
    ) -> Any:
        """pytest-benchmark's ``pedantic``, with its meaning in time mode and a counting one
        otherwise.

        Time mode: ``warmup_rounds`` untimed rounds, then exactly ``rounds`` timed rounds of
        ``iterations`` calls; ``setup`` (which may return ``(args, kwargs)``) runs before and
        ``teardown`` after every round, outside the timing. Counting modes (instructions, ops,
        memory): the usual counted region (marker ``number``/``warmup``); ``setup`` runs before
        every call, warm-up and counted, never inside the count (``teardown`` after each call's
        arguments are done with), so each call measures the state its own setup made, as each
        round does in pytest-benchmark. Returns the result of the first (real) call.
        """
        _check_pedantic(target, rounds, warmup_rounds, iterations, setup is not None)
        # after the checks: a call refused for its arguments measured nothing
        self._use("benchmark.pedantic(...)")
        call = _PedanticCall(
            target=target,
            arguments=_PedanticArguments(setup, tuple(args), dict(kwargs or {})),
            teardown=teardown,
            rounds=rounds,
            warmup_rounds=warmup_rounds,
            iterations=iterations,
        )
        call_args, call_kwargs = call.arguments()
        if self._session is not None:
            self._session.before_first_call(target)
        result = target(*call_args, **call_kwargs)  # the real call: its exceptions fail the test
        if teardown is not None:
            teardown(*call_args, **call_kwargs)
        if self._session is None:
            return result
        measured = self._pedantic_time(call)
        counting = tuple(mode for mode in self._session.modes if mode != "time")
        if counting or self._session.profile:  # with no counting mode, measure only profiles
            counted = self._pedantic_counted(call, counting, (call_args, call_kwargs))
            if measured is None:
                measured = counted
            else:
                measured.metrics.update(counted.metrics)
                measured.environments.update(counted.environments)
                measured.extras.update(counted.extras)
        if measured is not None:
            self._result = self._recorder.add(measured)
        return result

    def _pedantic_time(self, call: _PedanticCall) -> Any:
        """Time mode's exact rounds of ``call`` (None outside time mode), measured by the time
        metric as every time is (``MeasureContext.rounds``)."""
        session = self._session
        assert session is not None
        if "time" not in session.modes:
            return None
        rounds = FixedRounds(
            target=call.target,
            arguments=call.arguments,
            rounds=call.rounds,
            iterations=call.iterations,
            warmup_rounds=call.warmup_rounds,
            teardown=call.teardown,
        )
        options, naming = self._recorder.options, self._recorder.naming
        return session.measure(call.target, options, naming, ("time",), Region(rounds=rounds))

    def _pedantic_counted(
        self,
        call: _PedanticCall,
        counting: tuple[str, ...],
        first: tuple[tuple[Any, ...], dict[str, Any]],
    ) -> Any:
        """The counting modes' region of ``call``: each call with the arguments its own setup
        made (``first``: those of the real call), torn down after."""
        session, options, naming = self._session, self._recorder.options, self._recorder.naming
        assert session is not None
        teardown, has_setup = call.teardown, call.arguments.setup is not None
        state: dict[str, Any] = {"args": first[0], "kwargs": first[1], "used": False}

        def refresh() -> None:
            """Before each call: the previous call's arguments torn down, new ones set up."""
            if state["used"] and teardown is not None:
                teardown(*state["args"], **state["kwargs"])
            state["args"], state["kwargs"] = call.arguments()
            state["used"] = True

        fresh_target = session.counted_callable(call.target)

        def with_fresh_arguments() -> Any:
            return fresh_target(*state["args"], **state["kwargs"])

        # Without a setup the arguments never change: a partial, no bytecode of ours in the
        # region (see __call__). With one, this closure's first call in a worker is in a region.
        counted = (
            with_fresh_arguments
            if has_setup
            else functools.partial(fresh_target, *first[0], **first[1])
        )
        region = Region(before_each=refresh if has_setup else None, caller=_callers_line())
        result = session.measure(counted, options, naming, modes=counting, region=region)
        if teardown is not None and (not has_setup or state["used"]):
            teardown(*state["args"], **state["kwargs"])
        return result


def _callers_line() -> tuple[str, int, str] | None:
    """The line of the user's code that called the ``benchmark`` method calling this: the first
    frame outside torch, pytest and this plugin (``sites.user_frame``). A call site inside an
    installed package names it, as the re-run for call sites happens after the test returned."""
    import sys

    from ..engines.sites import skipped_dirs, user_frame

    return user_frame(sys._getframe(2), skipped_dirs())


class _RecordingTimerMethods(_TimerBase):
    """What ``RecordingTimer`` adds to torch's Timer, defined without importing torch: the class
    that derives from the Timer is built on first use (:func:`_recording_timer_class`)."""

    def __init__(
        self, *args: Any, _recorder: ItemRecorder, _session: BenchSession | None, **kwargs: Any
    ) -> None:
        naming = _recorder.naming
        kwargs.setdefault("label", naming.label)
        kwargs.setdefault("sub_label", naming.sub_label or None)
        self._explicit_description = kwargs.get("description")
        kwargs.setdefault("description", naming.description or None)
        kwargs.setdefault("num_threads", _recorder.options.num_threads)
        super().__init__(*args, **kwargs)
        self._recorder = _recorder
        self._session = _session

    # -- helpers -------------------------------------------------------------------------------

    def _naming(self) -> Naming:
        spec = self._task_spec
        return dataclasses.replace(
            self._recorder.naming,
            label=spec.label or "",
            sub_label=spec.sub_label or "",
            description=spec.description or "",
        )

    def _statement(self) -> Callable[[], None]:
        """The statement as a callable for the counting engines.

        It runs at module level in its own namespace, as torch's collect_callgrind does, so
        ``x = x + 1`` style statements behave as they do under Timer.
        """
        namespace = dict(self._globals)
        spec = self._task_spec
        exec(compile(spec.setup or "pass", "<bench_timer setup>", "exec"), namespace)
        code = compile(spec.stmt or "pass", "<bench_timer stmt>", "exec")

        def run() -> None:
            exec(code, namespace)

        return run

    def _counting_modes(self) -> bool:
        return self._session is not None and "time" not in self._session.modes

    def _record_time(self, measurement: Measurement) -> Measurement:
        assert self._session is not None
        naming = self._naming()
        result = self._session.record_measurement(
            "time",
            TimeMetric.from_measurement(measurement),
            self._task_spec.num_threads,
            naming,
        )
        other_modes = tuple(m for m in self._session.modes if m != "time")
        if other_modes or self._session.profile:  # e.g. --bench-mode=time,ops: count it too
            options = dataclasses.replace(
                self._recorder.options, num_threads=self._task_spec.num_threads
            )
            counted = self._session.measure(self._statement(), options, naming, modes=other_modes)
            result.metrics.update(counted.metrics)
            result.environments.update(counted.environments)
            result.extras.update(counted.extras)
        self._recorder.add(result, self._explicit_description)
        return measurement

    def _count(self) -> Measurement:
        assert self._session is not None
        statement = self._statement()
        statement()
        options = dataclasses.replace(
            self._recorder.options, num_threads=self._task_spec.num_threads
        )
        result = self._session.measure(statement, options, self._naming())
        self._recorder.add(result, self._explicit_description)
        return super().timeit(1)

    # -- Timer API -----------------------------------------------------------------------------

    def timeit(self, number: int = 1000000) -> Measurement:
        if self._session is None:
            return super().timeit(1)
        if self._counting_modes():
            return self._count()
        return self._record_time(super().timeit(number))

    def blocked_autorange(self, callback: Any = None, min_run_time: float = 0.2) -> Measurement:
        if self._session is None:
            return super().timeit(1)
        if self._counting_modes():
            return self._count()
        return self._record_time(
            super().blocked_autorange(callback=callback, min_run_time=min_run_time)
        )

    def adaptive_autorange(
        self,
        threshold: float = 0.1,
        *,
        min_run_time: float = 0.01,
        max_run_time: float = 10.0,
        callback: Any = None,
    ) -> Measurement:
        if self._session is None:
            return super().timeit(1)
        if self._counting_modes():
            return self._count()
        return self._record_time(
            super().adaptive_autorange(
                threshold,
                min_run_time=min_run_time,
                max_run_time=max_run_time,
                callback=callback,
            )
        )

    def collect_callgrind(
        self,
        number: int = 100,
        *,
        repeats: int | None = None,
        collect_baseline: bool = True,
        retain_out_file: bool = False,
    ) -> Any:
        """In instructions mode: counted in this session's valgrind process (seconds, where
        torch's own starts a valgrind and imports torch under it per call),
        by the metric whose ``timer_method`` this is.

        Otherwise torch's own collect_callgrind runs (a fresh valgrind per call) unless no bench
        option is given, where the statement runs once and empty stats come back.
        """
        answered = None
        if self._session is not None:
            statement = self._statement()
            answered = self._session.answer_timer_call(
                "collect_callgrind",
                statement,
                number,
                self._task_spec,
                dataclasses.replace(
                    self._recorder.options, num_threads=self._task_spec.num_threads
                ),
                self._naming(),
                before=statement,
            )
        if answered is not None:  # a metric of the session answers it (instructions mode)
            stats, result = answered
            self._recorder.add(result, self._explicit_description)
            return stats if repeats is None else (stats,) * repeats
        if self._session is None:
            super().timeit(1)
            from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import (
                CallgrindStats,
                FunctionCounts,
            )

            empty = FunctionCounts((), inclusive=False)
            stats = CallgrindStats(self._task_spec, number, False, empty, empty, empty, empty, None)
            return stats if repeats is None else (stats,) * repeats
        return super().collect_callgrind(
            number,
            repeats=repeats,
            collect_baseline=collect_baseline,
            retain_out_file=retain_out_file,
        )


@functools.cache
def _recording_timer_class() -> type:
    """Built on first use: importing torch (most of a second) must not be paid by a plain
    ``pytest`` run whose tests never touch the bench fixtures (the plugin is loaded by every
    pytest run)."""
    from torch.utils.benchmark import Timer

    class RecordingTimer(_RecordingTimerMethods, Timer):
        """A ``torch.utils.benchmark.Timer`` whose measurements are recorded for the test.

        In time mode the timing methods run for real; in instructions (or ops, memory) mode every
        measuring method counts the statement with the session's engines instead, so one test file
        serves every mode. With no bench option each method runs the statement once.
        """

    return RecordingTimer


def __getattr__(name: str) -> Any:
    if name == "RecordingTimer":
        return _recording_timer_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_timer_factory(recorder: ItemRecorder, session: BenchSession | None) -> Callable[..., Any]:
    def bench_timer(
        stmt: str = "pass",
        setup: str = "pass",
        globals: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        return _recording_timer_class()(
            textwrap.dedent(stmt),
            textwrap.dedent(setup),
            globals=globals,
            _recorder=recorder,
            _session=session,
            **kwargs,
        )

    return bench_timer


class ProfilerFixture:
    """What ``bench_profiler`` hands out: enter it directly, or call it with options first.

    Each profiled block gets its own trace file (``<test>.json``, then ``<test>-2.json``...), named
    from the test id so any parametrisation gives a safe, stable file name.
    """

    def __init__(self, defaults: dict[str, Any], output_dir: Any, nodeid: str) -> None:
        self._defaults = defaults
        self._output_dir = output_dir
        self._nodeid = nodeid
        self._sessions: list[Any] = []
        self._current: Any = None

    def __call__(self, **options: Any) -> Any:
        from ..engines.profiler import ProfilerOptions, ProfilerSession, trace_file

        suffix = "" if not self._sessions else f"-{len(self._sessions) + 1}"
        session = ProfilerSession(
            ProfilerOptions.from_kwargs(**{**self._defaults, **options}),
            trace_path=trace_file(self._output_dir, self._nodeid, suffix),
        )
        self._sessions.append(session)
        return session

    def __enter__(self) -> Any:
        self._current = self()
        return self._current.__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        self._current.__exit__(*exc_info)
        self._current = None

    def errors(self) -> list[str]:
        return [s.error for s in self._sessions if s.error]

    def records(self) -> list[dict[str, Any]]:
        """The profiled blocks in the shape results carry (``ProfileSummary.record``)."""
        return [
            s.summary().record("bench_profiler") for s in self._sessions if s.profiler is not None
        ]
