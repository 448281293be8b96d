"""torch.compile: a compiled nn.Module, gated on what the compiler does with it
(--bench-mode=compile: its graphs, graph breaks and recompilations) as well as on its instructions
and ops.

backend="eager": dynamo captures the graph and runs it with eager kernels, so the gate sees graph
breaks and recompilations without a C++ compiler (inductor needs one, and compiling with it under
valgrind, in instructions mode's counted workers, would take minutes).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn


class Block(nn.Module):
    """A residual MLP block, the unit a model library compiles."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


@pytest.fixture
def compiled_block() -> nn.Module:
    torch.manual_seed(0)
    return torch.compile(Block().eval(), backend="eager")


# Python-heavy in instructions mode (dynamo's guards, then nn.Module dispatch), as test_nn.py's
# forwards: 3% (README, Figures).
@pytest.mark.benchmark(limits="instructions:3%")
def test_compiled_block_forward(benchmark, compiled_block, generator):
    x = torch.randn(4, 16, generator=generator)
    with torch.no_grad():
        out = benchmark(compiled_block, x)
    assert out.shape == (4, 16)
