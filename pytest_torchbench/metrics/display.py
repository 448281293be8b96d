"""A metric's display part: how its values read in the terminal tables, JUnit properties, the
Markdown summary and the HTML cards. Read by the reports only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..common.text import finite
from ..common.vocabulary import Plot, as_float, format_seconds, time_unit
from .identity import Identity


class Display(Identity):
    """How a metric's values are shown; every default derives from :meth:`headline`."""

    #: Title of the terminal table block (``{unit}`` is the block's unit, see ``table_scale``).
    table_title: ClassVar[str] = ""
    #: When set, this metric's verdict details explain a regression of any metric of the same
    #: benchmark (Markdown folds them under this title): function counts, op counts.
    explains: ClassVar[str | None] = None
    #: What the delta in the table compares (time: "delta of the fastest call", what it judges).
    delta_title: ClassVar[str] = "delta"

    def table_scale(self, headlines: Sequence[float]) -> tuple[str, float]:
        """The unit and scale shared by one terminal table block."""
        return "", 1.0

    def cell(self, value: Any, scale: float) -> str:
        """The terminal table cell of a value (without its delta and mark)."""
        return self.format_value(as_float(self.headline(value)))

    def judged_cell(self, value: Any, scale: float) -> str | None:
        """The figure the verdict judges, shown before the delta in a compared cell, when it is
        not the one :meth:`cell` shows (time shows the median and judges the fastest call: a
        delta beside the median alone reads as the median's); None when the cell shows it."""
        return None

    def cell_delta(self, delta: float) -> str:
        """A finite delta in a terminal table cell."""
        return f" ({delta * 100:+.1f}%)" if abs(delta) >= 0.001 else f" ({delta * 100:+.2f}%)"

    def junit_properties(self, value: Any, prefix: str) -> list[tuple[str, object]]:
        """``(name, value)`` JUnit properties of a value; ``prefix`` ends with a dot."""
        return [(f"{prefix}{self.name}.value", round(self.headline(value), 6))]

    def figures(self, current: Any, baseline: Any | None, changed: bool, top: int) -> list[Plot]:
        """The plots of this value on an HTML card (``changed``: the benchmark regressed or
        improved; unchanged ones keep their cards short)."""
        return []


class SecondsDisplay:
    """Showing for metrics whose headline is seconds (time, gpu_time): one unit per table block
    (ns, us, ms, s), the delta of the fastest call (what they judge), with one decimal."""

    delta_title: ClassVar[str] = "the fastest call (judged) and its delta"

    def format_value(self, number: float) -> str:
        return format_seconds(number)

    def table_scale(self, headlines: Sequence[float]) -> tuple[str, float]:
        return time_unit(min((v for v in headlines if finite(v) and v > 0), default=1.0))

    def cell_delta(self, delta: float) -> str:
        return f" ({delta * 100:+.1f}%)"
