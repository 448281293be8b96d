"""The ``@pytest.mark.benchmark(...)`` marker: its keywords, validated.

A misspelt keyword (``min_runtime``) silently ignored would mean a benchmark measured differently
from what its author believes, so unknown keywords are an error that names them. pytest-benchmark's
keywords are accepted too, mapped onto ours (see :data:`PYTEST_BENCHMARK_KEYWORDS`), so a suite
written for pytest-benchmark runs unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from ..judging.judgement import LimitSpecError, parse_limits

MARKER_NAME = "benchmark"
MARKER_DOC = (
    "benchmark(label=None, sub_label=None, description=None, num_threads=1, threshold=0.1, "
    "min_run_time=0.1, max_run_time=0.25, limits=None, number=None, warmup=None, seed=0, "
    "ops_by_shape=False, flush_l2=False, profile=None; pytest-benchmark's group, min_rounds, "
    "min_time, max_time, timer, disable_gc, warmup=True/False, warmup_iterations, "
    "calibration_precision, cprofile, precision, confidence): "
    "the test is a benchmark for pytest-torchbench. Without the benchmark fixture the whole test "
    "body is measured."
)

#: The marker's ``seed`` when not given; also the seed of fixtures above function scope.
DEFAULT_SEED = 0
#: Largest seed numpy's legacy global generator accepts (``np.random.seed``).
MAX_SEED = 2**32 - 1


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
    # instructions: calls per counted region and calls before it; None = adaptive (a probe call's
    # instruction count picks both, the same on every run: engines/callgrind/collect.plan_calls)
    number: int | None = None
    warmup: int | None = None
    ops_by_shape: bool = False
    # gpu_time: overwrite the device's L2 cache before every profiled call (cold-cache device time)
    flush_l2: bool = False
    profile: Mapping[str, Any] | None = (
        None  # profiler options for --bench-profile / bench_profiler
    )
    # Counting modes seed torch, numpy and random with this before the warm-up (ops, memory: again
    # before the counted region), so code that draws random numbers counts the same run to run.
    seed: int | None = DEFAULT_SEED
    # pytest-benchmark's keywords, mapped onto time mode (counting modes ignore them):
    group: str | None = (
        None  # a column of the results, as pytest-benchmark's --benchmark-group-by=group
    )
    min_rounds: int | None = None  # at least this many timed blocks (ours: at least 30 anyway)
    min_time: float | None = None  # each timed block lasts at least this long (ours: 100 us anyway)
    timer: Callable[[], float] | None = None  # the clock (default: torch's, which syncs CUDA)
    time_warmup: bool = False  # pytest-benchmark's warmup=True: warm up before timing
    warmup_iterations: int | None = None  # ... with at most this many calls (default 100,000)


#: pytest-benchmark's marker keywords that have no effect here, and why (README says the same).
IGNORED_KEYWORDS = {
    "disable_gc": "the garbage collector is always off inside timed blocks (as timeit does)",
    "calibration_precision": "blocks are calibrated to block_time (100 us, or min_time)",
    "cprofile": "use --bench-profile for torch.profiler traces",
    # pytest-benchmark 5.3's rounds until the mean is known to a precision at a confidence
    "precision": "time mode measures until its own rule is met (adaptive_autorange's threshold=)",
    "confidence": "time mode measures until its own rule is met (adaptive_autorange's threshold=)",
}
PYTEST_BENCHMARK_KEYWORDS = (
    "group",
    "min_rounds",
    "min_time",
    "max_time",
    "timer",
    "disable_gc",
    "warmup",
    "warmup_iterations",
    "calibration_precision",
    "cprofile",
    "precision",
    "confidence",
)
_KEYWORDS = ({field.name for field in dataclasses.fields(BenchOptions)} - {"time_warmup"}) | set(
    PYTEST_BENCHMARK_KEYWORDS
)


def for_pytest_benchmark(marker: pytest.Mark) -> pytest.MarkDecorator | None:
    """The marker as pytest-benchmark may see it in a run it owns (a plain run with it installed),
    or None when it already is: our own keywords (``limits``, ``label``...) left out.

    pytest-benchmark refuses every keyword it does not know, at setup, and its fixture passes them
    on to its own: a test that gives a ``limits=`` for our runs would error in the
    project's ordinary test job. Keywords neither plugin knows are kept, so a misspelt one is
    still refused there.
    """
    ours = [
        name
        for name in marker.kwargs
        if name in _KEYWORDS and name not in PYTEST_BENCHMARK_KEYWORDS
    ]
    if not ours:
        return None
    kept = {name: value for name, value in marker.kwargs.items() if name not in ours}
    return getattr(pytest.mark, marker.name).with_args(*marker.args, **kept)


def _check_number(
    where: str, name: str, value: Any, *, integer: bool, minimum: float, strict: bool
) -> None:
    """Ints (or numbers) within bounds; NaN and infinities never pass (they would never end a
    run)."""
    types = (int,) if integer else (int, float)
    bad = isinstance(value, bool) or not isinstance(value, types)
    if not bad:
        bad = not math.isfinite(value) or (value <= minimum if strict else value < minimum)
    if bad:
        kind = "an integer" if integer else "a finite number"
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        if integer and isinstance(value, float) and math.isfinite(value) and not value.is_integer():
            kind = "a whole number (not truncated)"
        raise MarkerError(f"{where}: {name}={value!r} must be {kind} {bound}")


def options_from_marker(marker: pytest.Mark | None, where: str) -> BenchOptions:
    if marker is None:
        return BenchOptions()
    if marker.args:
        raise MarkerError(
            f"{where}: @pytest.mark.benchmark takes keyword arguments only, "
            f"got positional {marker.args!r}"
        )
    kwargs = dict(marker.kwargs)
    unknown = sorted(set(kwargs) - _KEYWORDS)
    if unknown:
        raise MarkerError(
            f"{where}: unknown @pytest.mark.benchmark keyword {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(sorted(_KEYWORDS))}"
        )
    _check_texts_and_times(where, kwargs)
    _check_calls(where, kwargs)
    _check_seed_flags_and_limits(where, kwargs)
    for name in IGNORED_KEYWORDS:
        kwargs.pop(name, None)
    return BenchOptions(**kwargs)


def _check_texts_and_times(where: str, kwargs: dict[str, Any]) -> None:
    """The text keywords and the run times; pytest-benchmark's max_time becomes max_run_time."""
    for name in ("label", "sub_label", "description", "group"):
        if name in kwargs and kwargs[name] is not None and not isinstance(kwargs[name], str):
            raise MarkerError(f"{where}: {name}={kwargs[name]!r} must be a string")
    if "num_threads" in kwargs:
        _check_number(
            where, "num_threads", kwargs["num_threads"], integer=True, minimum=1, strict=False
        )
    for name in ("threshold", "max_run_time", "max_time"):
        if name in kwargs:
            _check_number(where, name, kwargs[name], integer=False, minimum=0, strict=True)
    for name in ("min_run_time", "min_time"):
        if kwargs.get(name) is not None:
            _check_number(where, name, kwargs[name], integer=False, minimum=0, strict=True)
    if "max_time" in kwargs:
        if "max_run_time" in kwargs:
            raise MarkerError(
                f"{where}: give max_run_time or pytest-benchmark's max_time, not both"
            )
        kwargs["max_run_time"] = kwargs.pop("max_time")


