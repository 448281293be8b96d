"""Tensor ops on small inputs: where Python and dispatcher overhead dominate, and regress first."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.benchmark
@pytest.mark.parametrize("size", [16, 1024])
def test_add(benchmark, generator, size):
    x = torch.randn(size, generator=generator)
    y = torch.randn(size, generator=generator)
    result = benchmark(torch.add, x, y)
    assert torch.equal(result, x + y)


@pytest.mark.parametrize("op", ["sum", "mean", "amax"])
def test_reduction(benchmark, generator, op):
    x = torch.randn(4, 4, generator=generator)
    benchmark(getattr(x, op))


@pytest.mark.parametrize("n", [4, 32])
def test_mm(bench_timer, n):
    """Compare-style: one Timer per size, columns by description."""
    bench_timer(
        "torch.mm(x, y)",
        setup=f"x = torch.ones({n}, {n}); y = torch.ones({n}, {n})",
        description="mm",
    ).adaptive_autorange()
    bench_timer(
        "x @ y", setup=f"x = torch.ones({n}, {n}); y = torch.ones({n}, {n})", description="matmul"
    ).adaptive_autorange()


@pytest.mark.benchmark(label="softmax", description="dim=-1")
def test_softmax():
    """No fixture: the whole test body is the measured region."""
    x = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    torch.softmax(x, dim=-1)


def test_cat_and_index(benchmark, generator):
    parts = [torch.randn(4, 4, generator=generator) for _ in range(4)]
    index = torch.tensor([0, 3, 5, 7])

    def cat_then_index():
        return torch.cat(parts)[index]

    assert benchmark(cat_then_index).shape == (4, 4)
