"""The project's own benchmark suite: real torch workloads, gated in CI against baselines/main."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def generator() -> torch.Generator:
    """Seeded data: the same tensors every run, so counts and op paths do not depend on values."""
    return torch.Generator().manual_seed(0)
