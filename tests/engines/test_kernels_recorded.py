"""The rule that ties GPU activity to iterations, on every profiler event of a real CUDA run.

``data/cuda-events-h200.json`` was recorded on an NVIDIA H200 (torch 2.11.0+cu130): four workloads
(a 1024-element add, a 2048² matmul, an MLP forward+backward, a conv), 3 iterations each inside the
iteration marker. With CUDA activity on, the profiler records each marker twice (the CPU range and
a CUDA-side annotation with the same correlation id): the rule must count 12 iterations, not 24.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from pytest_torchbench.engines.profiler.iterations import ITERATION_MARKER, Windows
from pytest_torchbench.engines.profiler.kernels import (
    Activity,
    DeviceProfile,
    busy_ns,
    per_iteration,
)

RECORDING = Path(__file__).parent / "data" / "cuda-events-h200.json"
WORKLOADS = ("add", "mm", "mlp", "conv")


@pytest.fixture(scope="module")
def events() -> list[Activity]:
    data = json.loads(RECORDING.read_text())
    assert data["order"] == list(WORKLOADS) and data["iterations_each"] == 3
    return [
        Activity(
            e["name"],
            e["device_type"].rsplit(".", 1)[-1] == "CUDA",
            e["start_ns"],
            e["start_ns"] + e["duration_ns"],
            e["correlation_id"],
            e["linked_correlation_id"],
        )
        for e in data["events"]
    ]


def test_each_iteration_is_delimited_by_the_cpu_side_of_its_marker_only(
    events: list[Activity],
) -> None:
    markers = [e for e in events if e.name == ITERATION_MARKER]
    assert (
        len(markers) == 24 and sum(e.on_device for e in markers) == 12
    )  # the duplicate the GPU showed
    assert len(per_iteration(events)) == 12


def test_every_call_of_a_workload_launches_the_same_kernels(events: list[Activity]) -> None:
    iterations = per_iteration(events)
    by_workload = [iterations[i : i + 3] for i in range(0, 12, 3)]
    totals = {}
    for name, group in zip(WORKLOADS, by_workload):
        profile = DeviceProfile(group)
        counters = [collections.Counter(a.name for a in it.activities) for it in group]
        assert counters[0] == counters[1] == counters[2], name
        totals[name] = sum(profile.kernel_counts().values())
    assert totals == {"add": 1, "mm": 1, "mlp": 15, "conv": 4}
    mlp = DeviceProfile(by_workload[2]).kernel_counts()
    assert mlp["Memset (Device)"] == 2  # memsets count as activities (zero_grad, reductions)


def test_the_launching_op_of_each_kernel_is_known(events: list[Activity]) -> None:
    iterations = per_iteration(events)
    assert set(iterations[0].launchers) == {"aten::add"}
    assert set(iterations[3].launchers) == {"aten::mm"}
    assert "aten::cudnn_convolution" in iterations[9].launchers
    # The MLP's backward kernels are launched from autograd's thread: still this iteration's.
    assert {"aten::gelu_backward", "aten::addmm"} <= set(iterations[6].launchers)


def test_device_time_is_the_kernels_own_busy_time(events: list[Activity]) -> None:
    """The device-side marker starts at the call's first kernel, but covers only kernels launched
    from the marker's own thread: the MLP's backward (autograd's thread) lies outside it. So device
    time is the union of the call's own activities, found through their launching ops."""
    iterations = per_iteration(events)
    device_spans = sorted(
        (e.start_ns, e.end_ns) for e in events if e.name == ITERATION_MARKER and e.on_device
    )
    assert len(device_spans) == len(iterations)
    for index, (it, (start, end)) in enumerate(zip(iterations, device_spans)):
        first, last = min(a.start_ns for a in it.activities), max(a.end_ns for a in it.activities)
        assert first == start
        busy = busy_ns(it.activities)
        assert 0 < busy <= last - first
        if WORKLOADS[index // 3] != "mlp":
            assert last == end
        else:
            assert last > end  # backward kernels, after the forward's annotation ended
    mlp = [busy_ns(it.activities) for it in iterations[6:9]]
    assert max(mlp) / min(mlp) - 1 < 0.01  # device time is steady where the host's span is not
    hosts = [it.host_ns for it in iterations[6:9]]
    assert max(hosts) / min(hosts) > 2  # the first call's host span was 5.6x the last's


def test_overlapping_activities_are_busy_time_once() -> None:
    def kernel(start: int, end: int) -> Activity:
        return Activity("k", True, start, end, 0, 1)

    assert busy_ns([kernel(0, 10), kernel(5, 15), kernel(20, 30)]) == 25
    assert busy_ns([kernel(0, 10), kernel(2, 3)]) == 10
    assert busy_ns([]) == 0


def test_activities_launched_outside_every_call_belong_to_none() -> None:
    """A flush between calls (or the profiler's own work) launches kernels outside the markers."""
    events = [
        Activity(ITERATION_MARKER, False, 100, 200, 1, 0),
        Activity("aten::mm", False, 110, 150, 2, 0),
        Activity("cudaLaunchKernel", False, 120, 130, 10, 2),
        Activity("aten::zero_", False, 250, 260, 3, 0),  # the flush, after the call's marker
        Activity("cudaMemsetAsync", False, 251, 255, 11, 3),
        Activity("gemm", True, 1000, 1100, 10, 2),
        Activity("memset", True, 1100, 1200, 11, 3),
        Activity(ITERATION_MARKER, True, 1000, 1100, 1, 0),  # the marker's device-side copy
    ]
    (only,) = per_iteration(events)
    assert [a.name for a in only.activities] == ["gemm"] and only.launchers == ["aten::mm"]
    assert len(Windows([(100, 200)])) == 1


def test_kernels_launched_outside_any_op_count_for_their_call() -> None:
    """A CUDA graph's replay (or a raw launch from an extension) has no op: its kernels carry no
    link, only the correlation id of the runtime call that launched them."""
    events = [
        Activity(ITERATION_MARKER, False, 100, 200, 1, 0),
        Activity("cudaGraphLaunch", False, 110, 120, 50, 0),
        Activity("graph_kernel_a", True, 1000, 1100, 50, 0),
        Activity("graph_kernel_b", True, 1100, 1300, 50, 0),
    ]
    (only,) = per_iteration(events)
    assert [a.name for a in only.activities] == ["graph_kernel_a", "graph_kernel_b"]
    assert only.launchers == ["cudaGraphLaunch", "cudaGraphLaunch"]
    assert busy_ns(only.activities) == 300


def test_a_runtime_call_outside_any_op_takes_no_op_s_kernels() -> None:
    """CUPTI's ids and the ops' ids are two counters: a ``cudaDeviceSynchronize`` in the call (no
    op around it, no link) whose CUPTI id equals an earlier op's id must not move that op's
    kernels."""
    events = [
        Activity(ITERATION_MARKER, False, 100, 200, 1, 0),
        Activity("aten::add", False, 110, 120, 5, 0),
        Activity("cudaLaunchKernel", False, 111, 115, 7, 5),
        Activity(ITERATION_MARKER, False, 300, 400, 2, 0),
        Activity("cudaDeviceSynchronize", False, 310, 320, 5, 0),  # CUPTI id 5, like aten::add's
        Activity("add_kernel", True, 1000, 1100, 7, 5),
    ]
    first, second = per_iteration(events)
    assert [a.name for a in first.activities] == ["add_kernel"] and first.launchers == ["aten::add"]
    assert second.activities == []
