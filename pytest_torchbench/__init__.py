"""pytest-torchbench: performance regression testing for PyTorch code, as a pytest plugin.

The public API: what a hook implementation (``pytest/hookspecs.py``) or a metric author needs.
Everything else (modules not named here, and any name starting with ``_``) is internal and may
change; this list only grows, as pluggy keeps its private modules behind a curated ``__init__``.
Importing it imports neither torch nor numpy.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .common.vocabulary import (  # noqa: E402
    ACCEPTED,
    IMPROVEMENT,
    MISSING,
    NEW,
    NOISY,
    NOT_COMPARABLE,
    REGRESSION,
    TOO_NOISY,
    UNCHANGED,
    Bars,
    Distribution,
    Environment,
    Heading,
    Policy,
    Verdict,
)
from .judging.results import BenchmarkResult  # noqa: E402
from .metrics.calls import CallsMetric  # noqa: E402
from .metrics.display import SecondsDisplay  # noqa: E402
from .metrics.instructions import InstructionsMetric  # noqa: E402
from .metrics.measuring import MeasureContext  # noqa: E402
from .metrics.memory import MemoryMetric  # noqa: E402
from .metrics.metric import Metric, NamedCounts  # noqa: E402
from .metrics.ops import OpsMetric  # noqa: E402
from .metrics.time import TimeMetric  # noqa: E402

__all__ = [
    "__version__",
    # results and verdicts (the arguments of the pytest_torchbench_* hooks)
    "BenchmarkResult",
    "Environment",
    "Verdict",
    "Policy",
    "REGRESSION",
    "IMPROVEMENT",
    "UNCHANGED",
    "NEW",
    "MISSING",
    "NOT_COMPARABLE",
    "NOISY",
    "TOO_NOISY",
    "ACCEPTED",
    # the built-in metrics' values
    "TimeMetric",
    "InstructionsMetric",
    "OpsMetric",
    "CallsMetric",
    "MemoryMetric",
    # writing a metric (pytest_torchbench_register_metrics)
    "Metric",
    "MeasureContext",
    "NamedCounts",
    "SecondsDisplay",
    "Heading",
    "Distribution",
    "Bars",
]
