"""The ``compile`` metric: what torch.compile does with a benchmark, as a deterministic gate.

Per benchmark: the graphs dynamo compiled, its graph breaks (each with its reason and the user's
``path:line``) and its recompilations (each with the guard that failed), from the first call
through the warm-up, in a fresh dynamo state (``engines/dynamo.py`` says how and why). These are
decisions of the compiler, not timings: the same code, inputs and torch version give the same
counts on every run and machine, so any change fails. More graph breaks, recompilations or
graphs, or a break for a reason the baseline did not have, is a regression; fewer is an
improvement (a stale baseline with ``--bench-fail-stale``). A break that only moved to another
line (code edited above it) is shown, not failed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..common.text import safe_number, safe_text
from ..common.vocabulary import (
    IMPROVEMENT,
    REGRESSION,
    UNCHANGED,
    Bars,
    Heading,
    Plot,
    Policy,
    Verdict,
)
from .measuring import MeasureContext
from .metric import Metric

#: Events kept per kind in a baseline (distinct ones; their counts are always complete).
_MAX_EVENTS = 50
#: Characters of a stored reason or place: a measured reason is cut at 300 (``engines/dynamo``),
#: plus a few words; longer text in a file was written by hand and would flood every report.
_MAX_TEXT = 1000


def _events_to_json(events: list[tuple[str, str, int]]) -> list[dict[str, Any]]:
    return [{"reason": reason, "where": where, "count": count} for where, reason, count in events]


def _events_from_json(data: Any, field: str) -> list[tuple[str, str, int]]:
    if not isinstance(data, list):
        raise ValueError(f"compile.{field} must be a list")
    if len(data) > _MAX_EVENTS:
        raise ValueError(
            f"compile.{field} has {len(data)} entries; a save stores at most {_MAX_EVENTS}"
        )
    events = []
    for item in data:
        if (
            not isinstance(item, Mapping)
            or not isinstance(item.get("reason"), str)
            or not isinstance(item.get("where"), str)
        ):
            raise ValueError(f"compile.{field} entries need a text 'reason' and 'where'")
        for name in ("reason", "where"):
            if len(item[name]) > _MAX_TEXT:
                raise ValueError(
                    f"compile.{field} entries: {name!r} is {len(item[name])} characters; "
                    f"a save stores at most {_MAX_TEXT}"
                )
        count = item.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"compile.{field} count must be a whole number >= 1, got {count!r}")
        events.append((item["where"], item["reason"], count))
    return sorted(events)


@dataclasses.dataclass
class CompileMetric:
    """Graphs, graph breaks and recompilations of a benchmark's calls after a dynamo reset.

    ``breaks`` and ``recompiles`` are ``(where, reason, count)`` sorted, ``where`` being
    ``path:line`` relative to the root directory: deterministic text."""

    graphs: int
    graph_breaks: int
    recompiles: int
    calls: int
    breaks: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    recompile_reasons: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "graphs": self.graphs,
            "graph_breaks": self.graph_breaks,
            "recompiles": self.recompiles,
            "calls": self.calls,
            "breaks": _events_to_json(self.breaks[:_MAX_EVENTS]),
            "recompile_reasons": _events_to_json(self.recompile_reasons[:_MAX_EVENTS]),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CompileMetric:
        counts = {}
        for field in ("graphs", "graph_breaks", "recompiles", "calls"):
            value = data[field]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"compile.{field} must be a whole number >= 0, got {value!r}")
            counts[field] = value
        return cls(
            **counts,
            breaks=_events_from_json(data.get("breaks", []), "breaks"),
            recompile_reasons=_events_from_json(
                data.get("recompile_reasons", []), "recompile_reasons"
            ),
        )

    def cell(self) -> str:
        return (
            f"{self.graphs} graph{'s' if self.graphs != 1 else ''}, {self.graph_breaks} "
            f"break{'s' if self.graph_breaks != 1 else ''}, {self.recompiles} "
            f"recompile{'s' if self.recompiles != 1 else ''}"
        )


def _described(event: tuple[str, str, int]) -> str:
    where, reason, count = event
    return safe_text(f"{reason} at {where}" + (f" (x{count})" if count > 1 else ""))


def _by_reason(events: list[tuple[str, str, int]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, reason, count in events:
        counts[reason] = counts.get(reason, 0) + count
    return counts


class Compile(Metric):
    name = "compile"
    value_type = CompileMetric
    help = "torch.compile graphs, graph breaks and recompiles"
    default_limit = 0.0
    comparability_facts = ("torch", "torch_git")
    count_fields = ("calls",)
    number_fields = ("graphs", "graph_breaks", "recompiles")
    table_title = "torch.compile: graphs, graph breaks, recompiles"
    explains = "torch.compile (graph breaks, recompiles)"

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> CompileMetric:
        from ..engines import dynamo

        warmup = context.options.warmup
        counts = dynamo.count_compiles(
            fn,
            warmup=dynamo.DEFAULT_WARMUP if warmup is None else warmup,
            before_first=context.before_region,
            rootdir=context.rootdir,
            before_each=context.before_each,
        )
        return CompileMetric(
            graphs=counts.graphs,
            graph_breaks=len(counts.breaks),
            recompiles=len(counts.recompiles),
            calls=counts.calls,
            breaks=[(event.where, event.reason, n) for event, n in dynamo.grouped(counts.breaks)],
            recompile_reasons=[
                (event.where, event.reason, n) for event, n in dynamo.grouped(counts.recompiles)
            ],
        )

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        worse = better = False
        parts: list[str] = []
        details: list[str] = []
        for label, now, then, events_now, events_then in (
            (
                "graph breaks",
                current.graph_breaks,
                baseline.graph_breaks,
                current.breaks,
                baseline.breaks,
            ),
            (
                "recompiles",
                current.recompiles,
                baseline.recompiles,
                current.recompile_reasons,
                baseline.recompile_reasons,
            ),
            ("graphs", current.graphs, baseline.graphs, [], []),
        ):
            reasons_now, reasons_then = _by_reason(events_now), _by_reason(events_then)
            new_reasons = [
                reason
                for reason in reasons_now
                if reasons_now[reason] > reasons_then.get(reason, 0)
            ]
            changed = now != then and (then == 0 or abs(now - then) / then > limit)
            if not changed and not new_reasons:
                continue
            # Graphs falling to 0: the code no longer compiles at all (a skipped frame, say).
            lost = label == "graphs" and now == 0 < then
            worse = worse or now > then or bool(new_reasons) or lost
            better = better or (now < then and not lost)
            appeared = [e for e in events_now if e[1] in new_reasons]
            first = f": {_described(appeared[0])}" if appeared else ""
            parts.append(f"{label} {then} -> {now}{first}")
            singular = label[:-1]
            details.extend(f"+ {singular}: {_described(e)}" for e in appeared)
            gone = [e for e in events_then if reasons_then[e[1]] > reasons_now.get(e[1], 0)]
            details.extend(f"- {singular}: {_described(e)}" for e in gone)
        # Same reasons, other lines (code edited above a break): shown, not judged.
        moved = sorted(set(current.breaks) - set(baseline.breaks))
        if not parts and moved:
            details.extend(f"moved: {_described(e)}" for e in moved)
        if parts:
            status = REGRESSION if worse else IMPROVEMENT if better else UNCHANGED
            summary = "; ".join(parts)
        else:
            status = UNCHANGED
            summary = current.cell()
        return Verdict(
            key,
            self.name,
            status,
            float(self.headline(baseline)),
            float(self.headline(current)),
            limit,
            None,
            summary,
            details,
        )

    def headline(self, value: Any) -> float:
        """Graph breaks plus recompilations: what a compiled model's author wants at 0."""
        return float(value.graph_breaks + value.recompiles)

    def cell(self, value: Any, scale: float) -> str:
        return str(value.cell())

    def format_value(self, number: float) -> str:
        """The headline in Markdown and HTML columns, saying what it counts (a bare "0 | 0" read
        as nothing compiled)."""
        return f"{safe_number(number, 'g')} breaks + recompiles"

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        return [
            (f"{prefix}compile.graphs", value.graphs),
            (f"{prefix}compile.graph_breaks", value.graph_breaks),
            (f"{prefix}compile.recompiles", value.recompiles),
        ]

    def figures(self, current: Any, baseline: Any | None, changed: bool, top: int) -> list[Plot]:
        if not current.breaks and not (baseline is not None and baseline.breaks):
            return []
        shown = [
            (f"{reason} at {where}", float(count)) for where, reason, count in current.breaks[:top]
        ]
        return [[Heading("torch.compile graph breaks"), Bars(shown, "breaks", neutral=True)]]
