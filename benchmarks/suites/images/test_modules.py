"""Small modules in inference: conv blocks, a residual block, a depthwise block, a tiny
classifier."""

import imaging
import pytest
import torch
from torch import nn


def conv_block() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.body = nn.Sequential(
            nn.Conv2d(16, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.BatchNorm2d(16),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        return torch.relu(x + self.body(x))


def depthwise() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 24, 1),
        nn.ReLU6(),
        nn.Conv2d(24, 24, 3, padding=1, groups=24),
        nn.ReLU6(),
        nn.Conv2d(24, 16, 1),
    )


def classifier() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


MODULES = {
    "conv_block": conv_block,
    "residual": Residual,
    "depthwise": depthwise,
    "classifier": classifier,
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", ["3x64x64", "3x128x128", "8x3x64x64"])
@pytest.mark.parametrize("name", list(MODULES))
def test_module_forward(benchmark, name, shape, dtype):
    torch.manual_seed(0)
    dims = [int(d) for d in shape.split("x")]
    x = torch.rand(dims, dtype=imaging.DTYPES[dtype]).reshape(-1, *dims[-3:])
    model = MODULES[name]().to(imaging.DTYPES[dtype]).eval()
    with torch.inference_mode():
        out = benchmark(model, x)
    assert out.shape[0] == x.shape[0]
