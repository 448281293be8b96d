"""The ``calls`` metric: Python function calls per call, by function (``engines/pycalls.py``).

Call counts are exact and do not move with the process's layout (what makes instruction counts of
Python-heavy code move: CPython's type attribute cache), so, as for op counts, any change of a
function's calls beyond the limit (default 0) fails, whichever way it went, and the failure lists
the functions, each with the line that calls it in the user's code. They also explain an
instructions or time regression of the same benchmark at the Python level
(:meth:`Calls.explain_other`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..common.text import safe_text
from .explaining import LineChanges, sites_text
from .judge import changed_counts
from .measuring import MeasureContext
from .metric import Metric, NamedCounts, counts_from_json, counts_to_json

#: Call sites shown per changed function (the most frequent first).
_SITES_SHOWN = 2
#: Functions named in the explanation of another metric's failure (the largest changes first).
_EXPLAINED = 8


@dataclasses.dataclass
class CallsMetric:
    """Python function starts per call, by ``file:qualified name``."""

    calls: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"calls": counts_to_json(self.calls)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CallsMetric:
        return cls(counts_from_json(data, "calls"))


class Calls(NamedCounts, Metric):
    name = "calls"
    counted = "calls"
    things = "function(s)"
    plot_title = "Python function calls per run"
    value_type = CallsMetric
    help = "Python function calls"
    default_limit = 0.0
    # The Python functions a call runs are the interpreter's (its standard library) and torch's;
    # what is left out of the counts (calls_method) decides them too.
    comparability_facts = ("python", "torch", "torch_git", "gpu", "calls_method")
    table_title = "Python function calls per call"
    explains = "Python functions (calls per run)"
    failure_words = "Python calls changed"
    #: An instructions or time failure of the same benchmark names the Python functions whose
    #: calls changed (or says that none did): the level a library author changes code at.
    explains_metrics = ("instructions", "time")
    #: The profile hook over its warm-up and counted calls moved the instruction count of a
    #: 48-key lookup measured after it (docs/design/calls.md): measured after the others.
    measured_last = True

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> CallsMetric:
        from ..engines import pycalls

        return CallsMetric(
            pycalls.count_calls(
                fn,
                before_region=context.before_region,
                before_each=context.before_each,
                root=context.rootdir,
            )
        )

    def environment_facts(self) -> Mapping[str, str]:
        from ..engines import pycalls

        return {"calls_hook": pycalls.HOOK, "calls_method": pycalls.METHOD}

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
        """The changed functions, each with where it starts and the user's lines that call it now
        (those on lines edited since the baseline's revision first, tagged: ``changed``):
        one more seeded call of ``fn`` with every call's site looked up (``pycalls.call_sites``),
        for a failed benchmark only. A function no longer called has no call site to show."""
        from ..engines import pycalls
        from ..engines.sites import own_dirs

        found = pycalls.call_sites(
            fn,
            root=Path(root),
            before_region=context.before_region,
            before_each=context.before_each,
            own=own_dirs(context.own_packages),
            caller=context.caller,
        )
        lines = []
        for name, then, now in changed_counts(current.calls, baseline.calls, limit):
            line = f"{safe_text(name)} {then:g} -> {now:g} per call"
            sites = found.sites.get(name, [])
            where = []
            if name in found.defined:
                where.append(f"defined at {safe_text(found.defined[name])}")
            if sites:
                where.append(f"called from {sites_text(sites, changed, _SITES_SHOWN)}")
            if where:
                line += f" ({'; '.join(where)})"
            lines.append(line)
        return lines

    def explain_elsewhere(self, nodeid: str) -> str:
        return (
            f"call sites: not found (the test ran in another process, and re-running it did not "
            f"give them); `pytest {safe_text(nodeid)} --bench-mode=calls` with the same "
            "--bench-compare, without -n, shows them"
        )

    def explain_other(self, current: Any, baseline: Any) -> list[str]:
        """Lines for another metric's failure of the same benchmark: the Python functions whose
        calls changed, the largest changes first, or that none did (then the change is below the
        Python level: in C, in torch's kernels, or in how the interpreter ran the same calls)."""
        changes = changed_counts(current.calls, baseline.calls, 0.0)
        if not changes:
            total = sum(current.calls.values())
            return [
                f"Python calls: unchanged ({total:g} per call in {len(current.calls)} "
                "function(s)): the same Python functions ran as often as in the baseline"
            ]
        changes.sort(key=lambda item: (-abs(item[2] - item[1]), item[0]))
        rows = [
            (round(now - then), f"{safe_text(name)} ({then:g} -> {now:g})")
            for name, then, now in changes
        ]
        width = max(len(f"{change:+,}") for change, _ in rows[:_EXPLAINED])
        lines = [
            f"Python functions whose calls changed (calls per call, {len(changes)} function(s)):"
        ]
        lines += [f"{change:>+{width},}  {label}" for change, label in rows[:_EXPLAINED]]
        if len(rows) > _EXPLAINED:
            lines.append(
                f"... and {len(rows) - _EXPLAINED} more (the calls verdict lists them all)"
            )
        return lines
