"""judgement: limit parsing, verdicts on synthetic samples."""

from __future__ import annotations

import random

import pytest

from pytest_torchbench.common.vocabulary import (
    IMPROVEMENT,
    NEW,
    NOISY,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED,
    Policy,
)
from pytest_torchbench.judging.judgement import (
    LimitSpecError,
    failure_message,
    judge_metric,
    parse_limits,
)
from pytest_torchbench.judging.results import Environment, TimeMetric
from pytest_torchbench.metrics.time_gate import time_allowance, time_disturbance, time_reference


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("time:5%", {"time": 0.05}),
        ("instructions:1%,time:10%", {"instructions": 0.01, "time": 0.10}),
        (" time : 2.5 % , ops:0 ", {"time": 0.025, "ops": 0.0}),
        ("memory:20%", {"memory": 0.2}),
        ({"time": "5%", "ops": 0}, {"time": 0.05, "ops": 0.0}),
        (None, {}),
    ],
)
def test_parse_limits_good(spec, expected):
    assert parse_limits(spec) == pytest.approx(expected)


@pytest.mark.parametrize(
    "spec, needle",
    [
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
    ],
)
def test_parse_limits_bad(spec, needle):
    with pytest.raises(LimitSpecError, match=needle.replace("(", r"\(")):
        parse_limits(spec)


def _metric(rng, median, spread, n=30, number=100):
    return TimeMetric(
        number_per_run=number,
        raw_times=[number * median * (1 + rng.gauss(0, spread)) for _ in range(n)],
    )


def test_a_a_is_unchanged():
    rng = random.Random(1)
    for _ in range(50):
        verdict = judge_metric(
            "k", "time", _metric(rng, 1e-3, 0.02), _metric(rng, 1e-3, 0.02), Policy()
        )
        assert verdict.status == UNCHANGED and not verdict.failed


def test_twenty_percent_slower_is_a_regression_with_numbers():
    rng = random.Random(2)
    verdict = judge_metric(
        "k", "time", _metric(rng, 1.2e-3, 0.02), _metric(rng, 1e-3, 0.02), Policy()
    )
    assert verdict.status == REGRESSION and verdict.failed
    assert verdict.delta == pytest.approx(0.2, abs=0.03)
    # Issue 27 item 19: "fastest call of 30/30 blocks" read as a fraction; say what is judged.
    assert verdict.summary == (
        "time 927.3 us -> 1.123 ms (+21.1%, limit 10%; judged on the fastest block: "
        "baseline 30 blocks, this run 30; median 994.6 us -> 1.192 ms)"
    )
    message = failure_message([verdict])
    assert message == f"torchbench: k: time regressed: {verdict.summary}"


def test_twenty_percent_faster_is_an_improvement_not_a_failure():
    rng = random.Random(3)
    verdict = judge_metric(
        "k", "time", _metric(rng, 0.8e-3, 0.02), _metric(rng, 1e-3, 0.02), Policy(fail_stale=True)
    )
    assert verdict.status == IMPROVEMENT and not verdict.failed


def test_slow_outliers_do_not_move_the_fastest_call():
    # Preemption adds time to some blocks (here half of them, 3x slower): the median moves, the
    # fastest call does not, so the verdict stays unchanged.
    rng = random.Random(5)
    baseline = _metric(rng, 1e-3, 0.01)
    current = _metric(rng, 1e-3, 0.01)
    current.raw_times = [t * (3 if i % 2 else 1) for i, t in enumerate(current.raw_times)]
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert current.median / baseline.median > 1.5
    assert verdict.status == UNCHANGED and not verdict.failed


# -- the time gate against the noise between runs --------------------------------------------------


def _quiet(metric, share=0.99, load=0.5, history=()):
    metric.cpu_share, metric.load, metric.history = share, load, list(history)
    return metric


def test_time_reference_is_the_slowest_saved_run():
    rng = random.Random(10)
    baseline = _quiet(_metric(rng, 1e-3, 0.01), history=[1.1e-3, 0.95e-3])
    reference, runs = time_reference(baseline)
    assert reference == 1.1e-3
    assert runs == [1.1e-3, 0.95e-3, baseline.fastest]
    alone = _metric(rng, 1e-3, 0.01)
    assert time_reference(alone) == (alone.fastest, [alone.fastest])


