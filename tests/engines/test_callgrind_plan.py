"""The adaptive rule for the number of counted calls: deterministic, coarse, bounded."""
from __future__ import annotations

import pytest

from pytest_torchbench.engines.callgrind.collect import REGION_BUDGET, SMALL_NUMBER, plan_calls


@pytest.mark.parametrize("probe", [1, 10_000, 300_000, REGION_BUDGET // 128])
def test_small_benchmarks_keep_a_hundred_calls_and_a_hundred_warm_up_calls(probe):
    assert plan_calls(probe) == (SMALL_NUMBER, SMALL_NUMBER) == (100, 100)


def test_number_is_a_power_of_two_that_keeps_the_region_near_the_budget():
    previous = 64
    probe = REGION_BUDGET // 128 + 1
    while probe < REGION_BUDGET * 4:
        number, warmup = plan_calls(probe)
        assert number == warmup and number & (number - 1) == 0 and 1 <= number <= previous <= 64
        assert number == 1 or REGION_BUDGET / 2 < number * probe <= REGION_BUDGET
        previous = number
        probe = probe * 5 // 4
    assert plan_calls(REGION_BUDGET) == (1, 1)
    assert plan_calls(REGION_BUDGET * 1000) == (1, 1)
    assert plan_calls(REGION_BUDGET // 4) == (4, 4)
    assert plan_calls(REGION_BUDGET // 4 + 1) == (2, 2)  # an edge: just above it, the next bucket


def test_same_probe_same_plan():
    assert {plan_calls(12_345_678) for _ in range(5)} == {plan_calls(12_345_678)}
