"""The ``ops`` metric: aten op calls per call, counted with torch.profiler (no valgrind needed).

Op counts are exact: any change of an op's calls beyond the limit (default 0) fails, whichever
way it went, and the failure lists the ops. They also explain a regression of any other metric
of the same benchmark (an extra ``aten::clone`` explains extra instructions).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..common.text import safe_text
from .explaining import LineChanges, on_changed_line, sites_text
from .judge import changed_counts
from .measuring import MeasureContext
from .metric import Metric, NamedCounts, counts_from_json, counts_to_json

#: Call sites shown per changed op (those on edited lines first, then the most frequent).
_SITES_SHOWN = 2
#: Sites whose count moved shown per changed op, at most (the largest moves first).
_MOVED_SHOWN = 3


@runtime_checkable
class LineHistory(Protocol):
    """:class:`LineChanges` that can also give the base's text of a changed file and where its
    lines are now (``store/changes.py``): what the base's counts per site need."""

    label: str

    def __call__(self, path: str, line: int) -> bool: ...

    def changed_files(self) -> frozenset[str]:
        """Absolute paths of the files changed since the base that were there in the base."""
        ...

    def base_text(self, path: str) -> str | None:
        """The base's text of ``path``, or None."""
        ...

    def head_line(self, path: str, line: int) -> int | None:
        """The checkout's line that the base's ``line`` of ``path`` is now (None: removed)."""
        ...


class SiteMove(NamedTuple):
    """One call site of an op, in the base and now: ``removed``, a line of the base's code that
    is no longer there (``site`` then has the base's line number)."""

    site: str
    removed: bool
    then: int
    now: int


def site_moves(
    now: Sequence[tuple[str, int]],
    before: Sequence[tuple[str, bool, int]],
    totals: tuple[float, float],
) -> list[SiteMove] | None:
    """Each site's calls in the base (``before``: site, whether removed, calls) and now, or None
    when the sites do not add up to the op's counts (``totals``: the baseline's, this run's):
    then the base's code run in place of the checkout's did not reproduce the base."""
    then_total, now_total = totals
    if sum(c for _, _, c in before) != then_total or sum(c for _, c in now) != now_total:
        return None
    moves: dict[tuple[str, bool], list[int]] = {}
    for site, removed, calls in before:
        moves.setdefault((site, removed), [0, 0])[0] += calls
    for site, calls in now:
        moves.setdefault((site, False), [0, 0])[1] += calls
    return [SiteMove(site, removed, then, now) for (site, removed), (then, now) in moves.items()]


def _in_line_order(site: str) -> list[tuple[int, str]]:
    return [(int(part), "") if part.isdigit() else (0, part) for part in re.split(r"(\d+)", site)]


def moves_text(moves: Sequence[SiteMove], changed: LineChanges | None, shown: int) -> str:
    """The sites whose calls moved, the largest moves first (``+2``), tagged when on a line edited
    since the base (or removed since), then those that call the op as before (``x12``), ``shown``
    in all at least, then how many were left out."""
    moved = sorted(
        (m for m in moves if m.then != m.now),
        key=lambda m: (-abs(m.now - m.then), _in_line_order(m.site)),
    )[:_MOVED_SHOWN]
    same = sorted((m for m in moves if m.then == m.now and m.now), key=lambda m: -m.now)
    same = same[: max(0, shown - len(moved))]
    since = f" {safe_text(changed.label)}" if changed is not None else ""
    parts = []
    for move in moved:
        part = f"{safe_text(move.site)} {move.now - move.then:+d}"
        if move.removed:
            part += f" [removed{since}]"
        elif on_changed_line(move.site, changed):
            part += f" [changed{since}]"
        parts.append(part)
    text = ", ".join(parts)
    if same:
        text += "; as before: " + ", ".join(f"{safe_text(m.site)} x{m.now:d}" for m in same)
    left = sum(1 for m in moves if m.then != m.now or m.now) - len(moved) - len(same)
    return text + (f", +{left} more" if left > 0 else "")


@dataclasses.dataclass
class OpsMetric:
    """aten op calls per iteration: deterministic, needs no valgrind."""

    ops: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"ops": counts_to_json(self.ops)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OpsMetric:
        return cls(counts_from_json(data, "ops"))