def test_a_shift_seen_between_saved_runs_is_not_a_regression():
    # The last saved run at 1.0 ms, an earlier one at 1.15 ms (memory-bound ops shift like this
    # between runs): 1.2 ms now is +20% over the last run but only +4% over the slowest: unchanged.
    rng = random.Random(11)
    baseline = _quiet(_metric(rng, 1.0e-3, 0.01), history=[1.15e-3])
    verdict = judge_metric("k", "time", _quiet(_metric(rng, 1.2e-3, 0.01)), baseline, Policy())
    assert verdict.status == UNCHANGED and not verdict.failed
    assert verdict.delta == pytest.approx(0.2, abs=0.03)
    # without that history the same numbers fail
    alone = judge_metric(
        "k",
        "time",
        _quiet(_metric(rng, 1.2e-3, 0.01)),
        _quiet(_metric(rng, 1.0e-3, 0.01)),
        Policy(),
    )
    assert alone.status == REGRESSION and alone.failed
    # beyond every saved run: fails, and the line says the runs' range
    baseline = _quiet(_metric(rng, 1.0e-3, 0.01), history=[1.02e-3])
    verdict = judge_metric("k", "time", _quiet(_metric(rng, 1.3e-3, 0.01)), baseline, Policy())
    assert verdict.status == REGRESSION
    assert "; 2 saved runs 981.8 us-1.02 ms, +24.3% over the slowest)" in verdict.summary


def test_disturbance_is_the_lowest_cpu_share_below_the_quiet_threshold():
    rng = random.Random(12)
    quiet, busy = _quiet(_metric(rng, 1e-3, 0.01)), _quiet(_metric(rng, 1e-3, 0.01), share=0.45)
    assert time_disturbance(quiet, quiet) is None
    assert time_disturbance(quiet, busy) == 0.45
    assert time_disturbance(busy, quiet) == 0.45
    assert (
        time_disturbance(_metric(rng, 1e-3, 0.01), _metric(rng, 1e-3, 0.01)) is None
    )  # unknown: not disturbed
    assert time_allowance(0.1, None) == 0.1
    assert time_allowance(0.1, 0.5) == pytest.approx(
        1.2
    )  # 1.1 / 0.5 - 1: half the core, twice the time
    assert time_allowance(0.1, 0.25, 1e-3) == pytest.approx(3.4)
    assert time_allowance(0.1, 0.45, 20e-6) == 0.1  # short calls: their fastest call is not moved


def test_busy_machine_slowdown_within_the_allowance_is_noisy_not_failed():
    # both runs busy alike (a baseline at 0.99 is another machine state: metrics/test_time_state.py)
    rng = random.Random(13)
    current = _quiet(_metric(rng, 1.3e-3, 0.01), share=0.5, load=7.9)
    baseline = _quiet(_metric(rng, 1e-3, 0.01), share=0.55)
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert verdict.status == NOISY and not verdict.failed
    assert verdict.summary.endswith(
        ": the machine was busy, a slowdown must exceed 120% to fail; "
        "not failed, rerun on a quieter machine"
    )
    assert "this run: had a CPU 50% of its wall time, load average 7.9" in verdict.details
    assert failure_message([verdict]) == ""


def test_busy_machine_fails_what_the_load_cannot_explain():
    rng = random.Random(14)
    current = _quiet(_metric(rng, 2e-3, 0.01), share=0.7, load=2.9)  # 2x at 70% of a core: fails
    baseline = _quiet(_metric(rng, 1e-3, 0.01), share=0.75)
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert verdict.status == REGRESSION and verdict.failed
    assert (
        "disturbed (CPU share 70% < 90%): slowdowns up to 57% are treated as noise"
        in verdict.details
    )
    assert "this run: had a CPU 70%" in failure_message([verdict])
    current = _quiet(_metric(rng, 2e-3, 0.01), share=0.5, load=7.9)  # 2x at half a core: noisy
    baseline.cpu_share = 0.6
    assert judge_metric("k", "time", current, baseline, Policy()).status == NOISY


