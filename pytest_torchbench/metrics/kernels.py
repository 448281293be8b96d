"""The ``kernels`` metric: CUDA kernel launches per call, by kernel name (needs a CUDA device).

The GPU counterpart of ``ops``: which kernels one call launches (and memcpy/memset activities) is
decided by the code and the libraries' algorithm choice, not by load, so the counts are compared
exactly: any change beyond the limit (default 0) fails and the failure names the kernels. A new
kernel (a fused one split in two, an extra copy to the device) shows as a line of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..common.text import safe_text
from .explaining import LineChanges, on_changed_line, sites_text
from .judge import changed_counts
from .measuring import MeasureContext
from .metric import Metric, NamedCounts, counts_from_json, counts_to_json


@dataclasses.dataclass
class KernelsMetric:
    """CUDA activities launched per call (kernels, memcpy, memset), by name."""

    kernels: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"kernels": counts_to_json(self.kernels)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelsMetric:
        return cls(counts_from_json(data, "kernels"))


def display_name(kernel: str) -> str:
    """A kernel's name as shown in a verdict: without the leading ``void`` and, for a template, the
    parameter list, which repeats the template arguments (a demangled elementwise kernel's name runs
    to 600 characters, twice the same types). Names stay as profiled in baselines and JSON."""
    name = kernel[5:] if kernel.startswith("void ") else kernel
    depth = 0
    for index, char in enumerate(name):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0 and name[index - 1 : index] == ">":
            return name[:index]
    return name


class Kernels(NamedCounts, Metric):
    name = "kernels"
    counted = "launches"
    things = "kernel(s)"
    plot_title = "CUDA kernel launches per run"
    value_type = KernelsMetric
    help = "CUDA kernel launches (needs a GPU)"
    default_limit = 0.0
    number_fields = ("kernels",)
    # The kernels chosen follow the GPU model, the CUDA/cuDNN build and torch itself.
    comparability_facts = ("torch", "torch_git", "gpu")
    table_title = "CUDA kernel launches per call"
    explains = "CUDA kernels (launches per run)"
    failure_words = "kernel launches changed"

    def unavailable(self) -> str | None:
        from ..engines import profiler

        if profiler.cuda_usable():
            return None
        return (
            "--bench-mode=kernels counts CUDA kernel launches, but there is no CUDA device here "
            "(torch.cuda.is_available() is False); run it on a machine with a GPU, or leave "
            "'kernels' out"
        )

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> KernelsMetric:
        from ..engines import profiler

        return KernelsMetric(
            profiler.count_kernels(
                fn, before_region=context.before_region, before_each=context.before_each
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
        """The changed kernels, each with the op that launches it now and the user's line that calls
        that op (one on a line edited since the baseline's revision first, tagged: ``changed``): two
        more runs of ``fn`` (one profiling the device, one tagging torch calls), for a failed
        benchmark only. A kernel no longer launched has no launcher to show."""
        from ..engines import profiler
        from ..engines.sites import own_dirs

        launchers = profiler.kernel_launchers(fn, before_region=context.before_region)
        sites = profiler.op_call_sites(
            fn,
            root=root,
            hooks=profiler.CallHooks(before_region=context.before_region),
            own=own_dirs(context.own_packages),
            caller=context.caller,
        )
        lines = []
        for kernel, then, now in changed_counts(current.kernels, baseline.kernels, limit):
            line = f"{safe_text(display_name(kernel))} {then:g} -> {now:g} per call"
            ops = launchers.get(kernel, [])
            if ops:
                op = ops[0]
                found = sites.get(op, [])
                # one site, or those on edited lines when there are any
                edited = [site for site in found if on_changed_line(site[0], changed)]
                where = (
                    f" at {sites_text(found if edited else found[:1], changed, 1)}" if found else ""
                )
                line += f" (launched by {safe_text(op)}{where})"
            lines.append(line)
        return lines

    def explain_elsewhere(self, nodeid: str) -> str:
        return (
            f"launching ops and call sites: not found (the test ran in another process); "
            f"`pytest {safe_text(nodeid)} --bench-mode=kernels` with the same --bench-compare, "
            f"without -n, shows them"
        )
