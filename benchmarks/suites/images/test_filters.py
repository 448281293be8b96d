"""Blurs and edge filters (depthwise and plain convolutions, pooling): 4 filters x 4 shapes x 2
dtypes."""

import imaging
import pytest


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", list(imaging.SHAPES))
@pytest.mark.parametrize("op", list(imaging.FILTERS))
def test_filter(benchmark, op, shape, dtype):
    img = imaging.image(shape, dtype)
    out = benchmark(imaging.FILTERS[op], img)
    assert out.shape[-2:] == img.shape[-2:]
