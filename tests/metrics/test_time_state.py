"""Time against a stored baseline when the machine's state differs (metrics/time.py,
``machine_state``): a verdict the state could have made is "not comparable", never a direction."""

from __future__ import annotations

import pytest

from pytest_torchbench.common.vocabulary import (
    IMPROVEMENT,
    NOISY,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED,
    Policy,
)
from pytest_torchbench.judging.judgement import judge_metric
from pytest_torchbench.metrics.identity import Identity
from pytest_torchbench.metrics.registry import get
from pytest_torchbench.metrics.time import TimeMetric
from pytest_torchbench.metrics.time_gate import WORSE_BOTH, WORSE_NOW, WORSE_THEN, machine_state


def _time(
    fastest: float,
    share: float | None = None,
    load: float | None = None,
    cpus: int | None = None,
    reference: float | None = None,
) -> TimeMetric:
    """30 blocks of one call, the fastest ``fastest`` seconds, measured in the state given."""
    return TimeMetric(
        number_per_run=1,
        raw_times=[fastest * (1.0 + i / 100) for i in range(30)],
        cpu_share=share,
        load=load,
        cpus=cpus,
        reference={"probe": 1, "compute": reference} if reference is not None else None,
    )


def _judged(current: TimeMetric, baseline: TimeMetric) -> str:
    return judge_metric("k", "time", current, baseline, Policy()).status


def test_a_baseline_saved_busy_gives_no_improvement_and_no_unchanged() -> None:
    # the A/A of issue 48: saved at CPU share 0.15, compared at 0.63, the fastest call -20%
    baseline = _time(1.0e-3, share=0.147, load=7.1, cpus=2)
    verdict = judge_metric("k", "time", _time(0.8e-3, share=0.629), baseline, Policy())
    assert verdict.status == NOT_COMPARABLE and not verdict.failed
    assert verdict.summary.startswith(
        "time: not comparable: the machine's state differs from the baseline's (the measuring "
        "thread had a core 15% of its wall time beside the baseline, 63% beside this run); the "
        "fastest call 1 ms -> 800 us (-20.0%, limit 10%) can be that state's doing, not the "
        "code's (the worse state at the save added time to the baseline): not judged; compare "
        "with a base measured in the same job (--bench-compare=REV), or save and compare in the "
        "same state"
    )
    assert "--bench-compare=REV" in verdict.summary
    assert "baseline: had a CPU 15% of its wall time, load average 7.1" in verdict.details
    # a +20% slowdown read as unchanged there is not passed either
    assert _judged(_time(1.02e-3, share=0.629), baseline) == NOT_COMPARABLE
    # slower than a baseline measured in the worse state: a real slowdown, at least that large,
    # judged as before (a call of 100 us or more on a busy machine: listed, not failed)
    assert _judged(_time(1.3e-3, share=0.629), baseline) == NOISY
    assert machine_state(_time(1e-3, share=0.629), baseline).worse == WORSE_THEN


def test_a_busy_run_now_gives_no_slowdown_and_no_unchanged() -> None:
    baseline = _time(1.0e-3, share=0.49)
    for slower in (1.0, 1.3, 2.0):
        verdict = judge_metric("k", "time", _time(slower * 1e-3, share=0.15), baseline, Policy())
        assert verdict.status == NOT_COMPARABLE and not verdict.failed, slower
    # faster in the worse state: a real improvement
    assert _judged(_time(0.6e-3, share=0.15), baseline) == IMPROVEMENT
    assert machine_state(_time(1e-3, share=0.15), baseline).worse == WORSE_NOW


def test_shares_within_the_ratio_are_judged_as_before() -> None:
    # 0.65 and 0.5: 1.3 times, not more: the same state; the load allowance decides (noisy)
    assert machine_state(_time(1e-3, share=0.5), _time(1e-3, share=0.65)) is None
    assert _judged(_time(1.3e-3, share=0.5), _time(1e-3, share=0.65)) == NOISY
    # 0.7 and 0.98 are not (an A/B +20% read -26.6% there)
    assert machine_state(_time(1e-3, share=0.98), _time(1e-3, share=0.7)).worse == WORSE_THEN
    # starved, but not alike: 19% and 11% of a core are another state (an A/A add went +692%)
    assert machine_state(_time(1e-3, share=0.11), _time(1e-3, share=0.19)).worse == WORSE_NOW
    assert _judged(_time(0.5e-3, share=0.11), _time(1e-3, share=0.19)) == IMPROVEMENT
    assert _judged(_time(1e-3, share=0.19), _time(0.5e-3, share=0.11)) == NOISY  # slower: kept


