"""The ``@pytest.mark.benchmark(...)`` marker: its keywords, validated.

A misspelt keyword (``min_runtime``) silently ignored would mean a benchmark measured differently
from what its author believes, so unknown keywords are an error that names them.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import pytest

from .judgement import LimitSpecError, parse_limits

MARKER_NAME = "benchmark"
MARKER_DOC = (
    "benchmark(label=None, sub_label=None, description=None, num_threads=1, threshold=0.1, "
    "min_run_time=0.1, max_run_time=0.25, limits=None, number=100, warmup=100, "
    "ops_by_shape=False, profile=None): the test is a benchmark for pytest-torchbench. "
    "Without the benchmark fixture the whole test body is measured."
)


class MarkerError(Exception):
    """A bad marker keyword; the message names the test and the keyword."""


@dataclasses.dataclass(frozen=True)
class BenchOptions:
    """Per-test measurement options (marker keywords, or defaults)."""

    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    num_threads: int = 1
    threshold: float = 0.1
    min_run_time: float | None = None
    max_run_time: float = 0.25
    limits: Mapping[str, float] = dataclasses.field(default_factory=dict)
    number: int = 100  # instructions: calls per counted region, fixed per benchmark (see FACTS)
    warmup: int = 100  # instructions: calls before counting (specialisation, caches)
    ops_by_shape: bool = False
    profile: Mapping[str, Any] | None = None  # profiler options for --bench-profile / bench_profiler


_KEYWORDS = {field.name for field in dataclasses.fields(BenchOptions)}


def _check_number(where: str, name: str, value: Any, *, integer: bool, minimum: float, strict: bool) -> None:
    types = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, types) or (value <= minimum if strict else value < minimum):
        kind = "an integer" if integer else "a number"
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise MarkerError(f"{where}: {name}={value!r} must be {kind} {bound}")


def options_from_marker(marker: pytest.Mark | None, where: str) -> BenchOptions:
    if marker is None:
        return BenchOptions()
    if marker.args:
        raise MarkerError(
            f"{where}: @pytest.mark.benchmark takes keyword arguments only, got positional {marker.args!r}"
        )
    kwargs = dict(marker.kwargs)
    unknown = sorted(set(kwargs) - _KEYWORDS)
    if unknown:
        raise MarkerError(
            f"{where}: unknown @pytest.mark.benchmark keyword {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(sorted(_KEYWORDS))}"
        )
    for name in ("label", "sub_label", "description"):
        if name in kwargs and kwargs[name] is not None and not isinstance(kwargs[name], str):
            raise MarkerError(f"{where}: {name}={kwargs[name]!r} must be a string")
    if "num_threads" in kwargs:
        _check_number(where, "num_threads", kwargs["num_threads"], integer=True, minimum=1, strict=False)
    for name in ("threshold", "max_run_time"):
        if name in kwargs:
            _check_number(where, name, kwargs[name], integer=False, minimum=0, strict=True)
    if kwargs.get("min_run_time") is not None:
        _check_number(where, "min_run_time", kwargs["min_run_time"], integer=False, minimum=0, strict=True)
    if "number" in kwargs:
        _check_number(where, "number", kwargs["number"], integer=True, minimum=1, strict=False)
    if "warmup" in kwargs:
        _check_number(where, "warmup", kwargs["warmup"], integer=True, minimum=0, strict=False)
    if "limits" in kwargs:
        try:
            kwargs["limits"] = parse_limits(kwargs["limits"], where=f"{where}: limits")
        except LimitSpecError as exc:
            raise MarkerError(str(exc)) from None
    if "profile" in kwargs and kwargs["profile"] is not None and not isinstance(kwargs["profile"], Mapping):
        raise MarkerError(f"{where}: profile={kwargs['profile']!r} must be a dict of profiler options")
    return BenchOptions(**kwargs)
