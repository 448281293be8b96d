"""Settling a time regression with the fresh process's verdict (metrics/time.py confirm_time):
pure."""

from __future__ import annotations

import pytest

from pytest_torchbench.common.vocabulary import (
    IMPROVEMENT,
    MISSING,
    NEW,
    NOISY,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED,
    Verdict,
)
from pytest_torchbench.metrics.time_gate import confirm_time

KEY = "t.py::test_x"


def _suspect() -> Verdict:
    return Verdict(
        KEY, "time", REGRESSION, 1e-3, 2e-3, 0.10, None, "time 1 ms -> 2 ms (+100%)", [], True
    )


@pytest.mark.parametrize(
    "status, failed",
    [(UNCHANGED, False), (IMPROVEMENT, False), (NOISY, False), (IMPROVEMENT, True)],
)  # True: a stale baseline, --bench-fail-stale
def test_a_fresh_measurement_within_the_limit_clears_the_slowdown(
    status: str, failed: bool
) -> None:
    suspect = confirm_time(
        _suspect(), Verdict(KEY, "time", status, 1e-3, 1.02e-3, 0.10, None, "", [], failed), None
    )
    assert suspect.status == NOISY and not suspect.failed
    assert (
        "not confirmed: a fresh process measured 1.02 ms (+2.0%), so not failed" in suspect.summary
    )


@pytest.mark.parametrize(
    "again",
    [
        # the fresh process ran other benchmarks of the module but not this one (its name differed
        # there)
        Verdict(KEY, "time", MISSING, 1e-3, None, 0.10, None, "no longer measured", [], False),
        Verdict(KEY, "time", NEW, None, 1e-3, 0.10, None, "no baseline", [], False),
        # the fresh process measured in an environment the baseline is not comparable with
        Verdict(
            KEY, "time", NOT_COMPARABLE, 1e-3, 1e-3, 0.10, None, "different environment", [], False
        ),
    ],
)
def test_a_fresh_verdict_that_is_no_comparison_leaves_the_slowdown_standing(again: Verdict) -> None:
    suspect = confirm_time(_suspect(), again, None)
    assert suspect.failed and suspect.status == REGRESSION, suspect
    assert list(suspect.details) == [
        f"not re-measured in a fresh process (the fresh process gave no comparison for it: "
        f"{again.status}): judged on this run alone"
    ]


def test_a_confirmed_slowdown_fails_with_both_numbers() -> None:
    suspect = confirm_time(
        _suspect(), Verdict(KEY, "time", REGRESSION, 1e-3, 1.9e-3, 0.10, None, "", [], True), None
    )
    assert suspect.failed and suspect.summary.endswith(
        "; confirmed: a fresh process measured 1.9 ms (+90.0%)"
    )