def test_busy_machine_short_calls_are_judged_on_the_limit():
    rng = random.Random(16)
    current = _quiet(_metric(rng, 13e-6, 0.01), share=0.3, load=7.9)
    baseline = _quiet(_metric(rng, 10e-6, 0.01), share=0.35)
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert verdict.status == REGRESSION and verdict.failed
    assert any(
        "calls under 100 us have a fastest call other processes do not move" in d
        for d in verdict.details
    )


def test_improvement_needs_to_beat_every_saved_run():
    rng = random.Random(15)
    baseline = _quiet(_metric(rng, 1.0e-3, 0.01), history=[0.75e-3])
    verdict = judge_metric("k", "time", _quiet(_metric(rng, 0.8e-3, 0.01)), baseline, Policy())
    assert verdict.status == UNCHANGED


def test_limits_from_policy_override_the_default():
    rng = random.Random(4)
    current, baseline = _metric(rng, 1.2e-3, 0.01), _metric(rng, 1e-3, 0.01)
    assert (
        judge_metric("k", "time", current, baseline, Policy().with_limits({"time": 0.3})).status
        == UNCHANGED
    )
    assert (
        judge_metric("k", "time", current, baseline, Policy().with_limits({"time": 0.05})).status
        == REGRESSION
    )


def test_new_and_not_comparable():
    rng = random.Random(5)
    current = _metric(rng, 2e-3, 0.01)
    assert judge_metric("k", "time", current, None, Policy()).status == NEW
    env_now = Environment({"torch": "2.13", "python": "3.11"})
    env_then = Environment({"torch": "2.1", "python": "3.11"})
    baseline = _metric(rng, 1e-3, 0.01)
    verdict = judge_metric(
        "k", "time", current, baseline, Policy(), environments=(env_now, env_then)
    )
    assert verdict.status == NOT_COMPARABLE and not verdict.failed
    assert "torch: 2.1 -> 2.13" in verdict.summary
    strict = judge_metric(
        "k",
        "time",
        current,
        baseline,
        Policy(strict_environment=True),
        environments=(env_now, env_then),
    )
    assert strict.failed
    # facts that do not matter for time (cpu_count) keep it comparable
    same = judge_metric(
        "k",
        "time",
        current,
        baseline,
        Policy(),
        environments=(env_now.merged({"cpu_count": "2"}), env_now.merged({"cpu_count": "64"})),
    )
    assert same.status == REGRESSION


# -- instructions: number of calls, readable names, noise frames ---------------------------------

_LONG_KERNEL = (
    "???:void at::native::(anonymous namespace)::direct_copy_kernel<c10::complex<float>, "
    + "std::integral_constant<int, 4>, " * 8
    + "float>(at::TensorIteratorBase&, c10::function_ref<void (char**, long const*, long, long)>, "
    "at::Range) const [clone .isra.0]"
)


def _instructions(total: float, functions: dict[str, float], number: int = 100):
    from pytest_torchbench.judging.results import InstructionsMetric

    return InstructionsMetric(total, number, functions)


def test_a_different_number_of_calls_is_not_comparable_never_a_regression():
    now = _instructions(1_300_000, {"f": 1_300_000}, number=8)
    then = _instructions(1_000_000, {"f": 1_000_000}, number=16)
    verdict = judge_metric("k", "instructions", now, then, Policy())
    assert verdict.status == NOT_COMPARABLE and not verdict.failed
    assert "counted over 8 calls, the baseline over 16" in verdict.summary
    assert judge_metric("k", "instructions", now, then, Policy(strict_environment=True)).failed
    same_number = judge_metric(
        "k", "instructions", now, _instructions(1_000_000, {"f": 1_000_000}, 8), Policy()
    )
    assert same_number.status == REGRESSION