def test_calls_under_100_us_are_judged_whatever_the_shares() -> None:
    # their fastest call is not moved by other processes (SHORT_CALL): the limit applies
    assert machine_state(_time(60e-6, share=0.9), _time(60e-6, share=0.3)) is None
    assert _judged(_time(60e-6, share=0.9), _time(60e-6, share=0.3)) == UNCHANGED
    assert _judged(_time(80e-6, share=0.9), _time(60e-6, share=0.3)) == REGRESSION
    # the reference still says when the machine itself was slower at the save
    slow_save = _time(60e-6, share=0.3, reference=8e-6)
    assert _judged(_time(60e-6, share=0.9, reference=4e-6), slow_save) == NOT_COMPARABLE
    assert _judged(_time(1.3e-3, share=0.99), _time(1e-3, share=0.95)) == REGRESSION
    assert _judged(_time(0.7e-3, share=0.99), _time(1e-3, share=0.95)) == IMPROVEMENT


def test_a_machine_slower_at_the_save_gives_no_improvement_and_no_unchanged() -> None:
    # the reference workload took 8 us beside the baseline, 4 us now: the baseline is inflated
    baseline = _time(1e-3, share=0.99, reference=8e-6)
    verdict = judge_metric(
        "k", "time", _time(0.7e-3, share=0.99, reference=4e-6), baseline, Policy()
    )
    assert verdict.status == NOT_COMPARABLE
    assert (
        "a reference workload took 8 us per call beside the baseline, 4 us beside this run: the "
        "machine was +100.0% slower when the baseline was measured" in verdict.summary
    )
    assert _judged(_time(1.0e-3, share=0.99, reference=4e-6), baseline) == NOT_COMPARABLE
    assert _judged(_time(1.3e-3, share=0.99, reference=4e-6), baseline) == REGRESSION
    # within 25% the reference says nothing (its own spread)
    assert _judged(_time(1.0e-3, share=0.99, reference=6.6e-6), baseline) == UNCHANGED


def test_without_cpu_shares_a_full_machine_is_the_state() -> None:
    # more than one thread: no CPU share; load 7.5 on 2 CPUs beside this run, 1 beside the save
    baseline = _time(1e-3, load=1.0, cpus=2, reference=5e-6)
    full = {"load": 7.5, "cpus": 2, "reference": 5e-6}
    verdict = judge_metric("k", "time", _time(38e-3, **full), baseline, Policy())
    assert verdict.status == NOT_COMPARABLE and not verdict.failed
    assert (
        "load average 1.0 on 2 CPUs beside the baseline, 7.5 on 2 beside this run (1.5 or more "
        "per CPU: a benchmark not timed on one thread waits for CPUs, which the one-thread "
        "reference workload does not show)" in verdict.summary
    )
    assert _judged(_time(0.5e-3, **full), baseline) == IMPROVEMENT
    # both full: each side's threads waited in their own way; nothing is judged
    both = _time(1e-3, load=5.6, cpus=2)
    assert machine_state(_time(1e-3, **full), both).worse == WORSE_BOTH
    for now in (0.5e-3, 1e-3, 38e-3):
        assert _judged(_time(now, **full), both) == NOT_COMPARABLE
    # a quiet machine on both sides: judged as before
    quiet = {"load": 1.2, "cpus": 2}
    assert machine_state(_time(1e-3, **quiet), baseline) is None
    assert _judged(_time(1.3e-3, **quiet), baseline) == REGRESSION


@pytest.mark.parametrize(
    "baseline",
    [
        _time(1e-3, load=7.5),  # saved before the CPU count was kept: its load per core unknown
        _time(1e-3),  # saved before CPU shares and loads were kept
    ],
)
def test_a_baseline_without_the_state_is_judged_as_before(baseline: TimeMetric) -> None:
    assert machine_state(_time(1e-3, load=7.5, cpus=2), baseline) is None
    assert _judged(_time(1.3e-3, load=7.5, cpus=2), baseline) == REGRESSION
    assert _judged(_time(0.7e-3, load=7.5, cpus=2), baseline) == IMPROVEMENT
    # one side with a CPU share, the other without: no share to compare
    assert machine_state(_time(1e-3, share=0.2), baseline) is None


def test_the_runnable_threads_during_the_measurement_decide_over_the_load_average() -> None:
    # the load average lags: a minute of quiet before the hogs; the threads sampled during the
    # measurement saw them
    baseline = _time(1e-3, load=2.0, cpus=2)
    baseline.runnable = 1.2
    current = _time(80e-3, load=2.3, cpus=2)
    current.runnable = 4.1
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert verdict.status == NOT_COMPARABLE
    assert "runnable threads 1.2 on 2 CPUs beside the baseline, 4.1 on 2 beside this run" in (
        verdict.summary
    )
    # one side without them: the load averages, which saw nothing here
    current.runnable = None
    assert machine_state(current, baseline) is None
    data = baseline.to_json()
    assert data["runnable"] == 1.2 and TimeMetric.from_json(data).runnable == 1.2


def test_the_cpu_count_is_kept_in_json_and_checked() -> None:
    data = _time(1e-3, load=3.2, cpus=2).to_json()
    assert data["cpus"] == 2 and TimeMetric.from_json(data).cpus == 2
    assert "cpus" not in _time(1e-3).to_json() and TimeMetric.from_json(data).load == 3.2
    for wrong in (0, 1.5, "2", True):
        assert "time.cpus is" in (
            get("time", Identity).invalid_number({**data, "cpus": wrong}) or ""
        )
