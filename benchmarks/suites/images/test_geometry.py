"""Flips, rotations, resizes and crops: 6 ops x 4 image shapes x 2 dtypes."""

import imaging
import pytest


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", list(imaging.SHAPES))
@pytest.mark.parametrize("op", list(imaging.GEOMETRY))
def test_geometry(benchmark, op, shape, dtype):
    img = imaging.image(shape, dtype)
    out = benchmark(imaging.GEOMETRY[op], img)
    assert out.dtype == img.dtype
