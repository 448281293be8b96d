"""The ``ops`` metric: aten op calls per call, counted with torch.profiler (no valgrind needed).

Op counts are exact: any change of an op's calls beyond the limit (default 0) fails, whichever
way it went, and the failure lists the ops. They also explain a regression of any other metric
of the same benchmark (an extra ``aten::clone`` explains extra instructions).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

from ..text import finite
from ..vocabulary import IMPROVEMENT, REGRESSION, UNCHANGED, Bars, Heading, Plot, Policy, Verdict, round_sig
from .base import MeasureContext, Metric


@dataclasses.dataclass
class OpsMetric:
    """aten op calls per iteration: deterministic, needs no valgrind."""

    ops: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"ops": {k: round_sig(v) for k, v in sorted(self.ops.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OpsMetric:
        ops = data["ops"]
        if not isinstance(ops, Mapping):
            raise ValueError("ops.ops must be an object")
        return cls({str(k): float(v) for k, v in ops.items()})


class Ops(Metric):
    name = "ops"
    value_type = OpsMetric
    help = "aten op counts"
    default_limit = 0.0
    comparability_facts = ("torch", "torch_git", "gpu")
    table_title = "aten op calls per call"
    explains = "aten ops (calls per run)"
    failure_words = "op counts changed"

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> OpsMetric:
        from ..engines import profiler

        return OpsMetric(profiler.count_ops(fn, by_shape=context.options.ops_by_shape,
                                            before_region=context.before_region))

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        changed = []
        for op in sorted(set(current.ops) | set(baseline.ops)):
            now, then = current.ops.get(op, 0.0), baseline.ops.get(op, 0.0)
            relative = abs(now - then) / then if then else math.inf
            if now != then and relative > limit:
                changed.append(f"{op} {then:g} -> {now:g} per call")
        total_now, total_then = sum(current.ops.values()), sum(baseline.ops.values())
        if changed:
            status = REGRESSION if total_now >= total_then else IMPROVEMENT
            failed_anyway = True
        else:
            status, failed_anyway = UNCHANGED, False
        summary = f"ops {total_then:g} -> {total_now:g} calls per call ({len(changed)} op(s) changed)"
        verdict = Verdict(key, "ops", status, total_then, total_now, limit, None, summary, changed)
        verdict.failed = failed_anyway  # any change of op counts fails: they are exact
        return verdict

    def headline(self, value: Any) -> float:
        return sum(value.ops.values())  # type: ignore[no-any-return]

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        return [(f"{prefix}ops.calls_per_run", round_sig(sum(value.ops.values()))),
                (f"{prefix}ops.distinct", len(value.ops))]

    def figures(self, current: Any, baseline: Any | None, changed: bool, top: int) -> list[Plot]:
        if baseline is not None:
            op_changes = sorted(
                ((op, current.ops.get(op, 0.0) - baseline.ops.get(op, 0.0))
                 for op in set(current.ops) | set(baseline.ops)),
                key=lambda i: (-abs(i[1]) if finite(i[1]) else 0.0, i[0]),
            )
            op_changes = [(op, change) for op, change in op_changes if change != 0]
            if not op_changes:
                return []
            return [[Heading("aten op calls per run: change vs baseline"), Bars(op_changes[:top], "calls per run")]]
        ordered = sorted(current.ops.items(), key=lambda i: (-i[1] if finite(i[1]) else 0.0, i[0]))[:top]
        return [[Heading("aten op calls per run (no baseline)"), Bars(ordered, "calls per run", neutral=True)]]

