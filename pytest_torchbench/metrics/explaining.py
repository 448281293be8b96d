"""A metric's explaining part: what it adds to a failed verdict beyond the judge's summary, and how
it settles a suspect one.

A metric may explain its own failure by re-running the benchmark (op call sites: :meth:`explain`),
explain another metric's failure from its own values (calls behind instructions:
:meth:`explain_other`), excuse another's as noise (:meth:`excuse_other`), or ask for a second
measurement in a fresh process before a regression stands (:meth:`confirm`). Read by the gate's
explaining steps and the child runs (``pytest/children.py``), never by reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

from ..common.text import safe_text
from ..common.vocabulary import Verdict
from .identity import Identity
from .measuring import MeasureContext


class LineChanges(Protocol):
    """Which lines of the user's code changed since the baseline's revision (``store/changes.py``
    reads them from git). A failed verdict's call sites on such a line are shown first and tagged:
    an op whose count changed is usually called by many lines, and the one edited is the answer."""

    #: How the tag says since when, after "changed": "since HEAD~1".
    label: str

    def __call__(self, path: str, line: int) -> bool:
        """Whether ``line`` of ``path`` (absolute, or relative to the rootdir) changed."""
        ...


class Explaining(Identity):
    """What a metric adds to a failed verdict (all optional: a metric that overrides nothing here
    leaves its verdicts as its judge wrote them)."""

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

    #: Its fullest explanation runs code whose effects outlive it (ops: the base revision's code
    #: of the changed files, for how each call site moved), so it is given only in a process that
    #: ends after (``MeasureContext.disposable``): a run whose later tests still count explains at
    #: once without it, then once more in the end-of-session re-run.
    explained_apart: ClassVar[bool] = False

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
        return type(self).explain is not Explaining.explain

    @property
    def confirms_failures(self) -> bool:
        """Derived: the metric overrides :meth:`confirm`, so a failed regression is measured
        again."""
        return type(self).confirm is not Explaining.confirm


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
