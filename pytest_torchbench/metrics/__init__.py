"""One module per metric (time, instructions, ops, memory) behind ``base.Metric``, listed by
``registry``. See base.py for what a metric states and why."""

from __future__ import annotations

from .instructions import InstructionsMetric
from .measuring import MeasureContext
from .memory import MemoryMetric
from .metric import Metric
from .ops import OpsMetric
from .time import TimeMetric

__all__ = [
    "Metric",
    "MeasureContext",
    "TimeMetric",
    "InstructionsMetric",
    "OpsMetric",
    "MemoryMetric",
]