def test_a_change_far_beyond_what_the_number_of_calls_moves_is_judged_across_numbers():
    """Work that grew past two bucket edges is counted over another number than its baseline (the
    plan is not followed that far): "not comparable" would ask for a re-save that accepts it."""
    grown = judge_metric(
        "k",
        "instructions",
        _instructions(3_000_000, {"f": 3_000_000}, number=1),
        _instructions(300_000, {"f": 300_000}, number=100),
        Policy(),
    )
    assert grown.status == REGRESSION and grown.failed
    assert "counted over 1 calls, the baseline over 100" in grown.details[0]
    shrunk = judge_metric(
        "k",
        "instructions",
        _instructions(300_000, {"f": 300_000}, number=100),
        _instructions(3_000_000, {"f": 3_000_000}, number=1),
        Policy(),
    )
    assert shrunk.status == IMPROVEMENT and not shrunk.failed


def test_long_cxx_names_are_shortened_in_messages_and_noise_frames_come_last():
    from pytest_torchbench.engines.callgrind.names import short_function_name
    from pytest_torchbench.judging.judgement import failure_message

    assert len(_LONG_KERNEL) > 400
    short = short_function_name(_LONG_KERNEL)
    assert (
        short
        == "direct_copy_kernel<complex<float>, integral_constant<int, 4>, float> [clone .isra.0]"
    )
    base = {
        _LONG_KERNEL: 1000.0,
        "Python/ceval.c:_PyEval_EvalFrameDefault": 5000.0,
        "./nptl/./nptl/pthread_mutex_lock.c:pthread_mutex_lock@@GLIBC_2.2.5": 100.0,
        "Python/ceval_gil.c:take_gil": 50.0,
    }
    now = dict(base)
    now[_LONG_KERNEL] = 1900.0  # the kernel that changed
    now["./nptl/./nptl/pthread_mutex_lock.c:pthread_mutex_lock@@GLIBC_2.2.5"] = 3100.0  # more noise
    now["Python/ceval_gil.c:take_gil"] = 2050.0
    # nine other small changes: without the noise rule the lock frames would outrank them all
    for i in range(9):
        base[f"lib.c:helper_{i}"] = 100.0
        now[f"lib.c:helper_{i}"] = 110.0 + i
    verdict = judge_metric(
        "k",
        "instructions",
        _instructions(sum(now.values()), now),
        _instructions(sum(base.values()), base),
        Policy(),
    )
    message = failure_message([verdict])
    assert verdict.status == REGRESSION
    assert _LONG_KERNEL not in message and short in message
    lines = verdict.details
    assert "largest |change| first" in lines[0]
    assert lines[1].split()[0] == "+900" and lines[1].endswith(short)
    assert lines[-1].split()[0] == "+5,000" and "2 lock/GIL/thread-local frame(s)" in lines[-1]
    assert "pthread_mutex_lock.c:pthread_mutex_lock" in lines[-1] and "take_gil" in lines[-1]
    assert not any("pthread" in line or "take_gil" in line for line in lines[1:-1])


def test_the_sum_of_the_functions_a_run_does_not_keep_is_named_as_such() -> None:
    # A copy added to a heavy call spreads over many small functions outside the kept ones: their
    # sum is often the largest change, and a bare "[other functions]" read like a function's name.
    from pytest_torchbench.judging.results import InstructionsMetric

    base = {"Python/ceval.c:_PyEval_EvalFrameDefault": 5000.0, InstructionsMetric.OTHER: 1000.0}
    now = {"Python/ceval.c:_PyEval_EvalFrameDefault": 5100.0, InstructionsMetric.OTHER: 1800.0}
    verdict = judge_metric(
        "k",
        "instructions",
        _instructions(sum(now.values()), now),
        _instructions(sum(base.values()), base),
        Policy(),
    )
    assert verdict.status == REGRESSION
    assert verdict.details[1].split()[0] == "+800"
    assert verdict.details[1].endswith(
        "[other functions] (the functions outside those each run keeps, summed)"
    )


