"""``--bench-json``: the run's results and verdicts for other tools, written atomically."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..common.vocabulary import Verdict
from ..judging.results import SCHEMA_VERSION, BenchmarkResult
from ..store.storage import atomic_write_many
from .paths import check_report_path


def render(
    results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict], meta: dict[str, Any]
) -> str:
    document = {
        "schema": SCHEMA_VERSION,
        "tool": f"pytest-torchbench {__version__}",
        **meta,
        "benchmarks": [r.to_json() for r in sorted(results, key=lambda r: r.key)],
        "verdicts": [v.to_json() for v in verdicts],
    }
    return json.dumps(document, indent=1, sort_keys=True, default=str) + "\n"


def write(
    path: Path,
    results: Sequence[BenchmarkResult],
    verdicts: Sequence[Verdict],
    meta: dict[str, Any],
) -> None:
    """Atomically; a path that is not a regular file raises ReportPathError (an OSError)."""
    target = check_report_path(path)
    assert target is not None
    atomic_write_many({target: render(results, verdicts, meta)})
