"""``--benchmark-json=PATH`` in a torchbench run: the wall times in pytest-benchmark's JSON format.

Why: CI jobs written for pytest-benchmark upload that file (to dashboards, to
github-action-benchmark); once a ``--bench-*`` option makes torchbench own the run, pytest-benchmark
does not write it, and a job that still passes the option would upload nothing. Only time results
have a place in this format (it holds seconds); the option is refused at configure time in runs
that measure no time (``options.py``).
"""

from __future__ import annotations

import datetime
import json
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ..common.statistics import RoundStats
from ..judging.results import BenchmarkResult, TimeMetric
from ..store.storage import atomic_write_many
from .paths import check_report_path

#: The one metric this format has a place for (it holds seconds).
METRIC = "time"


def _pytest_benchmark_version() -> str:
    """The format is pytest-benchmark's; tools may look at its version."""
    try:
        return metadata.version("pytest-benchmark")
    except metadata.PackageNotFoundError:
        return "unknown"


def machine_info() -> dict[str, Any]:
    """pytest-benchmark's ``machine_info`` keys that the standard library can fill."""
    return {
        "node": platform.node(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": platform.release(),
        "system": platform.system(),
    }


def benchmark_entry(result: BenchmarkResult, metric: TimeMetric) -> dict[str, Any]:
    """One benchmark as pytest-benchmark's ``Metadata.as_dict(include_data=True)`` writes it: one
    datum per replicate block (seconds per call), ``iterations`` calls per block."""
    stats: dict[str, Any] = dict(RoundStats(metric.times).as_dict())
    stats["data"] = metric.times
    stats["iterations"] = metric.number_per_run
    return {
        "group": result.group or None,
        "name": result.key.rsplit("::", 1)[-1],
        "fullname": result.key,
        "params": None,  # the parameter values are not kept with results; ``param`` is their id
        "param": result.sub_label or None,
        "extra_info": dict(result.extra_info),
        "options": {"timer": "perf_counter"},  # torch.utils.benchmark.Timer's default timer
        "stats": stats,
    }


def render(results: Sequence[BenchmarkResult], commit: str | None) -> str:
    entries = []
    for result in sorted(results, key=lambda r: r.key):
        metric = result.metrics.get(METRIC)
        if isinstance(metric, TimeMetric) and metric.raw_times:
            entries.append(benchmark_entry(result, metric))
    document = {
        "machine_info": machine_info(),
        "commit_info": {"id": commit or "unversioned"},
        "benchmarks": entries,
        "datetime": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "version": _pytest_benchmark_version(),
    }
    return json.dumps(document, indent=4, ensure_ascii=True, allow_nan=False) + "\n"


def write(path: Path, results: Sequence[BenchmarkResult], commit: str | None) -> None:
    """Atomically; a path that is not a regular file raises ReportPathError (an OSError)."""
    target = check_report_path(path)
    assert target is not None
    atomic_write_many({target: render(results, commit)})
