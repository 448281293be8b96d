"""56 Python-heavy benchmarks on ``tensorbox`` (init, apply, flatten, compare, stack)."""

import pytest
import tensorbox as tb
import torch

SIZES = [1, 4, 16, 64, 256, 1024, 4096, 16384]


@pytest.mark.parametrize("size", SIZES)
def test_init(benchmark, size):
    values = tb.make_tensors(tb.Observation, size)
    benchmark(lambda: tb.Observation(**values))


@pytest.mark.parametrize("size", SIZES)
def test_make_step(benchmark, size):
    benchmark(tb.make_step, size)


@pytest.mark.parametrize("size", SIZES)
def test_apply(benchmark, size):
    step = tb.make_step(size)
    benchmark(step.apply, torch.neg)


@pytest.mark.parametrize("size", SIZES)
def test_flatten_cat(benchmark, size):
    step = tb.make_step(size)
    benchmark(lambda: torch.cat(step.flatten()))


@pytest.mark.parametrize("size", SIZES)
def test_equal(benchmark, size):
    a, b = tb.make_step(size), tb.make_step(size)
    benchmark(lambda: a == b)


@pytest.mark.parametrize("size", SIZES)
def test_stack(benchmark, size):
    steps = [tb.make_step(size) for _ in range(4)]
    benchmark(tb.stack, steps)


@pytest.mark.parametrize("size", SIZES)
def test_apply_chain(benchmark, size):
    step = tb.make_step(size)
    benchmark(lambda: step.apply(torch.neg).apply(torch.abs).apply(torch.sqrt))
