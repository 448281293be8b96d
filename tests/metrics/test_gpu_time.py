"""The ``gpu_time`` metric (device time per call): judgement, JSON and wording run anywhere;
measuring needs a CUDA device (tests/e2e/test_ops_memory.py, and benchmarks/gpu_check.sh on a GPU
machine)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pytest_torchbench.common.vocabulary import IMPROVEMENT, REGRESSION, UNCHANGED, Policy
from pytest_torchbench.judging.judgement import decide
from pytest_torchbench.judging.results import BenchmarkResult
from pytest_torchbench.metrics import registry
from pytest_torchbench.metrics.gpu_time import GpuTimeMetric, describe_launch_bound
from pytest_torchbench.metrics.metric import Metric

MATMUL = GpuTimeMetric(
    device_seconds=172e-6,
    device_median=190e-6,
    device_iqr=11e-6,
    host_seconds=34e-6,
    launches=2,
    calls=200,
)
ADD = GpuTimeMetric(
    device_seconds=0.86e-6,
    device_median=0.86e-6,
    device_iqr=0.0,
    host_seconds=12e-6,
    launches=1,
    calls=200,
)


def test_the_fastest_call_is_judged_and_the_median_shown() -> None:
    metric = registry.get("gpu_time", Metric)
    slower = GpuTimeMetric(
        device_seconds=344e-6,
        device_median=380e-6,
        device_iqr=1e-6,
        host_seconds=60e-6,
        launches=4,
        calls=200,
    )
    verdict = metric.judge("t.py::t", slower, MATMUL, metric.default_limit, Policy())
    assert verdict.status == REGRESSION
    assert verdict.summary == (
        "gpu_time 172 us -> 344 us per call (+100.0%, limit 5%; fastest of 200 calls, "
        "median 190 us -> 380 us)"
    )
    assert verdict.details[0] == "launches per call 2 -> 4; host span per call 34 us -> 60 us"
    # The median moved 10% with the clock, the fastest call 1%: not a regression.
    clocked = GpuTimeMetric(173.7e-6, 209e-6, 14e-6, 34e-6, 2, 200)
    assert metric.judge("t.py::t", clocked, MATMUL, 0.05, Policy()).status == UNCHANGED
    faster = metric.judge("t.py::t", MATMUL, slower, 0.05, Policy())
    assert faster.status == IMPROVEMENT


def test_a_launch_bound_benchmark_is_told_as_such() -> None:
    line = describe_launch_bound(ADD)
    assert line is not None and line.startswith(
        "launch-bound: the device is busy 860 ns of the call's 12 us"
    )
    assert "gate it on gpu_time" in line
    assert describe_launch_bound(MATMUL) is None  # the device outlasts the host's launches
    verdict = registry.get("gpu_time", Metric).judge("t.py::t", ADD, ADD, 0.05, Policy())
    assert verdict.status == UNCHANGED and any(
        d.startswith("launch-bound") for d in verdict.details
    )
    assert "(launch-bound)" in registry.get("gpu_time", Metric).cell(ADD, 1e-6)


def test_no_device_work_is_unchanged_and_said() -> None:
    none = GpuTimeMetric(0.0, 0.0, 0.0, 10e-6, 0, 200)
    verdict = registry.get("gpu_time", Metric).judge("t.py::t", none, none, 0.05, Policy())
    assert verdict.status == UNCHANGED and not verdict.failed
    assert "no device work" in " ".join(verdict.details)
    assert describe_launch_bound(none) is None


def test_noise_beyond_half_the_limit_is_named() -> None:
    noisy = GpuTimeMetric(172e-6, 200e-6, 20e-6, 34e-6, 2, 200)
    verdict = registry.get("gpu_time", Metric).judge("t.py::t", noisy, MATMUL, 0.05, Policy())
    assert any(
        d.startswith("noisy: the device time's IQR is 10.0% of its median over 200 calls")
        for d in verdict.details
    )


def test_json_round_trip_and_validation() -> None:
    metric = registry.get("gpu_time", Metric)
    data = metric.to_json(MATMUL)
    assert data["device_seconds"] == 172e-6 and data["calls"] == 200 and data["flush_l2"] is False
    assert metric.from_json(data) == MATMUL
    assert "gpu_time.calls" in (metric.invalid_number({**data, "calls": 0}) or "")
    assert "gpu_time.device_seconds" in (
        metric.invalid_number({**data, "device_seconds": -1.0}) or ""
    )
    with pytest.raises(ValueError, match="flush_l2"):
        metric.from_json({**data, "flush_l2": "yes"})
    # Strings, bools, NaN, negatives and missing fields are one clear error each, never a number.
    for field, bad in (
        ("device_seconds", "nan"),
        ("device_seconds", True),
        ("host_seconds", -1.0),
        ("device_median", float("nan")),
        ("calls", 2.5),
    ):
        with pytest.raises(ValueError, match=f"gpu_time.{field}"):
            metric.from_json({**data, field: bad})
    with pytest.raises(ValueError, match="gpu_time.device_iqr"):
        metric.from_json({k: v for k, v in data.items() if k != "device_iqr"})


def test_cold_and_warm_caches_are_not_compared() -> None:
    from pytest_torchbench.common.vocabulary import NOT_COMPARABLE

    cold = GpuTimeMetric(180e-6, 195e-6, 5e-6, 34e-6, 2, 200, flush_l2=True)
    verdict = registry.get("gpu_time", Metric).judge("t.py::t", cold, MATMUL, 0.05, Policy())
    assert verdict.status == NOT_COMPARABLE and not verdict.failed
    assert "flush_l2=True" in verdict.summary and "re-save" in verdict.summary
    strict = decide(  # the verdict path decides failing: strictness is the user's policy
        registry.get("gpu_time", Metric).judge(
            "t.py::t", cold, MATMUL, 0.05, Policy(strict_environment=True)
        ),
        Policy(strict_environment=True),
    )
    assert strict.failed


def test_unavailable_without_cuda_says_so_in_one_line() -> None:
    reason = registry.get("gpu_time", Metric).unavailable()
    if torch.cuda.is_available():
        assert reason is None
    else:
        assert reason is not None and "\n" not in reason and "--bench-mode=gpu_time" in reason


def clocked(device_us: float, mhz: float | None) -> GpuTimeMetric:
    return GpuTimeMetric(device_us * 1e-6, device_us * 1e-6, 1e-6, 34e-6, 2, 200, sm_clock_mhz=mhz)


def test_a_change_the_clock_explains_is_not_judged_and_says_so() -> None:
    """The H200's figures (2026-11-27): a bf16 matmul at 193 us with the SM at 1980 MHz after
    idling, 219 us at 1470 MHz under the power limit: the same code, +13.5%."""
    from pytest_torchbench.common.vocabulary import NOT_COMPARABLE

    metric = registry.get("gpu_time", Metric)
    verdict = metric.judge("t.py::t", clocked(219, 1470), clocked(193, 1980), 0.05, Policy())
    assert verdict.status == NOT_COMPARABLE and not verdict.failed
    assert verdict.summary == (
        "gpu_time 193 us -> 219 us per call (+13.5%), not judged: the GPU's SM clock was "
        "1470 MHz, against 1980 MHz in the baseline, and a slowdown beyond the 5% limit "
        "may hide behind that"
    )
    assert (
        verdict.details[0]
        == "SM clock 1980 -> 1470 MHz: the clock alone can change device time by 0 to +34.7%"
    )
    assert verdict.details[-1].startswith("what to do: hold the GPU's clocks fixed")
    assert decide(
        metric.judge(
            "t.py::t", clocked(219, 1470), clocked(193, 1980), 0.05, Policy(strict_environment=True)
        ),
        Policy(strict_environment=True),
    ).failed
    # The other way round: 12% faster at a 35% higher clock may hide a slowdown of up to 19%.
    assert (
        metric.judge("t.py::t", clocked(193, 1980), clocked(219, 1470), 0.05, Policy()).status
        == NOT_COMPARABLE
    )
    # Nor is an unchanged time at a much higher clock: a compute-bound kernel would have been 26%
    # faster, so the code may have become slower by that much (a hostile review's case).
    hidden = metric.judge("t.py::t", clocked(198, 1980), clocked(193, 1470), 0.05, Policy())
    assert hidden.status == NOT_COMPARABLE
    # A memory-bound +30% at the lower clock is not judged either: it may be the clock
    # (up to +34.7%).
    assert (
        metric.judge("t.py::t", clocked(251, 1470), clocked(193, 1980), 0.05, Policy()).status
        == NOT_COMPARABLE
    )


def test_a_change_beyond_what_the_clock_explains_is_judged() -> None:
    from pytest_torchbench.common.vocabulary import NOT_COMPARABLE

    metric = registry.get("gpu_time", Metric)
    # Twice the work at a 26% lower clock: beyond the clocks' ratio, a regression.
    doubled = metric.judge("t.py::t", clocked(438, 1470), clocked(193, 1980), 0.05, Policy())
    assert doubled.status == REGRESSION and doubled.details[0].startswith(
        "SM clock 1980 -> 1470 MHz"
    )
    # Slower at a higher clock, beyond the limit: no clock explains it.
    assert (
        metric.judge("t.py::t", clocked(219, 1980), clocked(193, 1470), 0.05, Policy()).status
        == REGRESSION
    )
    # Faster at a lower clock: an improvement.
    assert (
        metric.judge("t.py::t", clocked(150, 1470), clocked(193, 1980), 0.05, Policy()).status
        == IMPROVEMENT
    )
    # Clocks within 2% of each other (the second H200 run: 1500 and 1530 MHz), or one unknown:
    # judged as usual.
    same = metric.judge("t.py::t", clocked(201.7, 1530), clocked(195.6, 1500), 0.05, Policy())
    assert same.status == UNCHANGED and same.details[0] == "SM clock 1500 -> 1530 MHz"
    assert (
        metric.judge("t.py::t", clocked(219, 1960), clocked(193, 1980), 0.05, Policy()).status
        == REGRESSION
    )
    unknown = metric.judge("t.py::t", clocked(219, None), clocked(193, 1980), 0.05, Policy())
    assert unknown.status == REGRESSION
    assert (
        unknown.details[0] == "SM clock not recorded in this run (NVML: pip install nvidia-ml-py)"
    )
    # Clocks a little apart (3%): an unchanged time stays judgeable within the limit either way.
    near = metric.judge("t.py::t", clocked(194, 1922), clocked(193, 1980), 0.05, Policy())
    assert near.status == UNCHANGED
    # 2% faster at a 4% lower clock (an A/A's jitter): no regression can hide there, and no sure
    # improvement either. The same time at a 26% lower clock: no regression either.
    assert (
        metric.judge("t.py::t", clocked(189, 1904), clocked(193, 1980), 0.05, Policy()).status
        == UNCHANGED
    )
    assert (
        metric.judge("t.py::t", clocked(193, 1470), clocked(193, 1980), 0.05, Policy()).status
        == UNCHANGED
    )
    # Clocks further apart than a factor of 2 (a hand-edited baseline, another GPU): judged as
    # usual.
    far = metric.judge("t.py::t", clocked(1930, 1470), clocked(193, 9000), 0.05, Policy())
    assert far.status == REGRESSION
    assert far.details[0] == (
        "SM clock 9000 -> 1470 MHz: too far apart for a clock state of one GPU; judged as measured"
    )
    # No device work at two clocks: nothing for the clock to act on, unchanged (not "may hide").
    nothing = GpuTimeMetric(0.0, 0.0, 0.0, 5e-6, 0, 200, sm_clock_mhz=1980)
    idle = metric.judge(
        "t.py::t", nothing, dataclasses.replace(nothing, sm_clock_mhz=1500), 0.05, Policy()
    )
    assert idle.status == UNCHANGED
    # The tolerance is the same either way round, at its edge too.
    for now_mhz, then_mhz in ((1000, 1020), (1020, 1000)):
        edge = metric.judge(
            "t.py::t", clocked(193, now_mhz), clocked(193, then_mhz), 0.05, Policy()
        )
        assert edge.details[0] == f"SM clock {then_mhz} -> {now_mhz} MHz"  # 2% apart: not weighed
    # 7% faster at an 11% higher clock: the clock explains it (no regression can hide at 3%), so
    # unchanged, and the summary says why; 15% faster at a 35% higher clock may hide one.
    assert (
        metric.judge("t.py::t", clocked(165, 1980), clocked(193, 1470), 0.05, Policy()).status
        == NOT_COMPARABLE
    )
    cleared = metric.judge("t.py::t", clocked(179.5, 2000), clocked(193, 1800), 0.05, Policy())
    assert cleared.status == UNCHANGED and cleared.summary.endswith(
        "; unchanged once the SM clocks are weighed"
    )


def test_the_clock_round_trips_and_is_optional_in_json() -> None:
    metric = registry.get("gpu_time", Metric)
    data = metric.to_json(clocked(193, 1480.5))
    assert data["sm_clock_mhz"] == 1480.5 and metric.from_json(data) == clocked(193, 1480.5)
    assert "sm_clock_mhz" not in metric.to_json(
        MATMUL
    )  # baselines saved without NVML stay as they were
    for bad in (0, -5, 5e-324, 1e9, "1980", True, float("inf"), 10**400):
        with pytest.raises(ValueError, match="gpu_time.sm_clock_mhz"):
            metric.from_json({**data, "sm_clock_mhz": bad})
    with pytest.raises(
        ValueError, match="gpu_time.device_seconds must be a finite number >= 0, got a number too"
    ):
        metric.from_json({**data, "device_seconds": 10**400})


def test_settling_waits_for_the_clock_to_stop_moving_within_bounds() -> None:
    """``settle`` on a fake clock and a fake device: sustained work until the readings of the last
    0.6 s agree within 2%, at least ``least`` and at most ``most`` seconds."""
    from pytest_torchbench.engines.profiler import kernels

    def run(clock_at: object, least: float = 0.3, most: float = 4.0) -> tuple[float, int | None]:
        now = [0.0]

        def fn() -> None:
            now[0] += 0.002  # a 2 ms call

        def clock() -> int | None:
            return clock_at(now[0])  # type: ignore[operator]

        last = kernels.settle(fn, least, most, clock=clock, sync=lambda: None, now=lambda: now[0])
        return now[0], last

    # A light benchmark: the clock never moves; done after least + the window.
    spent, last = run(lambda t: 1980)
    assert 0.9 <= spent < 1.0 and last == 1980
    # A heavy one: the clock falls from 1980 to 1470 over 2 s, then holds: done once the last 0.6 s
    # of readings lie within 2% (from 1.89 s on, where it is under 1470 + 2%).
    spent, last = run(lambda t: max(1470, int(1980 - 255 * t)))
    assert 2.45 <= spent < 2.55 and last == 1470
    # A clock that never settles (swinging 10%): stopped at most.
    spent, last = run(lambda t: 1980 if int(t * 10) % 2 else 1780)
    assert 4.0 <= spent < 4.1 and last in (1980, 1780)
    # No clock to read: the fixed sustained spell of before (least), no reading.
    spent, last = run(lambda t: None)
    assert 0.3 <= spent < 0.35 and last is None


def _mlp(time_ms: float, device_us: float, *, rng_seed: int) -> BenchmarkResult:
    """An MLP training step as the H200's A/A run measured it (2026-11-27): the device busy
    336 us of a call the host spends 1.19 ms on; wall time 443.5 us in one process, 571.4 us in
    the next (fastest blocks), same code."""
    import random

    from pytest_torchbench.judging.results import Environment, TimeMetric

    rng = random.Random(rng_seed)
    env = Environment(
        {
            "python": "3.12.3",
            "torch": "2.11.0",
            "torch_git": "x",
            "torch_cuda": "13.0",
            "gpu": "H200",
        }
    )
    wall = TimeMetric(
        number_per_run=10,
        raw_times=[10 * time_ms * 1e-3 * (1 + abs(rng.gauss(0, 0.01))) for _ in range(30)],
    )
    gpu = GpuTimeMetric(
        device_us * 1e-6, device_us * 1e-6, 1e-6, 1194e-6, 14, 200, sm_clock_mhz=1980
    )
    return BenchmarkResult(
        key="t.py::test_mlp_step",
        module="t.py",
        label="test_mlp_step",
        sub_label="",
        description="",
        metrics={"time": wall, "gpu_time": gpu},
        environments={"time": env, "gpu_time": env},
    )


def test_a_launch_bound_wall_time_slowdown_with_the_device_time_held_is_noise_not_a_failure() -> (
    None
):
    from pytest_torchbench.common.vocabulary import NOISY
    from pytest_torchbench.judging.judgement import judge_result

    verdicts = {
        v.metric: v
        for v in judge_result(
            _mlp(0.5714, 335.6, rng_seed=1), _mlp(0.4435, 336.1, rng_seed=2), Policy()
        )
    }
    time_verdict = verdicts["time"]
    assert verdicts["gpu_time"].status == UNCHANGED
    assert time_verdict.status == NOISY and not time_verdict.failed
    assert time_verdict.summary.endswith(
        "; noisy, not failed: launch-bound, device time unchanged (gpu_time)"
    )
    assert time_verdict.details[0].startswith(
        "launch-bound, device time unchanged (gpu_time): the device busy 28% "
        "of the call's 1.194 ms on the host and the launches per call the same"
    )
    assert "A slowdown of the host's own code up to that passes here too" in time_verdict.details[0]
    assert time_verdict.details[1] == (
        "device time per call 336.1 us -> 335.6 us (-0.1%, gpu_time); launches per call 14 -> 14"
    )
    # Wall time beyond what the host's noise was seen to do: it stands, with the device's side
    # named.
    slower = {
        v.metric: v
        for v in judge_result(
            _mlp(0.9, 335.6, rng_seed=1), _mlp(0.4435, 336.1, rng_seed=2), Policy()
        )
    }["time"]
    assert slower.status == REGRESSION and slower.failed
    assert slower.details[0].startswith("device time per call 336.1 us -> 335.6 us")
    # The device time moved too: the wall-time failure stands (gpu_time fails on its own as well).
    both = {
        v.metric: v
        for v in judge_result(
            _mlp(0.5714, 400.0, rng_seed=1), _mlp(0.4435, 336.1, rng_seed=2), Policy()
        )
    }
    assert both["time"].status == REGRESSION and both["time"].failed and both["gpu_time"].failed
    # More launches per call (more host work), a baseline that was not launch-bound (a host
    # slowdown can make a benchmark launch-bound), or another failure of the same benchmark (an op
    # more): the wall-time failure stands.
    more = _mlp(0.5714, 335.6, rng_seed=1)
    more.metrics["gpu_time"] = dataclasses.replace(more.metrics["gpu_time"], launches=15)
    assert {v.metric: v for v in judge_result(more, _mlp(0.4435, 336.1, rng_seed=2), Policy())}[
        "time"
    ].failed
    busy_base = _mlp(0.4435, 336.1, rng_seed=2)
    busy_base.metrics["gpu_time"] = dataclasses.replace(
        busy_base.metrics["gpu_time"], host_seconds=560e-6
    )
    assert {
        v.metric: v for v in judge_result(_mlp(0.5714, 335.6, rng_seed=1), busy_base, Policy())
    }["time"].failed
    from pytest_torchbench.metrics.ops import OpsMetric

    with_ops, base_ops = _mlp(0.5714, 335.6, rng_seed=1), _mlp(0.4435, 336.1, rng_seed=2)
    with_ops.metrics["ops"] = OpsMetric({"aten::mm": 3.0, "aten::mul": 1.0})
    base_ops.metrics["ops"] = OpsMetric({"aten::mm": 3.0})
    for result in (with_ops, base_ops):
        result.environments["ops"] = result.environments["time"]
    judged = {v.metric: v for v in judge_result(with_ops, base_ops, Policy())}
    assert judged["ops"].failed and judged["time"].failed
    # Judged in alternated rounds (base and head against the same noise): not excused.
    from pytest_torchbench.judging.results import TimeMetric

    rng_rounds = [
        (
            TimeMetric(number_per_run=10, raw_times=[4.4e-3] * 30),
            TimeMetric(number_per_run=10, raw_times=[5.7e-3] * 30),
        )
    ] * 4
    paired = {
        v.metric: v
        for v in judge_result(
            _mlp(0.5714, 335.6, rng_seed=1),
            _mlp(0.4435, 336.1, rng_seed=2),
            Policy(),
            rounds={"time": rng_rounds},
        )
    }["time"]
    assert paired.status != NOISY
