"""engines.walltime: replicate blocks, their bounds, and how disturbed the measurement was."""
from __future__ import annotations

import torch

from pytest_torchbench.engines import walltime


def test_measure_records_cpu_share_and_load_and_keeps_to_its_bounds():
    x = torch.ones(16)
    spec = walltime.TimeSpec(min_run_time=0.01, max_run_time=0.2, min_replicates=10, max_replicates=40)
    measurement = walltime.measure(lambda: x + x, spec)
    assert 10 <= len(measurement.raw_times) <= 40
    share = measurement.metadata["cpu_share"]
    assert 0.0 < share <= 1.0  # single-threaded CPU work: this thread's CPU time over wall time
    assert measurement.metadata["load"] is None or measurement.metadata["load"] >= 0.0
    assert min(measurement.raw_times) >= spec.block_time * 0.5  # blocks calibrated to ~block_time


def test_multithreaded_work_has_no_cpu_share():
    # intra-op threads run off the measuring thread: its CPU time says nothing about disturbance
    spec = walltime.TimeSpec(num_threads=2, min_run_time=0.01, max_run_time=0.05, min_replicates=5)
    measurement = walltime.measure(lambda: None, spec)
    assert measurement.metadata["cpu_share"] is None


def test_long_calls_get_at_least_min_blocks_past_max_run_time():
    import time

    spec = walltime.TimeSpec(min_run_time=0.001, max_run_time=0.01, min_blocks=4)
    measurement = walltime.measure(lambda: time.sleep(0.01), spec)  # one call outlasts max_run_time
    assert len(measurement.raw_times) >= 4


def test_each_block_has_its_cpu_time_beside_its_wall_time():
    # Sleeping takes wall time but no CPU time: the two clocks are read separately per block.
    import time

    spec = walltime.TimeSpec(min_run_time=0.001, max_run_time=0.02, min_blocks=3, block_time=0.002)
    measurement = walltime.measure(lambda: time.sleep(0.002), spec)
    cpu_times = measurement.metadata["cpu_times"]
    assert len(cpu_times) == len(measurement.raw_times) >= 3
    assert all(0.0 <= cpu < wall / 2 for cpu, wall in zip(cpu_times, measurement.raw_times))
    x = torch.ones(1024)
    busy = walltime.measure(lambda: x * x, walltime.TimeSpec(min_run_time=0.01, max_run_time=0.05))
    assert sum(busy.metadata["cpu_times"]) > 0.0  # computing takes CPU time


def test_multithreaded_work_has_no_cpu_times():
    spec = walltime.TimeSpec(num_threads=2, min_run_time=0.01, max_run_time=0.05, min_replicates=5)
    assert walltime.measure(lambda: None, spec).metadata["cpu_times"] is None
