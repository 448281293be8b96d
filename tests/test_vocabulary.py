"""vocabulary: the one time-unit rule every report and message uses, for any stored value."""

from __future__ import annotations

import math

import pytest

from pytest_torchbench.core.vocabulary import format_seconds, time_unit


@pytest.mark.parametrize(
    "seconds, unit",
    [
        (2.5, "s"),
        (1.0, "s"),
        (0.999, "ms"),
        (1e-3, "ms"),
        (3.2e-5, "us"),
        (1e-6, "us"),
        (5e-9, "ns"),
        (1e-12, "ns"),  # torch's select_unit says "s" here
        (0.0, "s"),
        (math.nan, "s"),
        (math.inf, "s"),
        (-1.0, "s"),  # torch's select_unit raises on these
    ],
)
def test_time_unit_covers_every_value_a_baseline_can_hold(seconds: float, unit: str) -> None:
    assert time_unit(seconds)[0] == unit


def test_format_seconds_is_four_significant_digits_and_never_raises() -> None:
    assert format_seconds(1.23456e-3) == "1.235 ms"
    assert format_seconds(12.3456e-6) == "12.35 us"
    assert format_seconds(0.0) == "0 s"
    assert format_seconds(-2e-3) == "-2 ms"
    assert format_seconds(math.inf) == "inf s" and format_seconds(math.nan) == "nan s"
