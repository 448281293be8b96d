"""engines/reference: the reference workload timed beside a benchmark (the machine's own speed)."""

from __future__ import annotations

import torch

from pytest_torchbench.engines import reference, walltime


def test_nothing_sampled_is_no_result_and_a_sample_is_a_time_per_call():
    probe = reference.ReferenceProbe()
    assert probe.result() is None
    probe.sample()
    result = probe.result()
    assert result is not None and set(result) == {"probe", "compute"}
    assert result["probe"] == reference.PROBE
    assert 1e-8 < result["compute"] < 1e-3  # about 4 us here


def test_the_fastest_block_is_kept_and_samples_follow_the_interval():
    ticks = iter(range(1000))
    probe = reference.ReferenceProbe(interval=5.0, clock=lambda: float(next(ticks)))
    probe.sample()  # clock: 0 before, 1 after (20 calls in 1 s)
    assert probe.result() == {"probe": reference.PROBE, "compute": 1.0 / reference.CALLS}
    for _ in range(4):
        probe.maybe_sample()  # clock 2, 3, 4, 5: under 5 s since the last sample ended (at 1)
    assert probe._last == 1.0
    probe.maybe_sample()  # clock 6: 5 s passed, so a block is timed from 7 to 8
    assert probe._last == 8.0


def test_sampling_leaves_the_thread_count_as_it_was():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        reference.ReferenceProbe().sample()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_measurement_carries_the_reference_and_its_cpu_share_leaves_the_probe_out():
    x = torch.ones(16)
    spec = walltime.TimeSpec(min_run_time=0.05, max_run_time=0.1, min_replicates=10)
    measurement = walltime.measure(lambda: x + x, spec)
    assert measurement.metadata["reference"]["probe"] == reference.PROBE
    assert measurement.metadata["reference"]["compute"] > 0
    rounds = walltime.measure_rounds(lambda: x + x, lambda: ((), {}), rounds=3, iterations=2)
    assert rounds.metadata["reference"]["compute"] > 0
