"""vocabulary: the one time-unit rule every report and message uses, for any stored value."""

from __future__ import annotations

import math

import pytest

from pytest_torchbench.common.vocabulary import format_seconds, time_unit


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


def test_a_verdict_cannot_be_changed_after_it_is_built() -> None:
    """Each step of the verdict path returns a new verdict (judging/judgement.py): the type says
    so, so no later step can change a verdict that another step or a report already acted on."""
    import dataclasses

    from pytest_torchbench.common.vocabulary import REGRESSION, Verdict

    verdict = Verdict("t.py::t", "ops", REGRESSION, 1.0, 2.0, details=["aten::add 1 -> 2 per call"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.failed = True  # type: ignore[misc]
    assert isinstance(verdict.details, tuple)
    waived = verdict.replace(failed=False)
    explained = verdict.with_details(before=["first"], after=["last"])
    assert waived is not verdict and not waived.failed
    assert explained.details == ("first", "aten::add 1 -> 2 per call", "last")
    assert verdict.details == ("aten::add 1 -> 2 per call",)
    assert Verdict.from_json(explained.to_json()) == explained


def test_verdict_details_read_from_a_file_must_be_lines() -> None:
    """A shard or a re-run's JSON with ``"details": "text"`` is refused (TypeError: the readers
    turn it into one clear line or skip the verdict), not split into one line per character."""
    from pytest_torchbench.common.vocabulary import Verdict

    with pytest.raises(TypeError, match="list of lines"):
        Verdict.from_json({"key": "k", "metric": "ops", "status": "unchanged", "details": "text"})
    with pytest.raises(TypeError):
        Verdict.from_json({"key": "k", "metric": "ops", "status": "unchanged", "details": 5})
