"""The ``memory`` metric: peak bytes allocated per call (CPU from the profiler's memory events,
CUDA from ``torch.cuda``), more than the limit (default 10%) above the baseline is a regression."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from ..common.text import safe_number
from ..common.vocabulary import IMPROVEMENT, REGRESSION, UNCHANGED, Policy, Verdict, format_percent
from .measuring import MeasureContext
from .metric import Metric


@dataclasses.dataclass
class MemoryMetric:
    """Peak bytes allocated per iteration (CPU from profiler memory events, CUDA from
    torch.cuda)."""

    peak_bytes: dict[str, int]  # device ("cpu", "cuda") -> bytes

    def to_json(self) -> dict[str, Any]:
        return {"peak_bytes": {k: int(v) for k, v in sorted(self.peak_bytes.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryMetric:
        peak = data["peak_bytes"]
        if not isinstance(peak, Mapping):
            raise ValueError("memory.peak_bytes must be an object")
        return cls({str(k): int(v) for k, v in peak.items()})


class Memory(Metric):
    name = "memory"
    value_type = MemoryMetric
    help = "peak bytes"
    default_limit = 0.10
    number_fields = ("peak_bytes",)
    # How a peak is counted (memory_method) decides it too: a baseline counted otherwise is not
    # comparable, not a change.
    comparability_facts = ("torch", "torch_git", "machine", "gpu", "memory_method")
    table_title = "peak bytes per call"

    def environment_facts(self) -> Mapping[str, str]:
        from ..engines import profiler

        return {"memory_method": profiler.MEMORY_METHOD}

    def measure(self, fn: Callable[[], Any], context: MeasureContext) -> MemoryMetric:
        from ..engines import profiler

        peaks = profiler.peak_memory(
            fn, before_region=context.before_region, before_each=context.before_each
        )
        return MemoryMetric(
            {
                device: int(value)
                for device, value in (
                    ("cpu", peaks.get("cpu_peak_bytes")),
                    ("cuda", peaks.get("cuda_peak_bytes")),
                )
                if value is not None
            }
        )

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        now, then = sum(current.peak_bytes.values()), sum(baseline.peak_bytes.values())
        delta = now / then - 1.0 if then > 0 else (math.inf if now > 0 else 0.0)
        status = REGRESSION if delta > limit else IMPROVEMENT if delta < -limit else UNCHANGED
        summary = (
            f"peak memory {then:,} -> {now:,} bytes "
            f"({format_percent(delta) if math.isfinite(delta) else 'new'}, limit {limit * 100:g}%)"
        )
        details = [
            f"{device}: {baseline.peak_bytes.get(device, 0):,} -> "
            f"{current.peak_bytes.get(device, 0):,} bytes"
            for device in sorted(set(current.peak_bytes) | set(baseline.peak_bytes))
        ]
        return Verdict(
            key, "memory", status, float(then), float(now), limit, None, summary, details
        )

    def headline(self, value: Any) -> float:
        return sum(value.peak_bytes.values())  # type: ignore[no-any-return]

    def format_value(self, number: float) -> str:
        return safe_number(number, ",.0f")

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        return [
            (f"{prefix}memory.peak_bytes.{device}", int(v))
            for device, v in sorted(value.peak_bytes.items())
        ]
