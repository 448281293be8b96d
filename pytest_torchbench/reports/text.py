"""The escaping and number-formatting rules of every report: they live in ``pytest_torchbench.text``
(one layer down, so that metrics can use them too); this name is kept for reports and users."""
from __future__ import annotations

from ..text import finite, markdown_code_block, markdown_text, safe_number, safe_text

__all__ = ["safe_text", "markdown_text", "markdown_code_block", "safe_number", "finite"]
