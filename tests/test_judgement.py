"""judgement: Mann-Whitney against scipy, limit parsing, verdicts on synthetic samples."""
from __future__ import annotations

import random

import pytest
from scipy.stats import mannwhitneyu

from pytest_torchbench.judgement import (
    IMPROVEMENT, NEW, NOT_COMPARABLE, REGRESSION, UNCHANGED, LimitSpecError, Policy,
    failure_message, judge_metric, mann_whitney_greater, parse_limits,
)
from pytest_torchbench.results import Environment, TimeMetric


def _scipy(current, baseline, method="auto"):
    return mannwhitneyu(current, baseline, alternative="greater", method=method).pvalue


@pytest.mark.parametrize("m, n", [(3, 4), (5, 5), (8, 8), (4, 12), (8, 30)])
def test_exact_branch_matches_scipy(m, n):
    rng = random.Random(m * 100 + n)
    for shift in (0.0, 0.5, 2.0):
        current = [rng.random() + shift for _ in range(m)]
        baseline = [rng.random() for _ in range(n)]
        assert mann_whitney_greater(current, baseline) == pytest.approx(
            _scipy(current, baseline, "exact"), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("m, n", [(9, 9), (30, 30), (20, 45)])
def test_asymptotic_branch_matches_scipy(m, n):
    rng = random.Random(m + n)
    for shift in (0.0, 0.1, 0.5):
        current = [rng.gauss(1 + shift, 0.2) for _ in range(m)]
        baseline = [rng.gauss(1, 0.2) for _ in range(n)]
        assert mann_whitney_greater(current, baseline) == pytest.approx(
            _scipy(current, baseline, "asymptotic"), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("m, n", [(5, 5), (30, 30)])
def test_ties_use_the_tie_corrected_normal_approximation(m, n):
    rng = random.Random(7)
    current = [rng.choice([1.0, 2.0, 3.0]) for _ in range(m)]
    baseline = [rng.choice([1.0, 2.0]) for _ in range(n)]
    assert mann_whitney_greater(current, baseline) == pytest.approx(
        _scipy(current, baseline, "asymptotic"), rel=1e-9)


def test_degenerate_samples():
    assert mann_whitney_greater([], [1.0]) == 1.0
    assert mann_whitney_greater([1.0] * 5, [1.0] * 5) == 1.0  # all tied: zero variance
    assert 0 < mann_whitney_greater([2.0] * 3, [1.0] * 3) < 0.06


@pytest.mark.parametrize("spec, expected", [
    ("time:5%", {"time": 0.05}),
    ("instructions:1%,time:10%", {"instructions": 0.01, "time": 0.10}),
    (" time : 2.5 % , ops:0 ", {"time": 0.025, "ops": 0.0}),
    ("memory:20%", {"memory": 0.2}),
    ({"time": "5%", "ops": 0}, {"time": 0.05, "ops": 0.0}),
    (None, {}),
])
def test_parse_limits_good(spec, expected):
    assert parse_limits(spec) == pytest.approx(expected)


@pytest.mark.parametrize("spec, needle", [
    ("time", "cannot read 'time'"),
    ("time:-5%", "cannot read"),
    ("time:5%%", "cannot read"),
    ("time:5", "limit time:5 has no '%'; write time:5%"),
    ("memory:0.2", "write memory:0.2%"),
    ({"time": "5"}, "write time:5%"),
    ("speed:5%", "unknown metric 'speed'"),
    ("", "empty limits"),
    (",", "empty limits"),
    ({"time": True}, "must be a percentage"),
    ({"time": -1}, "must be >= 0"),
    ({"time": "x"}, "must be a percentage"),
    (5, "must be a string"),
])
def test_parse_limits_bad(spec, needle):
    with pytest.raises(LimitSpecError, match=needle.replace("(", r"\(")):
        parse_limits(spec)


def _metric(rng, median, spread, n=30, number=100):
    return TimeMetric(number_per_run=number,
                      raw_times=[number * median * (1 + rng.gauss(0, spread)) for _ in range(n)])


def test_a_a_is_unchanged():
    rng = random.Random(1)
    for _ in range(50):
        verdict = judge_metric("k", "time", _metric(rng, 1e-3, 0.02), _metric(rng, 1e-3, 0.02), Policy())
        assert verdict.status == UNCHANGED and not verdict.failed


def test_twenty_percent_slower_is_a_regression_with_numbers():
    rng = random.Random(2)
    verdict = judge_metric("k", "time", _metric(rng, 1.2e-3, 0.02), _metric(rng, 1e-3, 0.02), Policy())
    assert verdict.status == REGRESSION and verdict.failed
    assert verdict.delta == pytest.approx(0.2, abs=0.03)
    assert verdict.p_value < 0.001
    assert verdict.summary.startswith("time 994.6 us -> 1.192 ms (+19.8%, limit 10%, ")
    assert "Mann-Whitney p=" in verdict.summary and "n=30/30" in verdict.summary
    message = failure_message([verdict])
    assert message == f"torchbench: k: time regressed: {verdict.summary}"


def test_twenty_percent_faster_is_an_improvement_not_a_failure():
    rng = random.Random(3)
    verdict = judge_metric("k", "time", _metric(rng, 0.8e-3, 0.02), _metric(rng, 1e-3, 0.02),
                           Policy(fail_stale=True))
    assert verdict.status == IMPROVEMENT and not verdict.failed


def test_twenty_percent_but_insignificant_is_unchanged():
    # three noisy samples each: the medians differ by 20% but no test can call that significant
    verdict = judge_metric("k", "time", TimeMetric(1, [1.2e-3, 0.8e-3, 1.7e-3]),
                           TimeMetric(1, [1.0e-3, 1.4e-3, 0.7e-3]), Policy())
    assert verdict.delta == pytest.approx(0.2)
    assert verdict.p_value is not None and verdict.p_value >= 0.001
    assert verdict.status == UNCHANGED and not verdict.failed


def test_limits_from_policy_override_the_default():
    rng = random.Random(4)
    current, baseline = _metric(rng, 1.2e-3, 0.01), _metric(rng, 1e-3, 0.01)
    assert judge_metric("k", "time", current, baseline, Policy().with_limits({"time": 0.3})).status == UNCHANGED
    assert judge_metric("k", "time", current, baseline, Policy().with_limits({"time": 0.05})).status == REGRESSION


def test_new_and_not_comparable():
    rng = random.Random(5)
    current = _metric(rng, 2e-3, 0.01)
    assert judge_metric("k", "time", current, None, Policy()).status == NEW
    env_now = Environment({"torch": "2.13", "python": "3.11"})
    env_then = Environment({"torch": "2.1", "python": "3.11"})
    baseline = _metric(rng, 1e-3, 0.01)
    verdict = judge_metric("k", "time", current, baseline, Policy(), env_now, env_then)
    assert verdict.status == NOT_COMPARABLE and not verdict.failed
    assert "torch: 2.1 -> 2.13" in verdict.summary
    strict = judge_metric("k", "time", current, baseline, Policy(strict_environment=True), env_now, env_then)
    assert strict.failed
    # facts that do not matter for time (cpu_count) keep it comparable
    same = judge_metric("k", "time", current, baseline, Policy(),
                        env_now.merged({"cpu_count": "2"}), env_now.merged({"cpu_count": "64"}))
    assert same.status == REGRESSION


# -- instructions: number of calls, readable names, noise frames ---------------------------------

_LONG_KERNEL = (
    "???:void at::native::(anonymous namespace)::direct_copy_kernel<c10::complex<float>, "
    + "std::integral_constant<int, 4>, " * 8
    + "float>(at::TensorIteratorBase&, c10::function_ref<void (char**, long const*, long, long)>, "
    "at::Range) const [clone .isra.0]"
)


def _instructions(total: float, functions: dict[str, float], number: int = 100):
    from pytest_torchbench.results import InstructionsMetric

    return InstructionsMetric(total, number, functions)


def test_a_different_number_of_calls_is_not_comparable_never_a_regression():
    now = _instructions(2_000_000, {"f": 2_000_000}, number=8)
    then = _instructions(1_000_000, {"f": 1_000_000}, number=16)
    verdict = judge_metric("k", "instructions", now, then, Policy())
    assert verdict.status == NOT_COMPARABLE and not verdict.failed
    assert "counted over 8 calls, the baseline over 16" in verdict.summary
    assert judge_metric("k", "instructions", now, then, Policy(strict_environment=True)).failed
    same_number = judge_metric("k", "instructions", now, _instructions(1_000_000, {"f": 1_000_000}, 8), Policy())
    assert same_number.status == REGRESSION


def test_long_cxx_names_are_shortened_in_messages_and_noise_frames_come_last():
    from pytest_torchbench.judgement import failure_message, short_function_name

    assert len(_LONG_KERNEL) > 400
    short = short_function_name(_LONG_KERNEL)
    assert short == "void at::native::(anonymous namespace)::direct_copy_kernel<…>(…) const [clone .isra.0]"
    base = {_LONG_KERNEL: 1000.0, "Python/ceval.c:_PyEval_EvalFrameDefault": 5000.0,
            "./nptl/./nptl/pthread_mutex_lock.c:pthread_mutex_lock@@GLIBC_2.2.5": 100.0,
            "Python/ceval_gil.c:take_gil": 50.0}
    now = dict(base)
    now[_LONG_KERNEL] = 1900.0  # the kernel that changed
    now["./nptl/./nptl/pthread_mutex_lock.c:pthread_mutex_lock@@GLIBC_2.2.5"] = 3100.0  # more noise
    now["Python/ceval_gil.c:take_gil"] = 2050.0
    # nine other small changes: without the noise rule the lock frames would outrank them all
    for i in range(9):
        base[f"lib.c:helper_{i}"] = 100.0
        now[f"lib.c:helper_{i}"] = 110.0 + i
    verdict = judge_metric("k", "instructions", _instructions(sum(now.values()), now),
                           _instructions(sum(base.values()), base), Policy())
    message = failure_message([verdict])
    assert verdict.status == REGRESSION
    assert _LONG_KERNEL not in message and short in message
    lines = verdict.details
    assert "largest |change| first" in lines[0]
    assert lines[1].split()[0] == "+900" and lines[1].endswith(short)
    assert lines[-1].split()[0] == "+5,000" and "2 lock/GIL/thread-local frame(s)" in lines[-1]
    assert "pthread_mutex_lock.c:pthread_mutex_lock" in lines[-1] and "take_gil" in lines[-1]
    assert not any("pthread" in line or "take_gil" in line for line in lines[1:-1])
