"""A benchmark suite written for pytest-benchmark, as a computer-vision library has them.

Nothing here knows pytest-torchbench: it must run unchanged under pytest-benchmark (plain
``pytest``) and under pytest-torchbench (``--bench-mode=time|ops|instructions``).
"""

import time

import pytest
import torch
from torch import nn

SIZES = [16, 32]
DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.benchmark(group="elementwise")
def test_add(benchmark, size, dtype):
    x = torch.ones(size, size, dtype=dtype)
    benchmark.extra_info["numel"] = x.numel()
    result = benchmark(torch.add, x, x)
    assert result.dtype == dtype


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


@pytest.mark.benchmark(
    group="model", min_rounds=10, max_time=0.5, warmup=True, warmup_iterations=10
)
def test_convnet_forward(benchmark):
    torch.manual_seed(0)
    model = SmallConvNet().eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        out = benchmark(model, images)
    assert out.shape == (2, 10)


def random_crop_flip(image, size=24):
    """A random crop, then a horizontal flip half of the time: the ops run depend on the draw."""
    top, left = (int(v) for v in torch.randint(0, image.shape[-1] - size + 1, (2,)))
    image = image[..., top : top + size, left : left + size]
    if torch.rand(()) < 0.5:
        image = image.flip(-1)
    return image.contiguous()


@pytest.mark.benchmark(group="augment", timer=time.perf_counter, disable_gc=True, min_time=0.0001)
def test_random_augmentation(benchmark):
    image = torch.rand(3, 32, 32)
    out = benchmark(random_crop_flip, image)
    assert out.shape == (3, 24, 24)


def test_pedantic_inplace_relu(benchmark):
    def setup():
        return (torch.randn(256),), {}

    benchmark.group = "pedantic"
    benchmark.extra_info["inplace"] = True
    result = benchmark.pedantic(torch.relu_, setup=setup, rounds=20, warmup_rounds=2)
    assert (result >= 0).all()


def test_not_a_benchmark():
    assert torch.ones(2).sum() == 2