_CALLBACKS = [  # torch's kernels as Callgrind names them (from this project's committed baselines)
    "???:void c10::function_ref<void (char**, long const*, long, long)>::callback_fn<"
    "at::native::AVX2::VectorizedLoop2d<at::native::(anonymous namespace)::add_kernel("
    "at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::"
    "{lambda()#7}::operator()() const::{lambda(float, float)#1}, "
    "at::native::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, c10::Scalar const&)::"
    "{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda("
    "at::vec::AVX2::Vectorized<float>, at::vec::AVX2::Vectorized<float>)#1}> >"
    "(long, char**, long const*, long, long)",
    "???:void c10::function_ref<void (char**, long const*, long, long)>::callback_fn<"
    "at::native::AVX2::VectorizedLoop2d<at::native::(anonymous namespace)::div_true_kernel("
    "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const"
    "::{lambda(float, float)#1}, at::native::(anonymous namespace)::div_true_kernel("
    "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const"
    "::{lambda(at::vec::AVX2::Vectorized<float>, at::vec::AVX2::Vectorized<float>)#1}> >"
    "(long, char**, long const*, long, long)",
    "???:at::native::(anonymous namespace)::add_kernel(at::TensorIteratorBase&, "
    "c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const",
]


def test_torchs_kernel_callbacks_read_apart() -> None:
    """Folding every bracket made each kernel ``void c10::function_ref<…>::callback_fn<…>(…)``;
    what tells them apart (the kernel inside the template) is kept, the noise around it goes."""
    from pytest_torchbench.engines.callgrind.names import short_function_name

    assert [short_function_name(name) for name in _CALLBACKS] == [
        "function_ref::callback_fn<VectorizedLoop2d<add_kernel::{lambda}>>",
        "function_ref::callback_fn<VectorizedLoop2d<div_true_kernel::{lambda}>>",
        "add_kernel::{lambda}",
    ]
    assert (
        short_function_name("Python/ceval.c:_PyEval_EvalFrameDefault")
        == "ceval.c:_PyEval_EvalFrameDefault"
    )
    assert len(short_function_name(_CALLBACKS[0], 40)) <= 40


# -- the fastest call ignores lucky blocks; CPU time decides on a busy machine ---------------------


def test_one_lucky_block_does_not_set_the_fastest_call():
    from pytest_torchbench.metrics.time import low_quantile

    assert low_quantile([3.0, 1.0, 2.0]) == 1.0  # under 50 blocks: the fastest
    times = [1.0] * 99 + [0.5]
    assert low_quantile(times) == 1.0  # 100 blocks: the 2nd fastest, not the lucky 0.5
    rng = random.Random(20)
    baseline = _metric(rng, 1e-3, 0.01, n=200)
    baseline.raw_times[7] *= 0.5  # one block twice as fast (a timer glitch, a fast path hit once)
    verdict = judge_metric("k", "time", _metric(rng, 1e-3, 0.01, n=200), baseline, Policy())
    assert verdict.status == UNCHANGED


def _busy(metric, cpu, share=0.3, load=9.0):
    metric.cpu_share, metric.load, metric.cpu_fastest = share, load, cpu
    return metric


def test_busy_machine_fails_a_doubled_cpu_time_whatever_the_wall_time_allows():
    # At a CPU share of 0.3 the wall-time allowance is 267%: a 2x slowdown alone would be noisy;
    # its CPU time per call doubled, which other processes cannot do: it fails.
    rng = random.Random(21)
    baseline = _quiet(_metric(rng, 1e-3, 0.01), share=0.35)
    baseline.cpu_fastest = 1e-3
    verdict = judge_metric("k", "time", _busy(_metric(rng, 2e-3, 0.01), 2e-3), baseline, Policy())
    assert verdict.status == REGRESSION and verdict.failed
    assert "; CPU time per call 1 ms -> 2 ms (+100.0%))" in verdict.summary
    assert (
        "disturbed (CPU share 30% < 90%): judged on CPU time per call, which other processes do "
        "not take from the measuring thread; it fails beyond +50%"
    ) in verdict.details
    # five times the wall time with CPU time that moved little: noisy, and the line says why
    verdict = judge_metric("k", "time", _busy(_metric(rng, 5e-3, 0.01), 1.1e-3), baseline, Policy())
    assert verdict.status == NOISY and not verdict.failed
    assert verdict.summary.endswith(
        "(+10.0%)): the machine was busy, so CPU time decides and it must rise "
        "more than 50% to fail; not failed, rerun on a quieter machine"
    )