class Ops(NamedCounts, Metric):
    name = "ops"
    counted = "calls"
    things = "op(s)"
    plot_title = "aten op calls per run"
    value_type = OpsMetric
    help = "aten op counts"
    default_limit = 0.0
    number_fields = ("ops",)
    comparability_facts = ("torch", "torch_git", "gpu")
    table_title = "aten op calls per call"
    explains = "aten ops (calls per run)"
    failure_words = "op counts changed"

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> OpsMetric:
        from ..engines import profiler

        return OpsMetric(
            profiler.count_ops(
                fn,
                by_shape=context.options.ops_by_shape,
                before_region=context.before_region,
                before_each=context.before_each,
            )
        )

    explained_apart = True  # the base's code for how each site moved: in a re-run only

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
        """The changed ops, each with the user's lines that call it now: one more seeded run of
        ``fn`` with its torch calls tagged (``profiler.op_call_sites``), for a failed benchmark
        only. An op no longer called has no call site to show. Every site of an op the baseline
        never called is new. Of an op it called, each site shows how its calls moved (``+2``, the
        largest moves first, then those as before) where the base's sites are known
        (:meth:`_base_sites`), else its calls now (x3), the sites on lines edited since the
        baseline's revision first, tagged (``changed``)."""
        changes = changed_counts(current.ops, baseline.ops, limit)
        sites = self._sites(fn, context, root)
        before = (
            self._base_sites(fn, context, root, changed)
            if any(then > 0 and sites.get(op) for op, then, _ in changes)
            else None
        )
        lines = []
        for op, then, now in changes:
            line = f"{op} {then:g} -> {now:g} per call"
            found = sites.get(op, [])
            moves = (
                site_moves(found, before.get(op, []), (then, now))
                if before is not None and then > 0 and found
                else None
            )
            if moves is not None:
                line += f" ({moves_text(moves, changed, _SITES_SHOWN)})"
            elif found:
                # The baseline keeps counts, not sites: where the op was called before too, each
                # site's calls now (x3) and the tag of an edited line tell the line whose calls
                # changed.
                counted = then > 0 and len(found) > 1
                line += f" ({sites_text(found, changed, _SITES_SHOWN, counted=counted)})"
            lines.append(line)
        return lines

    @staticmethod
    def _sites(
        fn: Callable[[], Any], context: MeasureContext, root: Any
    ) -> dict[str, list[tuple[str, int]]]:
        """``profiler.op_call_sites`` of one more seeded run of ``fn``."""
        from ..engines import profiler
        from ..engines.sites import own_dirs

        return profiler.op_call_sites(
            fn,
            root=root,
            by_shape=context.options.ops_by_shape,
            hooks=profiler.CallHooks(
                before_region=context.before_region, before_each=context.before_each
            ),
            own=own_dirs(context.own_packages),
            caller=context.caller,
        )

    def _base_sites(
        self, fn: Callable[[], Any], context: MeasureContext, root: Any, changed: LineChanges | None
    ) -> dict[str, list[tuple[str, bool, int]]] | None:
        """The base's sites of each op: ``fn`` run once more with the base's code of the files
        changed since (``engines.base_code``), each site named by the checkout's line it is now
        (site, whether its line was removed since, calls); None when that cannot be run (no git
        history, no changed function ran, CPython before 3.11, the run raised) or should not (a
        process whose later tests still count: ``MeasureContext.disposable``). Whether they are
        the base's is up to :func:`site_moves` (they must add up to the baseline's count)."""
        from ..engines.base_code import base_code
        from ..engines.sites import relocated, skipped_dirs

        # Only where the process ends after this run: the base's code may leave what it computed
        # (caches, memos, module globals) for the tests after it.
        if not isinstance(changed, LineHistory) or not context.disposable:
            return None
        # never torch's, pytest's or this plugin's own code (a checkout of the plugin itself)
        skipped = tuple(os.path.realpath(folder) + os.sep for folder in skipped_dirs())
        try:
            paths = [
                path
                for path in changed.changed_files()
                if path.endswith(".py") and not os.path.realpath(path).startswith(skipped)
            ]
            with base_code(paths, changed.base_text) as swapped:
                found = self._sites(fn, context, root) if swapped else {}
            return {
                op: [(*relocated(site, changed.head_line), calls) for site, calls in entries]
                for op, entries in found.items()
            } or None
        except Exception:  # noqa: BLE001 - the base's code may not run with the checkout's
            return None

    def explain_elsewhere(self, nodeid: str) -> str:
        return (
            f"call sites: not found (the test ran in another process, and re-running it did not "
            f"give them); `pytest {safe_text(nodeid)} --bench-mode=ops` with the same "
            "--bench-compare, without -n, shows them"
        )
