"""The ``ops`` metric: aten op calls per call, counted with torch.profiler (no valgrind needed).

Op counts are exact: any change of an op's calls beyond the limit (default 0) fails, whichever
way it went, and the failure lists the ops. They also explain a regression of any other metric
of the same benchmark (an extra ``aten::clone`` explains extra instructions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..common.text import safe_text
from .explaining import LineChanges, sites_text
from .judge import changed_counts
from .measuring import MeasureContext
from .metric import Metric, NamedCounts, counts_from_json, counts_to_json

#: Call sites shown per changed op (those on edited lines first, then the most frequent).
_SITES_SHOWN = 2


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
        never called is new; of an op it called, each site shows its calls, and the sites on lines
        edited since the baseline's revision come first, tagged (``changed``)."""
        from ..engines import profiler
        from ..engines.sites import own_dirs

        sites = profiler.op_call_sites(
            fn,
            root=root,
            by_shape=context.options.ops_by_shape,
            hooks=profiler.CallHooks(
                before_region=context.before_region, before_each=context.before_each
            ),
            own=own_dirs(context.own_packages),
            caller=context.caller,
        )
        lines = []
        for op, then, now in changed_counts(current.ops, baseline.ops, limit):
            line = f"{op} {then:g} -> {now:g} per call"
            found = sites.get(op, [])
            if found:
                # The baseline keeps counts, not sites: where the op was called before too, each
                # site's calls now (x3) and the tag of an edited line tell the line whose calls
                # changed.
                counted = then > 0 and len(found) > 1
                line += f" ({sites_text(found, changed, _SITES_SHOWN, counted=counted)})"
            lines.append(line)
        return lines

    def explain_elsewhere(self, nodeid: str) -> str:
        return (
            f"call sites: not found (the test ran in another process, and re-running it did not "
            f"give them); `pytest {safe_text(nodeid)} --bench-mode=ops` with the same "
            "--bench-compare, without -n, shows them"
        )