def test_cpu_time_is_not_judged_on_a_quiet_machine_or_for_short_calls():
    rng = random.Random(22)
    baseline = _quiet(_metric(rng, 1e-3, 0.01))
    baseline.cpu_fastest = 1e-3
    quiet = _quiet(_metric(rng, 1.02e-3, 0.01))
    quiet.cpu_fastest = 2e-3  # quiet: wall time decides alone (+2%: unchanged), no CPU text
    verdict = judge_metric("k", "time", quiet, baseline, Policy())
    assert verdict.status == UNCHANGED and "CPU time" not in verdict.summary
    short_base = _quiet(_metric(rng, 20e-6, 0.01), share=0.35)
    short_base.cpu_fastest = 20e-6
    verdict = judge_metric(
        "k", "time", _busy(_metric(rng, 21e-6, 0.01), 40e-6), short_base, Policy()
    )
    assert verdict.status == UNCHANGED and "CPU time" not in verdict.summary


def test_cpu_fastest_is_kept_in_json_and_checked():
    from pytest_torchbench.judging.results import TimeMetric as Model

    metric = Model(1, [1e-3, 2e-3], cpu_fastest=0.9e-3)
    data = metric.to_json()
    assert data["cpu_fastest"] == 0.9e-3
    assert Model.from_json(data).cpu_fastest == 0.9e-3
    assert "cpu_fastest" not in Model(1, [1e-3]).to_json()
    with pytest.raises(ValueError, match="cpu_fastest"):
        Model.from_json({**data, "cpu_fastest": -1})


def test_turns_are_kept_in_json_and_checked():
    """How many times a measurement handed the CPU to its pair (engines/duet.py) is stored and
    read back; anything but a count is refused; measured alone, nothing is stored."""
    from pytest_torchbench.judging.results import TimeMetric as Model

    data = Model(1, [1e-3, 2e-3], turns=12).to_json()
    assert data["turns"] == 12 and Model.from_json(data).turns == 12
    assert (
        "turns" not in Model(1, [1e-3]).to_json()
        and Model.from_json(Model(1, [1e-3]).to_json()).turns is None
    )
    for wrong in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="turns"):
            Model.from_json({**data, "turns": wrong})


def test_the_cpu_time_limit_rises_with_the_disturbance():
    from pytest_torchbench.metrics.time_gate import time_cpu_limit

    assert time_cpu_limit(0.1, 0.9) == pytest.approx(0.1)  # as quiet: the limit
    assert time_cpu_limit(0.1, 0.7) == pytest.approx(0.3)
    assert time_cpu_limit(0.1, 0.5) == pytest.approx(0.5)
    assert time_cpu_limit(0.1, 0.1) == pytest.approx(0.5)  # never beyond BUSY_CPU_LIMIT
    assert time_cpu_limit(0.8, 0.3) == 0.8  # a limit above it stays
    # a 20% slowdown of a 1 ms call at a CPU share of 0.85: CPU time +20% > 15%: fails
    rng = random.Random(23)
    baseline = _quiet(_metric(rng, 1e-3, 0.01))
    baseline.cpu_fastest = 1e-3
    verdict = judge_metric(
        "k", "time", _busy(_metric(rng, 1.2e-3, 0.01), 1.2e-3, share=0.85), baseline, Policy()
    )
    assert verdict.status == REGRESSION
    assert "it fails beyond +15%" in verdict.details[-1]


def test_cpu_fastest_is_the_cpu_time_of_the_fastest_block():
    # Code that waits on a clock: a preempted block has the least CPU time, not the least work.
    from torch.utils.benchmark import Measurement
    from torch.utils.benchmark.utils.common import TaskSpec

    walls = [2e-3, 1e-3, 3e-3]
    cpus = [0.4e-3, 0.98e-3, 0.2e-3]
    measurement = Measurement(
        2, walls, TaskSpec("x", "pass"), metadata={"cpu_share": 0.5, "cpu_times": cpus}
    )
    assert TimeMetric.from_measurement(measurement).cpu_fastest == pytest.approx(0.49e-3)
    measurement = Measurement(
        2, walls, TaskSpec("x", "pass"), metadata={"cpu_times": [0.1e-3]}
    )  # not one per block
    assert TimeMetric.from_measurement(measurement).cpu_fastest is None


# -- a slower machine: the reference workloads measured beside each run ----------------------------


