"""Random augmentations driven by a seeded generator: 6 augmentations x 4 shapes x 2 dtypes."""

import imaging
import pytest
import torch


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", list(imaging.SHAPES))
@pytest.mark.parametrize("op", list(imaging.AUGMENTATIONS))
def test_augment(benchmark, op, shape, dtype):
    img = imaging.image(shape, dtype)
    generator = torch.Generator().manual_seed(1234)
    out = benchmark(imaging.AUGMENTATIONS[op], img, generator)
    assert out.dtype == img.dtype
