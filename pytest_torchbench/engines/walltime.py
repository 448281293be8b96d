"""Wall time with torch.utils.benchmark: a Timer, adaptive stopping, a torch Measurement as result.

Why not call ``Timer.adaptive_autorange`` as is: its block size is chosen so that timer overhead is
below 0.01% of a block, which for a 50 ns statement means blocks of ~50 ms and as few as four
replicates. Four samples cannot carry a significance test (Mann-Whitney with 4 vs 4 values cannot
go below p = 0.014). So this engine keeps adaptive_autorange's stopping rule (stop once the
IQR/median is under ``threshold`` after ``min_run_time``, never past ``max_run_time``) but calibrates
smaller blocks (``block_time``, 1 ms by default) and asks for at least ``min_replicates`` of them.
The timer's own overhead is a few hundred ns per block, identical in baseline and current runs.
Timer's default timer synchronises CUDA, so GPU work is timed to completion.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from torch.utils.benchmark import Measurement, Timer

_FN_NAME = "__torchbench_fn"


@dataclasses.dataclass(frozen=True)
class TimeSpec:
    """How to measure one benchmark; defaults suit a 2-core CI machine and trivial statements."""

    label: str = ""
    sub_label: str = ""
    description: str = ""
    num_threads: int = 1
    threshold: float = 0.1
    min_run_time: float = 0.1
    max_run_time: float = 2.0  # adaptive_autorange says 10 s; a CI suite of many benchmarks cannot wait that long
    block_time: float = 0.001
    min_replicates: int = 30
    timer: Callable[[], float] | None = None  # None: torch's default (syncs CUDA)


def make_timer(fn: Callable[[], Any], spec: TimeSpec) -> Timer:
    return Timer(
        stmt=f"{_FN_NAME}()",
        globals={_FN_NAME: fn},
        label=spec.label or None,
        sub_label=spec.sub_label or None,
        description=spec.description or None,
        num_threads=spec.num_threads,
        **_timer_option(spec.timer),
    )


def _calibrate_number(timer: Timer, block_time: float) -> int:
    """The smallest power-of-two call count whose block lasts at least ``block_time``."""
    number = 1
    while True:
        elapsed = timer.timeit(number).raw_times[0]
        if elapsed >= block_time or number >= 1 << 30:
            return number
        # jump close to the target, then keep doubling: fewer wasted calibration calls
        estimate = int(number * block_time / max(elapsed, 1e-9))
        number = max(number * 2, 1 << max(estimate.bit_length() - 1, 0))


def measure(fn: Callable[[], Any], spec: TimeSpec | None = None) -> Measurement:
    """Measure ``fn`` (already warmed up by the caller's first call) and return torch's Measurement."""
    spec = spec or TimeSpec()
    timer = make_timer(fn, spec)
    number = _calibrate_number(timer, spec.block_time)
    raw_times: list[float] = []
    total = 0.0
    task_spec = None
    while True:
        block = timer.timeit(number)
        task_spec = block.task_spec
        elapsed = block.raw_times[0]
        raw_times.append(elapsed)
        total += elapsed
        if total >= spec.max_run_time:
            break
        if total >= spec.min_run_time and len(raw_times) >= spec.min_replicates:
            candidate = Measurement(number_per_run=number, raw_times=raw_times, task_spec=task_spec)
            if candidate.meets_confidence(threshold=spec.threshold):
                break
    return Measurement(number_per_run=number, raw_times=list(raw_times), task_spec=task_spec)


def measure_rounds(
    target: Callable[..., Any],
    make_arguments: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]],
    *,
    rounds: int,
    iterations: int,
    warmup_rounds: int = 0,
    teardown: Callable[..., Any] | None = None,
    spec: TimeSpec | None = None,
) -> Measurement:
    """pytest-benchmark's ``pedantic``: exactly ``rounds`` blocks of ``iterations`` calls.

    The author chose the sampling, so there is no calibration or adaptive stopping; arguments
    come from ``make_arguments`` before every round (the pedantic ``setup``) and ``teardown``
    runs after it, both outside the timed block. As in ``timeit``, the garbage collector is off
    inside a block. One raw time per round, as torch's Measurement holds them.
    """
    import gc

    import torch
    from torch.utils.benchmark.utils.common import TaskSpec
    from torch.utils.benchmark.utils.timer import timer as torch_timer

    spec = spec or TimeSpec()
    clock = spec.timer or torch_timer
    task_spec = TaskSpec(stmt=getattr(target, "__qualname__", None) or repr(target), setup="",
                         label=spec.label or None, sub_label=spec.sub_label or None,
                         description=spec.description or None, num_threads=spec.num_threads)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(spec.num_threads)
    raw_times: list[float] = []
    try:
        for index in range(warmup_rounds + rounds):
            args, kwargs = make_arguments()
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                start = clock()
                for _ in range(iterations):
                    target(*args, **kwargs)
                elapsed = clock() - start
            finally:
                if gc_was_enabled:
                    gc.enable()
            if teardown is not None:
                teardown(*args, **kwargs)
            if index >= warmup_rounds:
                raw_times.append(elapsed)
    finally:
        torch.set_num_threads(previous_threads)
    return Measurement(number_per_run=iterations, raw_times=raw_times, task_spec=task_spec)


def _timer_option(timer: Callable[[], float] | None) -> dict[str, Any]:
    """Timer's ``timer=`` keyword only when the marker gave a clock (torch's default otherwise)."""
    return {"timer": timer} if timer is not None else {}