def _reference(compute, probe=1):
    return {"probe": probe, "compute": compute}


def _beside(rng, fastest, compute, **quiet):
    """A quiet run of about ``fastest`` per call, its reference workload at ``compute`` per call."""
    metric = _quiet(_metric(rng, fastest, 0.01), **quiet)
    metric.reference = _reference(compute)
    return metric


def test_a_machine_slower_by_as_much_as_the_code_is_noisy_not_failed():
    # The CI run this comes from: 621 ns -> 1.084 us at CPU share 0.99, load 1.0
    rng = random.Random(20)
    baseline = _beside(rng, 621e-9, 4.0e-6)
    current = _beside(rng, 1.084e-6, 7.2e-6)
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert verdict.status == NOISY and not verdict.failed
    assert (
        ": the machine itself was +80.0% slower (a reference workload beside it), a slowdown must "
        "exceed 98% to fail; not failed, rerun when the machine is back to speed" in verdict.summary
    )
    assert (
        "the machine was slower: a reference workload took 7.2 us per call beside this run, 4 us "
        "beside the baseline's latest run (+80.0%), which explains a rise of the fastest call of "
        "up to +98% over that run"
    ) in verdict.details
    # what the slower machine does not explain still fails: 4x the time on a 1.8x slower machine
    current = _beside(rng, 2.5e-6, 7.2e-6)
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert verdict.status == REGRESSION
    assert verdict.details[-1].endswith(
        "explains a rise of the fastest call of up to +98% over that run: not this one"
    )


def test_a_hand_edited_reference_excuses_at_most_three_times_the_time():
    rng = random.Random(25)
    baseline = _beside(rng, 100e-6, 1e-300)  # passes every check: positive, finite
    current = _beside(rng, 1e-3, 4e-6)  # 10x
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert verdict.status == REGRESSION and verdict.failed
    assert (
        "(+200.0% (counted as 3x at most)), which explains a rise of the fastest call of up to "
        "+230%" in verdict.details[-1]
    )
    assert len(verdict.details[-1]) < 300
    current = _beside(rng, 300e-6, 4e-6)  # 3x: within what a 3x slower machine explains
    assert judge_metric("k", "time", current, baseline, Policy()).status == NOISY


def test_the_machine_excuse_is_against_the_run_its_reference_was_measured_beside():
    # an earlier saved run was slow (180 us) and the latest 100 us; the reference rose 1.5x since
    # the latest: 2.5x the latest run is neither the band's noise nor the machine's
    rng = random.Random(26)
    baseline = _beside(rng, 100e-6, 4e-6, history=[180e-6])
    current = _beside(rng, 250e-6, 6e-6)
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert verdict.status == REGRESSION and verdict.failed
    # with a faster earlier run, +50% over the latest is within the machine's +65%
    baseline = _beside(rng, 100e-6, 4e-6, history=[90e-6])
    current = _beside(rng, 150e-6, 6e-6)
    assert judge_metric("k", "time", current, baseline, Policy()).status == NOISY


def test_a_busy_and_slower_machine_excuses_do_not_multiply():
    # 1 ms calls at CPU share 0.5 in both runs (no CPU times: the load allowance, +120%) and a 2x
    # slower reference (+120%): 4x is more than either explains
    rng = random.Random(27)
    baseline = _beside(rng, 1e-3, 4e-6, share=0.5)
    current = _beside(rng, 4e-3, 8e-6, share=0.5)
    assert judge_metric("k", "time", current, baseline, Policy()).status == REGRESSION
    current = _beside(rng, 2e-3, 8e-6, share=0.5)
    assert judge_metric("k", "time", current, baseline, Policy()).status == NOISY


def test_an_improvement_on_a_slower_machine_says_nothing_of_the_machine():
    rng = random.Random(28)
    baseline = _beside(rng, 1e-3, 4e-6)
    current = _beside(rng, 0.5e-3, 8e-6)
    verdict = judge_metric("k", "time", current, baseline, Policy())
    assert verdict.status == IMPROVEMENT
    assert not any("machine" in d for d in verdict.details)