def _check_calls(where: str, kwargs: dict[str, Any]) -> None:
    """How many calls, warm-ups and rounds, and the timer; pytest-benchmark's bool warmup becomes
    time_warmup."""
    if kwargs.get("number") is not None:  # None, as the marker's signature shows: the default
        _check_number(where, "number", kwargs["number"], integer=True, minimum=1, strict=False)
    if kwargs.get("warmup") is not None:
        # pytest-benchmark's warmup is a bool (warm up before timing); ours an int (calls before
        # the counted region). Both kinds of suite work: the type says which is meant.
        if isinstance(kwargs["warmup"], bool):
            kwargs["time_warmup"] = kwargs.pop("warmup")
        else:
            _check_number(where, "warmup", kwargs["warmup"], integer=True, minimum=0, strict=False)
    if kwargs.get("warmup_iterations") is not None:
        _check_number(
            where,
            "warmup_iterations",
            kwargs["warmup_iterations"],
            integer=True,
            minimum=0,
            strict=False,
        )
    if kwargs.get("min_rounds") is not None:
        _check_number(
            where, "min_rounds", kwargs["min_rounds"], integer=True, minimum=1, strict=False
        )
    if kwargs.get("timer") is not None and not callable(kwargs["timer"]):
        raise MarkerError(
            f"{where}: timer={kwargs['timer']!r} must be a callable returning seconds, "
            "e.g. time.perf_counter"
        )


def _check_seed_flags_and_limits(where: str, kwargs: dict[str, Any]) -> None:
    """The seed, the flags, the limits (parsed in place) and the profiler options."""
    if "seed" in kwargs and kwargs["seed"] is not None:
        _check_number(where, "seed", kwargs["seed"], integer=True, minimum=0, strict=False)
        if kwargs["seed"] > MAX_SEED:
            raise MarkerError(
                f"{where}: seed={kwargs['seed']!r} must be at most {MAX_SEED} "
                "(numpy's limit), or None"
            )
    for flag in ("ops_by_shape", "flush_l2"):
        if flag in kwargs and not isinstance(kwargs[flag], bool):
            raise MarkerError(f"{where}: {flag}={kwargs[flag]!r} must be True or False")
    if "limits" in kwargs:
        try:
            kwargs["limits"] = parse_limits(kwargs["limits"], where=f"{where}: limits")
        except LimitSpecError as exc:
            raise MarkerError(str(exc)) from None
    if "profile" in kwargs and kwargs["profile"] is not None:
        _check_profile(where, kwargs["profile"])
    if "disable_gc" in kwargs and not isinstance(kwargs["disable_gc"], bool):
        raise MarkerError(f"{where}: disable_gc={kwargs['disable_gc']!r} must be True or False")


def _check_profile(where: str, profile: Any) -> None:
    """The profiler options are checked here, once, so a bad one is a line naming the keyword
    instead of a TypeError from inside the profiler while measuring."""
    if not isinstance(profile, Mapping):
        raise MarkerError(f"{where}: profile={profile!r} must be a dict of profiler options")
    from ..engines.profiler import ProfilerOptions

    try:
        ProfilerOptions.from_kwargs(**{str(k): v for k, v in profile.items()})
    except (TypeError, ValueError) as exc:
        raise MarkerError(f"{where}: profile={dict(profile)!r}: {exc}") from None
