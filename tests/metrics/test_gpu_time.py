"""The ``gpu_time`` metric (device time per call): judgement, JSON and wording run anywhere; measuring
needs a CUDA device (tests/e2e/test_ops_memory.py, and benchmarks/gpu_check.sh on a GPU machine)."""
from __future__ import annotations

import pytest
import torch

from pytest_torchbench.metrics import registry
from pytest_torchbench.metrics.gpu_time import GpuTimeMetric, describe_launch_bound
from pytest_torchbench.core.vocabulary import IMPROVEMENT, REGRESSION, UNCHANGED, Policy

MATMUL = GpuTimeMetric(device_seconds=172e-6, device_median=190e-6, device_iqr=11e-6, host_seconds=34e-6,
                       launches=2, calls=200)
ADD = GpuTimeMetric(device_seconds=0.86e-6, device_median=0.86e-6, device_iqr=0.0, host_seconds=12e-6,
                    launches=1, calls=200)


def test_the_fastest_call_is_judged_and_the_median_shown() -> None:
    metric = registry.get("gpu_time")
    slower = GpuTimeMetric(device_seconds=344e-6, device_median=380e-6, device_iqr=1e-6, host_seconds=60e-6,
                           launches=4, calls=200)
    verdict = metric.judge("t.py::t", slower, MATMUL, metric.default_limit, Policy())
    assert verdict.status == REGRESSION
    assert verdict.summary == ("gpu_time 172 us -> 344 us per call (+100.0%, limit 5%; fastest of 200 calls, "
                               "median 190 us -> 380 us)")
    assert verdict.details[0] == "launches per call 2 -> 4; host span per call 34 us -> 60 us"
    # The median moved 10% with the clock, the fastest call 1%: not a regression.
    clocked = GpuTimeMetric(173.7e-6, 209e-6, 14e-6, 34e-6, 2, 200)
    assert metric.judge("t.py::t", clocked, MATMUL, 0.05, Policy()).status == UNCHANGED
    faster = metric.judge("t.py::t", MATMUL, slower, 0.05, Policy())
    assert faster.status == IMPROVEMENT


def test_a_launch_bound_benchmark_is_told_as_such() -> None:
    line = describe_launch_bound(ADD)
    assert line is not None and line.startswith("launch-bound: the device is busy 860 ns of the call's 12 us")
    assert "gate it on gpu_time" in line
    assert describe_launch_bound(MATMUL) is None  # the device outlasts the host's launches
    verdict = registry.get("gpu_time").judge("t.py::t", ADD, ADD, 0.05, Policy())
    assert verdict.status == UNCHANGED and any(d.startswith("launch-bound") for d in verdict.details)
    assert "(launch-bound)" in registry.get("gpu_time").cell(ADD, 1e-6)


def test_no_device_work_is_unchanged_and_said() -> None:
    none = GpuTimeMetric(0.0, 0.0, 0.0, 10e-6, 0, 200)
    verdict = registry.get("gpu_time").judge("t.py::t", none, none, 0.05, Policy())
    assert verdict.status == UNCHANGED and not verdict.failed
    assert "no device work" in " ".join(verdict.details)
    assert describe_launch_bound(none) is None


def test_noise_beyond_half_the_limit_is_named() -> None:
    noisy = GpuTimeMetric(172e-6, 200e-6, 20e-6, 34e-6, 2, 200)
    verdict = registry.get("gpu_time").judge("t.py::t", noisy, MATMUL, 0.05, Policy())
    assert any(d.startswith("noisy: the device time's IQR is 10.0% of its median over 200 calls") for d in verdict.details)


def test_json_round_trip_and_validation() -> None:
    metric = registry.get("gpu_time")
    data = metric.to_json(MATMUL)
    assert data["device_seconds"] == 172e-6 and data["calls"] == 200 and data["flush_l2"] is False
    assert metric.from_json(data) == MATMUL
    assert "gpu_time.calls" in (metric.invalid_number({**data, "calls": 0}) or "")
    assert "gpu_time.device_seconds" in (metric.invalid_number({**data, "device_seconds": -1.0}) or "")
    with pytest.raises(ValueError, match="flush_l2"):
        metric.from_json({**data, "flush_l2": "yes"})
    # Strings, bools, NaN, negatives and missing fields are one clear error each, never a number.
    for field, bad in (("device_seconds", "nan"), ("device_seconds", True), ("host_seconds", -1.0),
                       ("device_median", float("nan")), ("calls", 2.5)):
        with pytest.raises(ValueError, match=f"gpu_time.{field}"):
            metric.from_json({**data, field: bad})
    with pytest.raises(ValueError, match="gpu_time.device_iqr"):
        metric.from_json({k: v for k, v in data.items() if k != "device_iqr"})


def test_cold_and_warm_caches_are_not_compared() -> None:
    from pytest_torchbench.core.vocabulary import NOT_COMPARABLE

    cold = GpuTimeMetric(180e-6, 195e-6, 5e-6, 34e-6, 2, 200, flush_l2=True)
    verdict = registry.get("gpu_time").judge("t.py::t", cold, MATMUL, 0.05, Policy())
    assert verdict.status == NOT_COMPARABLE and not verdict.failed
    assert "flush_l2=True" in verdict.summary and "re-save" in verdict.summary
    strict = registry.get("gpu_time").judge("t.py::t", cold, MATMUL, 0.05, Policy(strict_environment=True))
    assert strict.failed


def test_unavailable_without_cuda_says_so_in_one_line() -> None:
    reason = registry.get("gpu_time").unavailable()
    if torch.cuda.is_available():
        assert reason is None
    else:
        assert reason is not None and "\n" not in reason and "--bench-mode=gpu_time" in reason