def test_a_reference_within_its_own_spread_changes_nothing():
    rng = random.Random(21)
    baseline = _beside(rng, 1e-3, 4.0e-6)
    current = _beside(rng, 1.2e-3, 4.8e-6)  # +20%: the limit applies as it is
    assert judge_metric("k", "time", current, baseline, Policy()).status == REGRESSION
    current.reference = _reference(5.2e-6)  # +30%: a slower machine
    assert judge_metric("k", "time", current, baseline, Policy()).status == NOISY


@pytest.mark.parametrize(
    "then, now",
    [
        (None, _reference(8e-6)),  # a baseline saved before references were kept
        (_reference(4e-6), None),
        (_reference(4e-6, probe=1), _reference(8e-6, probe=2)),  # another workload: not comparable
        (_reference(1e-320), _reference(4e-6)),  # a ratio that overflows: no evidence
    ],
)
def test_references_that_cannot_be_compared_change_nothing(then, now):
    rng = random.Random(22)
    baseline, current = _quiet(_metric(rng, 1e-3, 0.01)), _quiet(_metric(rng, 1.5e-3, 0.01))
    baseline.reference, current.reference = then, now
    assert judge_metric("k", "time", current, baseline, Policy()).status == REGRESSION


def test_a_faster_machine_now_is_no_excuse_and_no_accusation():
    # no accusation: a slowdown on a faster machine fails as it is (that it is unchanged cannot
    # be told: "not comparable", metrics/test_time_state.py)
    rng = random.Random(23)
    baseline = _quiet(_metric(rng, 1e-3, 0.01))
    baseline.reference = _reference(8e-6)
    current = _quiet(_metric(rng, 1.3e-3, 0.01))
    current.reference = _reference(4e-6)
    assert judge_metric("k", "time", current, baseline, Policy()).status == REGRESSION


def test_reference_round_trips_and_bad_references_are_named():
    rng = random.Random(24)
    metric = _metric(rng, 1e-3, 0.01)
    metric.reference = _reference(4.123456789e-6)
    data = metric.to_json()
    assert data["reference"] == {"probe": 1, "compute": 4.12346e-06}
    assert TimeMetric.from_json(data).reference == {"probe": 1, "compute": 4.12346e-06}
    # a later version's probe, whatever its fields: nothing to compare with, not an error
    assert (
        TimeMetric.from_json(
            {**data, "reference": {"probe": 2, "compute": 1e-6, "cache": 1e-5}}
        ).reference
        is None
    )
    for bad in (
        {"probe": 1},
        {"probe": "1", "compute": 1e-6},
        {"probe": 1, "compute": "x"},
        [1, 2],
        {"probe": 1, "compute": -1.0},
        {"probe": 1, "compute": 1e-6, "extra": 1},
        {"probe": True, "compute": 1e-6},
        {"probe": 1, "compute": float("nan")},
        {"compute": 1e-6},
    ):
        with pytest.raises(ValueError, match="time.reference must be"):
            TimeMetric.from_json({**data, "reference": bad})


def test_memory_saved_beside_instructions_compares_with_a_memory_only_run() -> None:
    """Peak memory is torch's allocations, the same sizes whatever serves them: measured in the
    counted worker (PYTHONMALLOC=malloc, the counting allocator, AVX2 under valgrind) it equalled
    a memory-only run's on every example (docs/design/measurements.md). Only the facts that decide
    it make it not comparable."""
    from pytest_torchbench.common.vocabulary import Environment
    from pytest_torchbench.judging.judgement import environment_differences

    counted = Environment(
        {
            "torch": "2.13.0+cpu",
            "machine": "x86_64",
            "pythonmalloc": "malloc",
            "cpu_capability": "AVX2",
            "allocator": "torchbench-sizeclass:ab",
        }
    )
    native = Environment(
        {
            "torch": "2.13.0+cpu",
            "machine": "x86_64",
            "pythonmalloc": "default",
            "cpu_capability": "AVX512",
        }
    )
    assert environment_differences("memory", native, counted) == []
    other_torch = Environment({**native.facts, "torch": "2.9.1"})
    assert environment_differences("memory", other_torch, counted) == ["torch: 2.13.0+cpu -> 2.9.1"]
