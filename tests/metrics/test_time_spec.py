"""Time mode's engine settings from the marker and the session (``metrics.time.time_spec``)."""

from __future__ import annotations

from pytest_torchbench.metrics.time import time_spec
from pytest_torchbench.pytest.marker import BenchOptions
from pytest_torchbench.pytest.session import Naming

NAMING = Naming(nodeid="t.py::f", module="t.py", label="f", sub_label="", description="")


def test_the_least_run_time_is_a_least_even_past_the_most() -> None:
    """``--bench-min-run-time=1`` promises at least a second per benchmark; the measurement loop
    stops at ``max_run_time`` (0.25 s unless the marker says), so the least lifts the most
    (before, a measurement asked for 1 s stopped at 0.25 s). Below it nothing changes, and a
    marker's own ``min_run_time`` still wins over the session's."""
    longer = time_spec(BenchOptions(), NAMING, 1.0)
    assert (longer.min_run_time, longer.max_run_time) == (1.0, 1.0)
    default = time_spec(BenchOptions(), NAMING, None)
    assert (default.min_run_time, default.max_run_time) == (0.1, 0.25)
    marker = time_spec(BenchOptions(min_run_time=0.05, max_run_time=0.5), NAMING, 1.0)
    assert (marker.min_run_time, marker.max_run_time) == (0.05, 0.5)
    # a marker's short max (pytest-benchmark's max_time) with no least asked for stays as it is
    short = time_spec(BenchOptions(max_run_time=0.05), NAMING, None)
    assert (short.min_run_time, short.max_run_time) == (0.1, 0.05)


def test_a_share_of_the_measuring_time_shortens_the_least_and_the_most_run_time(
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """``MeasureContext.share``: a child of an alternated round measures for half its usual
    time (``turns.SHARE_ENV``, set by pytest/base.py), a session judged on rounds alone for a
    tenth; the least blocks and replicates stay. The share is read from the environment: a value
    that is no number in (0, 1] counts as the whole time."""
    from pytest_torchbench.pytest.turns import ROUND_SHARE, SHARE_ENV, measuring_share

    half = time_spec(BenchOptions(), NAMING, None, 0.5)
    assert (half.min_run_time, half.max_run_time) == (0.05, 0.125)
    assert (half.min_replicates, half.min_blocks) == (30, 5)
    asked = time_spec(BenchOptions(), NAMING, 1.0, 0.5)
    assert (asked.min_run_time, asked.max_run_time) == (0.5, 0.5)
    monkeypatch.delenv(SHARE_ENV, raising=False)
    assert measuring_share() == 1.0
    monkeypatch.setenv(SHARE_ENV, str(ROUND_SHARE))
    assert measuring_share() == 0.5
    for wrong in ("0", "-1", "2", "nan", "half"):
        monkeypatch.setenv(SHARE_ENV, wrong)
        assert measuring_share() == 1.0, wrong
