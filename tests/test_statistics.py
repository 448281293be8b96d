"""pytest-benchmark's statistics, computed by our own code (pytest-benchmark may be absent)."""

from __future__ import annotations

import random

import pytest

from pytest_torchbench.common.statistics import RoundStats


def test_round_stats_by_hand() -> None:
    stats = RoundStats([4.0, 1.0, 3.0, 2.0])
    assert (stats.min, stats.max, stats.mean, stats.median, stats.rounds, stats.total) == (
        1.0,
        4.0,
        2.5,
        2.5,
        4,
        10.0,
    )
    assert (stats.q1, stats.q3, stats.iqr) == (1.5, 3.5, 2.0)
    assert stats.ops == 0.4 and stats.outliers == "2;0"
    assert RoundStats([2.0]).as_dict()["stddev"] == 0.0
    with pytest.raises(ValueError):
        RoundStats([])


@pytest.mark.parametrize("rounds", range(1, 24))
def test_round_stats_match_pytest_benchmark(rounds: int) -> None:
    stats_module = pytest.importorskip("pytest_benchmark.stats")
    data = [random.Random(rounds).lognormvariate(0, 0.3) for _ in range(rounds)]
    theirs = stats_module.Stats()
    for value in data:
        theirs.update(value)
    ours = RoundStats(data).as_dict()
    for field, value in theirs.as_dict().items():
        assert ours[field] == (
            value if isinstance(value, (int, str)) else pytest.approx(value, rel=1e-12)
        ), field
