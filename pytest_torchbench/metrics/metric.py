"""What a metric is: one object that knows everything about one kind of measurement, in five parts
by who reads them.

Why: a metric's knowledge once lived in five parallel tables and about ten if-chains, so adding one
touched eleven files; then in one class of 49 members that twelve modules each read a different
slice of. Now a metric is one module under ``metrics/`` holding its value type and a
:class:`Metric` subclass; the registry (``metrics/registry.py``) lists them, and each reader asks
it for the part it reads (``registry.get(name, Display)``), as pytest-codspeed's ``Instrument`` and
xdist's ``Scheduling`` are small protocols their callers hold:

==========================  ============================================  =====================
part (module)               what it says                                  read by
==========================  ============================================  =====================
``Identity`` (identity)     name, value type, headline, JSON, validation  store, results model
``Measuring`` (measuring)   ``measure`` and the measuring process         the session, workers
``Judging`` (judge)         default limit, ``judge``, alternated rounds   the gate
``Explaining`` (explaining) explain, excuse, confirm a failed verdict     the gate, child runs
``Display`` (display)       table cells, JUnit, Markdown, HTML cards      the reports
==========================  ============================================  =====================

What a metric MUST say (``measure`` and ``headline`` are abstract, so a subclass without one
cannot be instantiated; the registry refuses a metric without a usable name or value type):
``name``, ``value_type`` (a class with ``to_json()`` and a ``from_json(data)`` classmethod),
``measure(fn, context)`` and ``headline(value)``. What it usually says too: ``help``,
``default_limit`` (0.1, i.e. 10%), ``comparability_facts`` and ``table_title``. Everything else
has a default that suits a metric whose value has one headline number where more is worse;
:class:`~.display.SecondsDisplay` shows times, :class:`NamedCounts` judges and shows exact
counts by name. ``docs/metrics.md`` has a complete user metric of eight members
(``tests/e2e/test_metric_plugin.py`` runs it).

Layering: a metric imports only the shared vocabulary (``common/``) and its engine, never the
results model, the gate, storage or a report.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..common.text import finite
from ..common.vocabulary import Bars, Heading, Plot, Policy, Verdict, round_sig
from .display import Display
from .explaining import Explaining
from .judge import Judging, judge_counts
from .measuring import MeasureContext, Measuring


class Metric(Measuring, Judging, Explaining, Display, abc.ABC):
    """One kind of measurement. Subclass it in a module of its own and register an instance.

    Its members are those of its parts (the module docstring lists them); a subclass overrides
    any of them flatly, as class attributes and methods."""

    @abc.abstractmethod
    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> Any:
        """Measure ``fn`` (already called once by the caller) and return a ``value_type``."""

    @abc.abstractmethod
    def headline(self, value: Any) -> float:
        """The one number the tables show for a value; the default judge compares it."""


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
