"""Time judged on rounds measured alternately with a measured base (issue 25, point 2): the paired
head/base ratio arithmetic, and the verdicts it gives (regression, unchanged, improvement, too
noisy), through the same gate the plugin and the CLI call."""
from __future__ import annotations

import pytest

from pytest_torchbench.core import gate
from pytest_torchbench.core.judgement import IMPROVEMENT, REGRESSION, TOO_NOISY, UNCHANGED, Policy
from pytest_torchbench.core.results import BenchmarkResult
from pytest_torchbench.core.statistics import PairedRatios
from pytest_torchbench.metrics.time import TimeMetric, judge_time_rounds


def _time(seconds: float) -> TimeMetric:
    """A measurement whose fastest call is ``seconds`` (a few slower blocks beside it)."""
    return TimeMetric(number_per_run=10, raw_times=[seconds * 10, seconds * 11, seconds * 12])


def _rounds(pairs: list[tuple[float, float]]) -> list[tuple[TimeMetric, TimeMetric]]:
    return [(_time(base), _time(head)) for base, head in pairs]


def test_paired_ratios_arithmetic() -> None:
    """Per round head/base; the median of the ratios, their range and half the range over the
    median; the base's median; pairs that are not positive finite numbers are left out."""
    paired = PairedRatios([(1.0, 1.1), (2.0, 2.0), (4.0, 3.6), (1.0, 1.3), (0.0, 1.0), (1.0, float("nan"))])
    assert paired.rounds == 4
    assert paired.ratios == pytest.approx([1.1, 1.0, 0.9, 1.3])
    assert paired.median == pytest.approx(1.05)  # (1.0 + 1.1) / 2
    assert (paired.low, paired.high) == pytest.approx((0.9, 1.3))
    assert paired.spread == pytest.approx(0.2 / 1.05)
    assert paired.base_median == pytest.approx(1.5)
    assert PairedRatios([(2.0, 3.0)]).spread == 0.0
    with pytest.raises(ValueError):
        PairedRatios([(0.0, 1.0)])


def test_a_slowdown_every_round_sees_fails_on_the_paired_median() -> None:
    """The machine is 30% slower in rounds 3-4 (both sides): unpaired, the head's later rounds
    would look slower; paired, the ratio is the code's +20% in every round."""
    verdict = judge_time_rounds("t", _rounds([(1e-3, 1.2e-3), (1e-3, 1.21e-3), (1.3e-3, 1.56e-3), (1.3e-3, 1.55e-3)]),
                                0.10)
    assert verdict.status == REGRESSION
    assert verdict.delta == pytest.approx(0.2, abs=0.01)
    assert "4 alternated rounds" in verdict.summary and "median +20" in verdict.summary
    assert "round 1 (base first)" in verdict.details[0] and "round 2 (head first)" in verdict.details[1]


def test_drift_alone_is_unchanged() -> None:
    """The machine drifts by 40% between rounds, the code does not change: unchanged."""
    verdict = judge_time_rounds("t", _rounds([(1e-3, 1.01e-3), (1.4e-3, 1.39e-3), (1.2e-3, 1.22e-3)]), 0.10)
    assert verdict.status == UNCHANGED, verdict.summary
    assert verdict.details == []


def test_spread_beyond_the_limit_is_too_noisy_with_its_spread() -> None:
    """Ratios 0.92..1.20 (median 1.075) at a 10% limit: neither failed nor passed, and the summary says by how
    much (half the range over the median) and at which limit."""
    verdict = judge_time_rounds("t", _rounds([(1.0, 0.92), (1.0, 1.20), (1.0, 1.05), (1.0, 1.10)]), 0.10)
    assert verdict.status == TOO_NOISY and not verdict.failed
    assert verdict.summary.startswith("too noisy: \u00b113.0% at a 10% limit"), verdict.summary
    # The same spread at a limit above it is judged.
    assert judge_time_rounds("t", _rounds([(1.0, 0.92), (1.0, 1.20), (1.0, 1.05), (1.0, 1.10)]), 0.15).status \
        == UNCHANGED


def test_every_round_beyond_the_limit_and_the_spread_fails_however_spread() -> None:
    """A 2x slowdown whose rounds spread widely (1.6x-2.6x: +-25%) still fails: every round is
    slower than the limit and than the spread; the same for a speed-up every round sees. Rounds
    all beyond the limit but not beyond their own spread (+17%..+90%, +-29%, seen in an A/A
    run at load 14) are too noisy."""
    assert judge_time_rounds("t", _rounds([(1.0, 1.6), (1.0, 2.6), (1.0, 2.0)]), 0.10).status == REGRESSION
    assert judge_time_rounds("t", _rounds([(1.0, 0.4), (1.0, 0.6), (1.0, 0.5)]), 0.10).status == IMPROVEMENT
    noisy = judge_time_rounds("t", _rounds([(1.0, 1.896), (1.0, 1.169), (1.0, 1.293), (1.0, 1.193)]), 0.10)
    assert noisy.status == TOO_NOISY, noisy.summary


def test_the_gate_judges_time_on_rounds_when_given() -> None:
    """Through the gate: with rounds the single current measurement (10x slower here) does not
    decide; without them it does, as before. A failed regression is marked failed."""
    current = BenchmarkResult("t.py::test_a", "t.py", "test_a", "", "", metrics={"time": _time(1e-2)})
    entry = BenchmarkResult("t.py::test_a", "t.py", "test_a", "", "", metrics={"time": _time(1e-3)})
    policy = Policy()
    unchanged = gate.judge(current, {current.key: entry}, policy,
                           rounds={"time": _rounds([(1e-3, 1e-3), (1e-3, 1.01e-3)])})
    assert [v.status for v in unchanged] == [UNCHANGED]
    one_shot = gate.judge(current, {current.key: entry}, policy)
    assert [v.status for v in one_shot] == [REGRESSION] and one_shot[0].failed
    regressed = gate.judge(current, {current.key: entry}, policy,
                           rounds={"time": _rounds([(1e-3, 2e-3), (1e-3, 2.02e-3)])})
    assert [v.status for v in regressed] == [REGRESSION] and regressed[0].failed
