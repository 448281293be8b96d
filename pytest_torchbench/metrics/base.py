"""What a metric is: one object that knows everything about one kind of measurement.

Why: before, a metric's knowledge lived in five parallel tables and about ten if-chains (options,
results, judgement, session, terminal, JUnit, Markdown, HTML), so adding one touched eleven files.
Now a metric is one module under ``metrics/`` holding its value type and a :class:`Metric`
subclass; the registry (``metrics/registry.py``) lists them and everything else iterates over it
and never names a metric (as pytest-xdist keeps one scheduler per file behind a small protocol).

What a metric MUST say (the two methods are abstract, so a subclass without one cannot be
instantiated; the registry refuses a metric without a usable name or value type):

* ``name`` -- the word in ``--bench-mode``, ``--bench-fail``, the JSON and the reports;
* ``value_type`` -- the class of one measured value, with ``to_json()`` and a ``from_json(data)``
  classmethod (how a value travels to the baseline files and back);
* ``measure(fn, context)`` -- measure one benchmark's callable, return a ``value_type``;
* ``headline(value)`` -- the one number of a value that tables show and the default judge compares.

What it usually says too (plain class attributes with defaults): ``help`` (for ``--help``),
``default_limit`` (0.1, i.e. 10%), ``comparability_facts`` (environment facts that must match
its baseline's) and ``table_title``. Everything else is derived or optional, in groups below,
each with a default that suits a metric whose value has one headline number where more is worse:

* judging: ``judge`` (the headline, more than the limit above is a regression), ``stale_fails``,
  ``failure_words``, ``alternates`` with ``judge_rounds``;
* JSON: ``to_json``/``from_json`` (from ``value_type``), ``invalid_number`` (from the
  ``*_fields`` tuples, which say which numbers must be positive, whole, numeric or fractions);
* showing: ``format_value``, ``table_scale``, ``cell``, ``judged_cell``, ``cell_delta``,
  ``delta_title``, ``junit_properties``, ``figures`` (all from ``headline``; :class:`SecondsDisplay`
  for times, :class:`NamedCounts` for exact counts by name, judging included);
* the measuring process, for engines with special needs: ``seeded``, ``excludes``,
  ``measured_last``, ``fresh_code``, ``unavailable``, ``prepare_process``, ``before_first_call``,
  ``environment_facts``, ``worker_launch``, ``timer_method`` with ``measure_timer_call``;
* explaining a failed verdict: ``explains``, ``explain`` (``explains_failures`` is derived: the
  metric overrides it), ``explain_elsewhere``, ``explains_metrics`` with ``explain_other``, and
  ``confirm`` (``confirms_failures`` is derived likewise).

``docs/metrics.md`` has a complete user metric (tests/e2e/test_metric_plugin.py runs it).

Layering: a metric imports only the shared vocabulary (``vocabulary``, ``text``)
and its engine, never the results model, the gate, storage or a report.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ..common.text import finite, safe_number, safe_text
from ..common.vocabulary import (
    IMPROVEMENT,
    REGRESSION,
    UNCHANGED,
    Bars,
    Environment,
    Heading,
    Plot,
    Policy,
    Verdict,
    as_float,
    format_seconds,
    round_sig,
    time_unit,
)


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


class LineChanges(Protocol):
    """Which lines of the user's code changed since the baseline's revision (``store/changes.py``
    reads them from git). A failed verdict's call sites on such a line are shown first and tagged:
    an op whose count changed is usually called by many lines, and the one edited is the answer."""

    #: How the tag says since when, after "changed": "since HEAD~1".
    label: str

    def __call__(self, path: str, line: int) -> bool:
        """Whether ``line`` of ``path`` (absolute, or relative to the rootdir) changed."""
        ...


class Metric(abc.ABC):
    """One kind of measurement. Subclass it in a module of its own and register an instance.

    The module docstring lists what a subclass must say (four members, abstract here) and what it
    may override; the groups below follow that order.
    """

    # == Required ================================================================================

    #: The name in ``--bench-mode``, ``--bench-fail``, the JSON and the reports.
    name: ClassVar[str]
    #: The class of one measured value (``to_json()`` and a ``from_json(data)`` classmethod).
    value_type: ClassVar[type]

    @abc.abstractmethod
    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> Any:
        """Measure ``fn`` (already called once by the caller) and return a ``value_type``.
        ``context.before_region``, when set, runs right before the measured region (it seeds and
        runs pedantic's setup)."""

    @abc.abstractmethod
    def headline(self, value: Any) -> float:
        """The one number the tables show for a value (per call / per run); the default
        :meth:`judge` compares it."""

    # == Usually said ============================================================================

    #: A few words for ``--bench-mode --help``.
    help: ClassVar[str] = ""
    #: Limit when the user gives none (a fraction: 0.01 is 1%).
    default_limit: ClassVar[float] = 0.1
    #: Environment facts that must match for a value to be comparable with its baseline's.
    comparability_facts: ClassVar[tuple[str, ...]] = ()
    #: Title of the terminal table block (``{unit}`` is the block's unit, see ``table_scale``).
    table_title: ClassVar[str] = ""

    # == Judging (derived from headline) =========================================================

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        """Compare one value with its baseline's (comparable environments, limit resolved).
        The default: the headline number, more than ``limit`` above is a regression."""
        now, then = self.headline(current), self.headline(baseline)
        delta = now / then - 1.0 if then > 0 else (math.inf if now > 0 else 0.0)
        status = "regression" if delta > limit else "improvement" if delta < -limit else "unchanged"
        summary = (
            f"{self.name} {self.format_value(then)} -> {self.format_value(now)} "
            f"({format_fraction(delta)}, limit {limit * 100:g}%)"
        )
        return Verdict(key, self.name, status, then, now, limit, None, summary)

    #: With ``--bench-fail-stale``, an improvement beyond the limit fails.
    stale_fails: ClassVar[bool] = True
    #: The words of a failure message for any judged status (default: by status, "regressed"...).
    failure_words: ClassVar[str | None] = None

    #: Against a base measured in the same job, measure base and head alternately in several
    #: rounds of fresh processes and judge the pairs (:meth:`judge_rounds`): for measurements the
    #: machine moves between one minute and the next (time). Counts need one run of each.
    alternates: ClassVar[bool] = False

    def judge_rounds(
        self,
        key: str,
        rounds: Sequence[tuple[Any, Any]],
        limit: float,
        policy: Policy,
        strict: bool = False,
    ) -> Verdict:
        """Judge (base, head) values measured alternately, one pair per round (only called for a
        metric that :attr:`alternates`). ``strict``: the first rounds, where anything not plainly
        unchanged is measured again."""
        raise NotImplementedError(f"metric {self.name!r} does not alternate")

    # == JSON (derived from value_type) ==========================================================

    def to_json(self, value: Any) -> dict[str, Any]:
        return value.to_json()  # type: ignore[no-any-return]

    def from_json(self, data: Mapping[str, Any]) -> Any:
        return self.value_type.from_json(data)  # type: ignore[attr-defined]

    #: JSON fields (top level) whose numbers must be > 0: a judge divides by them, and a zero
    #: baseline would let every comparison pass. Others must be finite and >= 0.
    positive_fields: ClassVar[tuple[str, ...]] = ()
    #: JSON fields that are whole numbers >= 1.
    count_fields: ClassVar[tuple[str, ...]] = ("number_per_run",)
    #: JSON fields (top level) whose values, at any depth, are numbers: a string such as "1" or a
    #: boolean (which Python's ``float()`` would take as 1.0) there is a corrupt file, not a count.
    number_fields: ClassVar[tuple[str, ...]] = ()
    #: JSON fields (top level) that are fractions from 0 to 1 (shares of something).
    fraction_fields: ClassVar[tuple[str, ...]] = ()

    def invalid_number(self, data: Any) -> str | None:
        """What is wrong with the numbers of this metric's JSON data, or None when nothing is.

        Every number anywhere must be finite and >= 0 (times, counts and bytes cannot be
        negative), ``positive_fields`` > 0 and ``count_fields`` whole numbers >= 1. The answer
        names the field as ``metric.field[index]`` so the user can find it in the file."""
        if not isinstance(data, Mapping):
            return None  # from_json reports the shape
        for field in self.count_fields:
            if field in data:
                value = data[field]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    return f"{self.name}.{field} is {_shown(value)}; it must be a whole number >= 1"
        for field in self.number_fields:
            for path, leaf in _leaves(data.get(field, 0), f"{self.name}.{field}"):
                if isinstance(leaf, bool) or not isinstance(leaf, (int, float)):
                    return f"{path} is {_shown(leaf)}; it must be a number"
        for field in self.fraction_fields:
            value = data.get(field, 0)
            if (
                not isinstance(value, bool)
                and isinstance(value, (int, float))
                and not 0 <= value <= 1
            ):
                return f"{self.name}.{field} is {_shown(value)}; it must be a fraction from 0 to 1"
        for path, number, top_field in _numbers(data, self.name, None):
            problem = _number_problem(number, strictly_positive=top_field in self.positive_fields)
            if problem:
                return f"{path} is {_shown(number)}; {problem}"
        return None

    # == Showing (derived from headline) =========================================================

    #: What the delta in the table compares (time: "delta of the fastest call", what it judges).
    delta_title: ClassVar[str] = "delta"

    def format_value(self, number: float) -> str:
        """A finite headline number as text (Markdown, HTML, messages)."""
        return safe_number(number, "g")

    def table_scale(self, headlines: Sequence[float]) -> tuple[str, float]:
        """The unit and scale shared by one terminal table block."""
        return "", 1.0

    def cell(self, value: Any, scale: float) -> str:
        """The terminal table cell of a value (without its delta and mark)."""
        return self.format_value(as_float(self.headline(value)))

    def judged_cell(self, value: Any, scale: float) -> str | None:
        """The figure the verdict judges, shown before the delta in a compared cell, when it is
        not the one :meth:`cell` shows (time shows the median and judges the fastest call: a
        delta beside the median alone reads as the median's); None when the cell shows it."""
        return None

    def cell_delta(self, delta: float) -> str:
        """A finite delta in a terminal table cell."""
        return f" ({delta * 100:+.1f}%)" if abs(delta) >= 0.001 else f" ({delta * 100:+.2f}%)"

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        """``(name, value)`` JUnit properties of a value; ``prefix`` ends with a dot."""
        return [(f"{prefix}{self.name}.value", round(self.headline(value), 6))]

    def figures(self, current: Any, baseline: Any | None, changed: bool, top: int) -> list[Plot]:
        """The plots of this value on an HTML card (``changed``: the benchmark regressed or
        improved; unchanged ones keep their cards short)."""
        return []

    # == The measuring process (optional: for engines with special needs) ========================

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

    # == Explaining a failed verdict (optional) ==================================================

    #: When set, this metric's verdict details explain a regression of any metric of the same
    #: benchmark (Markdown folds them under this title): function counts, op counts.
    explains: ClassVar[str | None] = None
    #: Metrics whose failed verdicts this one explains from its own values of the same benchmark
    #: (:meth:`explain_other`): calls names the Python functions behind an instructions failure.
    explains_metrics: ClassVar[tuple[str, ...]] = ()

    #: Metrics whose failed regressions this one may excuse as noise, from its own judged verdict
    #: and values of the same benchmark (:meth:`excuse_other`): gpu_time excuses the wall time of a
    #: launch-bound benchmark whose device time did not change.
    excuses_metrics: ClassVar[tuple[str, ...]] = ()

    def excuse_other(
        self, failed: Verdict, own: Verdict, current: Any, baseline: Any
    ) -> str | None:
        """Why ``failed`` (a regression of one of :attr:`excuses_metrics`, judged against a saved
        baseline, not in alternated rounds, the only failure of its benchmark) is noise and not the
        code's doing, given this metric's verdict ``own`` (judged, unchanged) and its ``current``
        and ``baseline`` values of the same benchmark; None: it stands. The verdict is then listed
        as noisy, not failed, with the reason first and a short form of it in the summary."""
        return None

    def explain(
        self,
        fn: Callable[[], Any],
        context: MeasureContext,
        current: Any,
        baseline: Any,
        limit: float,
        root: Any,
        changed: LineChanges | None = None,
    ) -> list[str]:
        """The details of a failed verdict, given again with what only a re-run of ``fn`` can tell
        (op call sites). Called only for failed verdicts, and only where the judging process still
        holds ``fn``; ``root`` is the rootdir, for relative paths; ``changed`` tells the lines
        edited since the baseline's revision, where known (:func:`sites_text` uses it). Overriding
        it is what makes the session keep ``fn`` (:attr:`explains_failures`)."""
        raise NotImplementedError

    def explain_elsewhere(self, nodeid: str) -> str:
        """The detail line added instead when the test ran in another process (xdist workers,
        instructions mode's counted workers): how to get the explanation."""
        return ""

    def explain_other(self, current: Any, baseline: Any) -> list[str]:
        """Detail lines for a failed verdict of one of :attr:`explains_metrics` of the same
        benchmark, from this metric's current and baseline values (comparable ones): what changed at
        this metric's level, or that nothing did. Pure: no re-run."""
        return []

    def confirm(self, suspect: Verdict, again: Verdict | None, problem: str | None) -> Verdict:
        """Settle ``suspect`` (a failed regression; returns it settled) with ``again``, the verdict
        of the same test measured in a fresh process, or with ``problem``, why there is none.
        Overriding it is what makes a failed regression of this metric wait for that second
        measurement (:attr:`confirms_failures`): for measurements whose spread between processes
        is larger than within one."""
        raise NotImplementedError

    @property
    def explains_failures(self) -> bool:
        """Derived: the metric overrides :meth:`explain`, so the session keeps ``fn`` to re-run
        it."""
        return type(self).explain is not Metric.explain

    @property
    def confirms_failures(self) -> bool:
        """Derived: the metric overrides :meth:`confirm`, so a failed regression is measured
        again."""
        return type(self).confirm is not Metric.confirm

    def __repr__(self) -> str:
        return f"<metric {self.name}>"


class SecondsDisplay:
    """Showing for metrics whose headline is seconds (time, gpu_time): one unit per table block
    (ns, us, ms, s), the delta of the fastest call (what they judge), with one decimal."""

    delta_title: ClassVar[str] = "the fastest call (judged) and its delta"

    def format_value(self, number: float) -> str:
        return format_seconds(number)

    def table_scale(self, headlines: Sequence[float]) -> tuple[str, float]:
        return time_unit(min((v for v in headlines if finite(v) and v > 0), default=1.0))

    def cell_delta(self, delta: float) -> str:
        return f" ({delta * 100:+.1f}%)"


class NamedCounts:
    """Judging and showing for a metric whose value holds exact counts per call by name, in the
    field named as the metric (``OpsMetric.ops``, ``CallsMetric.calls``, ``KernelsMetric.kernels``):
    any count that changed beyond the limit fails (:func:`judge_counts`), the headline is their sum,
    the HTML card plots the changed counts (or, without a baseline, the largest ones)."""

    name: ClassVar[str]
    #: What one count counts, plural ("calls", "launches"), and what has counts ("op(s)").
    counted: ClassVar[str]
    things: ClassVar[str]
    #: The HTML card's title ("aten op calls per run").
    plot_title: ClassVar[str]

    def counts(self, value: Any) -> Mapping[str, float]:
        return getattr(value, self.name)  # type: ignore[no-any-return]

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        return judge_counts(
            key,
            self.name,
            self.counts(current),
            self.counts(baseline),
            limit,
            self.counted,
            self.things,
        )

    def headline(self, value: Any) -> float:
        return sum(self.counts(value).values())

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        counts = self.counts(value)
        return [
            (f"{prefix}{self.name}.{self.counted}_per_run", round_sig(sum(counts.values()))),
            (f"{prefix}{self.name}.distinct", len(counts)),
        ]

    def figures(self, current: Any, baseline: Any | None, changed: bool, top: int) -> list[Plot]:
        now, unit = self.counts(current), f"{self.counted} per run"
        if baseline is not None:
            then = self.counts(baseline)
            changes = sorted(
                ((name, now.get(name, 0.0) - then.get(name, 0.0)) for name in set(now) | set(then)),
                key=lambda i: (-abs(i[1]) if finite(i[1]) else 0.0, i[0]),
            )
            changes = [(name, change) for name, change in changes if change != 0]
            if not changes:
                return []
            return [[Heading(f"{self.plot_title}: change vs baseline"), Bars(changes[:top], unit)]]
        ordered = sorted(now.items(), key=lambda i: (-i[1] if finite(i[1]) else 0.0, i[0]))[:top]
        return [[Heading(f"{self.plot_title} (no baseline)"), Bars(ordered, unit, neutral=True)]]


def counts_to_json(counts: Mapping[str, float]) -> dict[str, float]:
    """Named per-call counts as stored (ops, kernels): sorted, rounded so baselines diff cleanly."""
    return {name: round_sig(value) for name, value in sorted(counts.items())}


def counts_from_json(data: Mapping[str, Any], field: str) -> dict[str, float]:
    """``data[field]`` read back as named counts; anything but an object is a ValueError naming
    it."""
    counts = data[field]
    if not isinstance(counts, Mapping):
        raise ValueError(f"{field}.{field} must be an object")
    return {str(name): float(value) for name, value in counts.items()}


#: Call sites on changed lines shown per changed count, at most (before the others).
_CHANGED_SITES_SHOWN = 3


def on_changed_line(site: str, changed: LineChanges | None) -> bool:
    """Whether a call site's text (``path:line in f``, maybe ``, from path:line in test``) names
    a line that ``changed`` says was edited: its inner line, the one that calls torch (the test's
    line after ``from`` is the same for every site of a benchmark). Never raises: a tag is help,
    not a verdict."""
    if changed is None:
        return False
    from ..engines.sites import chain_locations

    try:
        return any(changed(path, line) for path, line in chain_locations(site)[:1])
    except Exception:  # noqa: BLE001 - git trouble must not hide the verdict it would explain
        return False


def sites_text(
    sites: Sequence[tuple[str, float]],
    changed: LineChanges | None,
    shown: int,
    counted: bool = False,
) -> str:
    """Call sites, most calls first as given, as one phrase: those on a line edited since the
    baseline's revision come first and are tagged (``[changed since HEAD~1]``), then the others up
    to ``shown`` in all, then how many were left out. ``counted``: each site's calls (``x3``)."""
    marked = [(site, calls, on_changed_line(site, changed)) for site, calls in sites]
    edited = [item for item in marked if item[2]][:_CHANGED_SITES_SHOWN]
    others = [item for item in marked if not item[2]][: max(0, shown - len(edited))]
    parts = []
    for site, calls, flagged in edited + others:
        part = safe_text(site) + (f" x{calls:g}" if counted else "")
        if flagged and changed is not None:
            part += f" [changed {safe_text(changed.label)}]"
        parts.append(part)
    left = len(sites) - len(parts)
    return ", ".join(parts) + (f", +{left} more" if left > 0 else "")


def changed_counts(
    current: Mapping[str, float], baseline: Mapping[str, float], limit: float
) -> list[tuple[str, float, float]]:
    """(name, baseline, current) of every count that changed beyond ``limit`` (relative; a count
    that was 0 changed infinitely), by name: the exact-count metrics' rule (ops, kernels)."""
    changed = []
    for name in sorted(set(current) | set(baseline)):
        now, then = current.get(name, 0.0), baseline.get(name, 0.0)
        relative = abs(now - then) / then if then else math.inf
        if now != then and relative > limit:
            changed.append((name, then, now))
    return changed


def judge_counts(
    key: str,
    metric: str,
    current: Mapping[str, float],
    baseline: Mapping[str, float],
    limit: float,
    unit: str,
    things: str,
) -> Verdict:
    """The verdict of an exact-count metric: any count that changed beyond the limit fails,
    whichever way it went (counts are exact, so a change is never noise), each listed in ``details``
    as ``name then -> now per call``. ``unit``: "calls"; ``things``: "op(s)"."""
    changed = changed_counts(current, baseline, limit)
    total_now, total_then = sum(current.values()), sum(baseline.values())
    if changed:
        status = REGRESSION if total_now >= total_then else IMPROVEMENT
    else:
        status = UNCHANGED
    summary = (
        f"{metric} {total_then:g} -> {total_now:g} {unit} per call ({len(changed)} {things} "
        "changed)"
    )
    details = [f"{name} {then:g} -> {now:g} per call" for name, then, now in changed]
    return Verdict(
        key, metric, status, total_then, total_now, limit, None, summary, details, bool(changed)
    )


class LaunchUnavailable(RuntimeError):
    """A metric's worker processes cannot be launched here (a missing tool, an unsupported
    platform): the message says what to install or change."""


class WorkerLaunch:
    """How the processes of a metric that needs its own are launched (``Metric.worker_launch``).

    The pytest glue (``pytest/workers.py``) knows xdist and nothing of the metric: it asks this
    object for the command that starts a worker's interpreter and for the environment, gives every
    run a folder of its own (named ``folder_prefix`` + ``<uid>-<slot>``, the same on every run), and
    hands each value a worker measured to :meth:`finish` before the controller judges it. No
    pytest here, so a metric module can define one.
    """

    #: The run folder's name starts with this (workers see its path: keep it the same every run).
    folder_prefix: ClassVar[str] = "torchbench-workers-"

    def prepare(self, python: str) -> None:
        """Check the tools and build what the launches need, once per run, in the controller;
        raise :class:`LaunchUnavailable` with one clear line when that cannot be done."""

    def command(
        self, python: str, folder: Path, environ: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """``(argv, environment)`` of a worker: ``argv`` ends with the interpreter, to which the
        worker's own arguments are appended; ``folder`` is the run's folder."""
        return [python], dict(environ)

    def finish(self, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """A value as a worker sent it (JSON) -> the value to judge; runs in the controller."""
        return data

    def hand_over(
        self, entries: Mapping[str, Any] | None, folder: Path, environ: Mapping[str, str]
    ) -> dict[str, str]:
        """Runs in the controller once, after :meth:`prepare` and before any process of the run
        starts, with the entries of the baseline the run judges against (None when it has none)
        and the run's folder: the environment variables that carry what the workers need of that
        baseline (instructions: the number of calls each benchmark was counted over).

        The glue sets them in its own environment for the rest of the run, so every process the
        run starts inherits them: its workers, the base run of ``--bench-compare=REV`` and
        re-runs, which then count as the head does; it restores the environment at the end."""
        return {}

    def before_test(self, nodeid: str) -> None:
        """Runs in a launched worker before each test, before :meth:`isolate`: what the test's
        measuring needs from outside (instructions: the baseline's number of calls), read where
        what the reading allocates is not the test's."""

    def isolate(self) -> None:
        """Runs in a launched worker before its collection and before each test: make what follows
        independent of what ran before in the process (instructions: a new heap epoch, so a test's
        allocations get the same addresses whatever ran before it)."""

    def collected(self) -> None:
        """Runs in a launched worker once, after its tests are collected and before the first
        runs (instructions: what import and collection left behind is set aside for good)."""

    def describe(self, python: str) -> str:
        """The worker, for messages (``valgrind --tool=callgrind /usr/bin/python``)."""
        return python

    def check_hint(self, python: str) -> str:
        """A command that shows whether a worker can start at all, for the start-up failure line."""
        return f"{python} -c pass"


def format_fraction(delta: float) -> str:
    """A relative change in a verdict summary; ``new`` when the baseline was 0."""
    if not math.isfinite(delta):
        return "new"
    return f"{delta * 100:+.1f}%" if abs(delta) >= 0.001 else f"{delta * 100:+.3f}%"


def _numbers(value: Any, path: str, field: str | None) -> Iterator[tuple[str, Any, str | None]]:
    """(path, number, top-level field) for every number inside ``value``, depth first. Names
    from the file are shown JSON-escaped unless they are plain identifiers (they reach
    terminals)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value, field
    elif isinstance(value, Mapping):
        for key, item in value.items():
            plain = field is None and str(key).isidentifier()
            yield from _numbers(
                item,
                f"{path}.{key}" if plain else f"{path}[{json.dumps(key)}]",
                key if field is None else field,
            )
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{path}[{index}]", field)


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, value) for every value inside ``value`` that is neither an object nor a list."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(
                item, f"{path}.{key}" if str(key).isidentifier() else f"{path}[{json.dumps(key)}]"
            )
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def _number_problem(value: float, strictly_positive: bool) -> str | None:
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return "it must be a finite number"
    if not finite:
        return "it must be a finite number"
    if strictly_positive and value <= 0:
        return "it must be > 0 (a zero or negative baseline would let every comparison pass)"
    if value < 0:
        return "it must be >= 0"
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


__all__ = [
    "Metric",
    "MeasureContext",
    "Environment",
    "LaunchUnavailable",
    "NamedCounts",
    "SecondsDisplay",
    "WorkerLaunch",
    "changed_counts",
    "format_fraction",
    "judge_counts",
]
