"""The ``kernels`` metric (CUDA kernel launches per call): its judgement and JSON run anywhere;
measuring needs a CUDA device (skipped without one); without one, selecting it is a usage error."""

from __future__ import annotations

import pytest
import torch

from pytest_torchbench.common.vocabulary import IMPROVEMENT, REGRESSION, UNCHANGED, Policy
from pytest_torchbench.metrics import registry
from pytest_torchbench.metrics.kernels import Kernels, KernelsMetric
from pytest_torchbench.metrics.metric import Metric

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_any_changed_kernel_fails_naming_it() -> None:
    metric = registry.get("kernels", Metric)
    before = KernelsMetric({"gemm_kernel": 1.0, "elementwise_kernel<add>": 1.0})
    after = KernelsMetric(
        {"gemm_kernel": 1.0, "elementwise_kernel<add>": 1.0, "Memcpy DtoD (Device -> Device)": 1.0}
    )
    verdict = metric.judge("t.py::t", after, before, metric.default_limit, Policy())
    assert verdict.status == REGRESSION and verdict.failed
    assert verdict.summary == "kernels 2 -> 3 launches per call (1 kernel(s) changed)"
    assert list(verdict.details) == ["Memcpy DtoD (Device -> Device) 0 -> 1 per call"]
    fewer = metric.judge("t.py::t", KernelsMetric({"gemm_kernel": 1.0}), before, 0.0, Policy())
    assert fewer.status == IMPROVEMENT and fewer.failed  # exact counts: a change either way fails
    same = metric.judge("t.py::t", before, before, 0.0, Policy())
    assert same.status == UNCHANGED and not same.failed and list(same.details) == []


def test_json_round_trip_and_validation() -> None:
    value = KernelsMetric({"b": 2.0, "a": 1.0})
    data = Kernels().to_json(value)
    assert data == {"kernels": {"a": 1, "b": 2}}
    assert Kernels().from_json(data) == KernelsMetric({"a": 1.0, "b": 2.0})
    assert "kernels.kernels" in (Kernels().invalid_number({"kernels": {"a": -1}}) or "")
    with pytest.raises(ValueError, match="must be an object"):
        Kernels().from_json({"kernels": [1]})


def test_unavailable_without_cuda_says_so_in_one_line() -> None:
    reason = Kernels().unavailable()
    if torch.cuda.is_available():
        assert reason is None
    else:
        assert reason is not None and "\n" not in reason and "no CUDA device" in reason


def test_kernel_names_are_shown_without_their_parameter_lists() -> None:
    from pytest_torchbench.metrics.kernels import display_name

    long = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
        "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar)::{lambda(float)#1}, "
        "std::array<char*, 2ul> >(int, "
        "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
        "c10::Scalar)::{lambda(float)#1}, std::array<char*, 2ul>)"
    )
    assert display_name(long) == (
        "at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
        "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar)::{lambda(float)#1}, "
        "std::array<char*, 2ul> >"
    )
    assert display_name("Memset (Device)") == "Memset (Device)"  # not a C++ name: kept whole
    assert display_name("nvjet_sm90_tst_256x128") == "nvjet_sm90_tst_256x128"
