"""Colour conversions and adjustments: 7 ops x 4 image shapes x 2 dtypes."""

import imaging
import pytest


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", list(imaging.SHAPES))
@pytest.mark.parametrize("op", list(imaging.COLOUR))
def test_colour(benchmark, op, shape, dtype):
    img = imaging.image(shape, dtype)
    out = benchmark(imaging.COLOUR[op], img)
    assert out.shape[-2:] == img.shape[-2:]
