"""The adaptive rule for the number of counted calls: deterministic, coarse, bounded."""

from __future__ import annotations

import pytest

from pytest_torchbench.engines.callgrind.collect import (
    BUCKET_PLANS,
    MAX_HEAVY_NUMBER,
    REGION_BUDGET,
    SMALL_INSTRUCTIONS,
    SMALL_NUMBER,
    plan_calls,
    plan_followed,
)


@pytest.mark.parametrize("probe", [0, 1, 10_000, 300_000, SMALL_INSTRUCTIONS])
def test_small_benchmarks_keep_a_hundred_calls_and_a_hundred_warm_up_calls(probe):
    assert plan_calls(probe) == (SMALL_NUMBER, SMALL_NUMBER) == (100, 100)


def test_number_is_a_power_of_two_that_keeps_the_region_near_the_budget():
    previous = MAX_HEAVY_NUMBER
    probe = SMALL_INSTRUCTIONS + 1
    assert plan_calls(probe) == (2, 1)  # just above small: under the budget, a power of two
    while probe < REGION_BUDGET * 4:
        number, warmup = plan_calls(probe)
        assert number & (number - 1) == 0 and 1 <= number <= previous <= MAX_HEAVY_NUMBER
        assert warmup == max(1, number // 2)
        assert number == 1 or REGION_BUDGET / 2 < number * probe <= REGION_BUDGET
        previous = number
        probe = probe * 5 // 4
    assert plan_calls(REGION_BUDGET) == (1, 1)
    assert plan_calls(REGION_BUDGET * 1000) == (1, 1)
    assert plan_calls(REGION_BUDGET // 2) == (2, 1)
    assert plan_calls(REGION_BUDGET // 2 + 1) == (1, 1)  # an edge: just above it, the next bucket


def test_a_128x128_blur_is_one_counted_call():
    """1.9M instructions per call (README figures): one counted call, after the caller's first call
    and the probe (3 calls in all; 7 with the old budget of 2**23 and 200 before the adaptive
    rule)."""
    assert plan_calls(1_900_000) == (1, 1)
    assert plan_calls(600_000) == (2, 1)


def test_same_probe_same_plan():
    assert {plan_calls(12_345_678) for _ in range(5)} == {plan_calls(12_345_678)}


def test_the_buckets_are_the_plans_of_the_rule_in_order():
    assert BUCKET_PLANS == ((100, 100), (2, 1), (1, 1))


def test_a_baselines_plan_is_followed_across_one_bucket_edge_both_ways():
    """The probe of a tensordict benchmark lay 0.3% under the small edge; its baseline's probe
    had been over it. The baseline's plan is followed on either side of one edge."""
    assert plan_followed((2, 1), SMALL_INSTRUCTIONS - 1_600)  # baseline heavy, probe small now
    assert plan_followed((100, 100), SMALL_INSTRUCTIONS + 1_600)  # baseline small, probe heavy now
    assert plan_followed((2, 1), 6_400_000)  # 0.8M grown eightfold: judged over the baseline's 2
    assert plan_followed((1, 1), 600_000) and plan_followed((2, 1), 600_000)


def test_a_plan_two_buckets_away_or_not_of_the_rule_is_not_followed():
    # work that became small counted over one call, and the reverse: too little warm-up, too long
    assert not plan_followed((1, 1), 10_000)
    assert not plan_followed((100, 100), 10_000_000)
    # a marker's old number, an edited file
    for edited in [(4, 2), (10, 5), (100, 1), (0, 1), (1, 0), (-3, 5), (10**9, 1), (2, 2)]:
        assert not plan_followed(edited, 600_000), edited
