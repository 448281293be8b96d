"""pytest-torchbench: performance regression testing for PyTorch code, as a pytest plugin."""
from __future__ import annotations

__version__ = "0.1.0"
