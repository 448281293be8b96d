"""Tests of the profiler engine with real torch (no pytest plugin involved)."""

from __future__ import annotations

import collections
import gzip
import json
import os
import re
from pathlib import Path

import pytest
import torch

from pytest_torchbench.common.text import safe_file_stem
from pytest_torchbench.engines.profiler import (
    ITERATION_MARKER,
    ProfilerActiveError,
    ProfilerOptions,
    ProfilerSession,
    ScheduleOptions,
    count_ops,
    iterations,
    peak_memory,
    profile_run,
    traces,
)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
MiB = 1024 * 1024


@pytest.fixture
def xy() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(4, 4), torch.randn(4, 4)


# --- options --------------------------------------------------------------------------------------


def test_options_defaults_follow_torch() -> None:
    opts = ProfilerOptions()
    assert opts.activities[0] == torch.profiler.ProfilerActivity.CPU
    assert (torch.profiler.ProfilerActivity.CUDA in opts.activities) == torch.cuda.is_available()
    assert opts.schedule is None and not opts.record_shapes


def test_options_from_kwargs_rejects_unknown_key_by_name() -> None:
    with pytest.raises(
        TypeError, match=r"unknown profiler option 'profile_memroy'.*profile_memory"
    ):
        ProfilerOptions.from_kwargs(profile_memroy=True)


def test_options_from_kwargs_coerces_schedule_and_activities() -> None:
    opts = ProfilerOptions.from_kwargs(
        record_shapes=True, schedule={"wait": 1, "warmup": 1, "active": 2}, activities=["cpu"]
    )
    assert opts.record_shapes is True
    assert opts.schedule == ScheduleOptions(wait=1, warmup=1, active=2, repeat=1)
    assert opts.activities == (torch.profiler.ProfilerActivity.CPU,)
    with pytest.raises(TypeError, match="'waitt'"):
        ProfilerOptions.from_kwargs(schedule={"waitt": 1, "warmup": 1, "active": 1})
    with pytest.raises(ValueError, match="'tpu'"):
        ProfilerOptions.from_kwargs(activities=["tpu"])
    with pytest.raises(TypeError, match="with_stack"):
        ProfilerOptions.from_kwargs(with_stack="yes")
    with pytest.raises(ValueError, match="active"):
        ScheduleOptions(wait=0, warmup=0, active=0)


# --- op counts ------------------------------------------------------------------------------------


def test_count_ops_add(xy: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, y = xy
    assert count_ops(lambda: x + y) == {"aten::add": 1.0}


def test_count_ops_mm_counts_nested_ops(xy: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, y = xy
    counts = count_ops(lambda: torch.mm(x, y))
    assert counts["aten::mm"] == 1.0
    assert all(key.startswith("aten::") for key in counts)
    assert list(counts) == sorted(counts)


def test_count_ops_linear_forward() -> None:
    lin = torch.nn.Linear(8, 4)
    inp = torch.randn(2, 8)
    counts = count_ops(lambda: lin(inp))
    assert counts["aten::linear"] == 1.0
    assert counts["aten::addmm"] == 1.0
    assert counts["aten::t"] == 1.0
    assert all(v == int(v) for v in counts.values())


def test_count_ops_backward_step() -> None:
    lin = torch.nn.Linear(8, 4)
    inp = torch.randn(2, 8)

    def step() -> None:
        lin.zero_grad(set_to_none=True)
        lin(inp).sum().backward()

    counts = count_ops(step)
    # forward addmm, backward mm for the weight gradient, sum for the bias gradient
    assert counts["aten::addmm"] == 1.0
    assert counts["aten::mm"] == 1.0
    assert counts["aten::sum"] == 2.0
    assert counts["aten::ones_like"] == 1.0  # the implicit grad_output of .backward()
    assert "autograd::engine::evaluate_function: AddmmBackward0" not in counts


def test_count_ops_deterministic_and_independent_of_iterations() -> None:
    lin = torch.nn.Linear(8, 4)
    inp = torch.randn(2, 8)

    def step() -> None:
        lin.zero_grad(set_to_none=True)
        lin(inp).relu().sum().backward()

    first = count_ops(step)
    assert count_ops(step) == first
    assert count_ops(step, iterations=1) == first
    assert count_ops(step, iterations=5, warmup=0) == first


def test_count_ops_shows_an_extra_clone(xy: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, y = xy
    before = count_ops(lambda: x + y)
    after = count_ops(lambda: (x + y).clone())
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(before) | set(after)}
    assert delta["aten::clone"] == 1.0
    assert delta["aten::copy_"] == 1.0
    assert delta["aten::add"] == 0.0
    assert all(v >= 0 for v in delta.values())


def test_count_ops_by_shape(xy: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, y = xy
    counts = count_ops(lambda: x + y, by_shape=True)
    assert counts == {"aten::add [[4, 4], [4, 4], []]": 1.0}
    z = torch.randn(3)
    counts = count_ops(lambda: (x + y, z + z), by_shape=True)
    assert counts == {"aten::add [[3], [3], []]": 1.0, "aten::add [[4, 4], [4, 4], []]": 1.0}


def test_count_ops_reports_the_common_iteration_not_a_mean(
    xy: tuple[torch.Tensor, torch.Tensor],
) -> None:
    x, y = xy
    calls = {"n": 0}

    def flaky() -> None:
        calls["n"] += 1
        x + y
        if calls["n"] == 3:  # first profiled call (after one warm-up call): a one-off extra op
            x.clone()

    assert count_ops(flaky, iterations=3, warmup=1) == {"aten::add": 1.0}


def test_representative_prefers_majority_then_latest() -> None:
    a = collections.Counter({"aten::add": 1})
    b = collections.Counter({"aten::add": 2})
    assert iterations.representative([b, a, a]) == a
    assert iterations.representative([a, b]) == b


def test_count_ops_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="iterations"):
        count_ops(lambda: None, iterations=0)
    with pytest.raises(ValueError, match="warmup"):
        count_ops(lambda: None, warmup=-1)


# --- peak memory ----------------------------------------------------------------------------------


def test_peak_memory_of_one_mib_tensor() -> None:
    result = peak_memory(lambda: torch.empty(MiB // 4, dtype=torch.float32))
    assert result["cpu_peak_bytes"] >= MiB
    assert result == peak_memory(lambda: torch.empty(MiB // 4, dtype=torch.float32))
    if not torch.cuda.is_available():
        assert result["cuda_peak_bytes"] is None


def test_peak_memory_is_a_peak_not_a_total_and_ignores_preexisting() -> None:
    keep = torch.empty(4 * MiB, dtype=torch.uint8)  # allocated before: not counted

    def alloc_free_alloc() -> torch.Tensor:
        a = torch.empty(MiB, dtype=torch.uint8)
        del a
        return torch.empty(MiB, dtype=torch.uint8) + keep[:MiB]

    result = peak_memory(alloc_free_alloc, iterations=3)
    # peak: the second buffer and the result of "+" alive together
    assert result["cpu_peak_bytes"] == 2 * MiB


class _Record(dict):  # type: ignore[type-arg]
    """A dict that refers to itself: garbage only the cyclic collector frees."""


def _cycle_then_peak() -> list[dict[str, int]]:
    record = _Record(hidden=torch.empty(MiB, dtype=torch.uint8))
    record["self"] = record
    del record  # 1 MiB of garbage in a reference cycle
    info = [{"n": i} for i in range(300)]  # Python objects: they move the collector's count
    torch.empty(MiB, dtype=torch.uint8)
    return info


def test_peak_memory_does_not_depend_on_when_the_collector_runs() -> None:
    """The same call after different numbers of Python objects made before it: a collection
    inside the call freed its cyclic garbage (1 MiB) before its peak in some and not in others."""
    kept = []
    peaks = set()
    for made_before in range(0, 700, 70):
        kept.append([{} for _ in range(made_before)])
        peaks.add(peak_memory(_cycle_then_peak)["cpu_peak_bytes"])
    assert peaks == {2 * MiB}  # the cycle is freed after the call, never inside it


def test_peak_memory_leaves_out_freeing_blocks_older_than_the_call() -> None:
    """The profiler reports freeing an older block only when a profiled call allocated it (it
    knows its size then): counted, that made the peak depend on which calls had been profiled."""
    held: list[torch.Tensor] = []
    peak_memory(lambda: held.append(torch.empty(MiB, dtype=torch.uint8)))  # warm-up + profiled

    def swap() -> torch.Tensor:
        held.clear()  # frees both blocks: the profiled one with its size, the other unseen
        return torch.empty(MiB, dtype=torch.uint8)

    assert peak_memory(swap, warmup=0)["cpu_peak_bytes"] == MiB


# --- profile_run and traces -----------------------------------------------------------------------


def test_profile_run_summary_and_plain_trace(
    tmp_path: Path, xy: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = xy
    summary = profile_run(
        lambda: x + y,
        iterations=3,
        options=ProfilerOptions.from_kwargs(activities=["cpu"]),
        trace_path=tmp_path / "sub" / "t.json",
    )
    assert summary.error is None
    assert summary.trace_path == tmp_path / "sub" / "t.json"
    data = json.loads(summary.trace_path.read_text())
    assert any(ev.get("name") == "aten::add" for ev in data["traceEvents"])
    add = next(op for op in summary.top_ops if op.name == "aten::add")
    assert add.calls == 3 and add.self_cpu_time_us > 0 and add.cpu_total_us >= add.self_cpu_time_us
    assert add.self_device_time_us is None
    assert ITERATION_MARKER not in {op.name for op in summary.top_ops}
    assert "aten::add" in summary.table
    assert json.dumps(summary.to_dict())
    assert not [p for p in (tmp_path / "sub").iterdir() if p.name.startswith(".")]


def test_trace_compressed_when_large(
    tmp_path: Path, xy: tuple[torch.Tensor, torch.Tensor], monkeypatch: pytest.MonkeyPatch
) -> None:
    x, y = xy
    monkeypatch.setattr(traces, "TRACE_COMPRESS_THRESHOLD_BYTES", 100)
    summary = profile_run(
        lambda: x + y, iterations=2, options=ProfilerOptions(), trace_path=tmp_path / "t.json"
    )
    assert summary.error is None
    assert summary.trace_path == tmp_path / "t.json.gz"
    assert not (tmp_path / "t.json").exists()
    with gzip.open(summary.trace_path, "rt") as fh:
        assert "traceEvents" in json.load(fh)


def test_trace_path_ending_in_gz_is_always_compressed(
    tmp_path: Path, xy: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = xy
    summary = profile_run(
        lambda: x + y, iterations=1, options=ProfilerOptions(), trace_path=tmp_path / "t.json.gz"
    )
    assert summary.trace_path == tmp_path / "t.json.gz"
    with gzip.open(summary.trace_path, "rt") as fh:
        json.load(fh)


def test_unwritable_trace_folder_gives_error_not_exception(
    tmp_path: Path, xy: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = xy
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    summary = profile_run(
        lambda: x + y, iterations=1, options=ProfilerOptions(), trace_path=blocker / "t.json"
    )
    assert summary.trace_path is None
    assert summary.error is not None and "\n" not in summary.error
    assert str(blocker / "t.json") in summary.error
    assert summary.top_ops  # the summary is still there


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_trace_folder_gives_error(
    tmp_path: Path, xy: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = xy
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        summary = profile_run(
            lambda: x + y, iterations=1, options=ProfilerOptions(), trace_path=folder / "t.json"
        )
    finally:
        folder.chmod(0o700)
    assert summary.trace_path is None and "Permission" in (summary.error or "")


def test_profile_run_with_schedule_records_only_active_steps(
    xy: tuple[torch.Tensor, torch.Tensor],
) -> None:
    x, y = xy
    opts = ProfilerOptions.from_kwargs(schedule={"wait": 1, "warmup": 1, "active": 2})
    summary = profile_run(lambda: x + y, iterations=4, options=opts, trace_path=None)
    add = next(op for op in summary.top_ops if op.name == "aten::add")
    assert add.calls == 2
    with pytest.raises(ValueError, match="at least 4 iterations"):
        profile_run(lambda: x + y, iterations=3, options=opts, trace_path=None)


# --- session and nesting --------------------------------------------------------------------------


def test_session_exposes_profiler_and_writes_trace(
    tmp_path: Path, xy: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = xy
    session = ProfilerSession(
        ProfilerOptions(record_shapes=True, with_stack=True), trace_path=tmp_path / "s.json"
    )
    with session as s:
        assert isinstance(s.profiler, torch.profiler.profile)
        for _ in range(2):
            x + y
            s.step()
    assert session.error is None
    assert session.trace_path == tmp_path / "s.json" and session.trace_path.exists()
    assert session.table is not None and "aten::add" in session.table
    assert any(e.key == "aten::add" for e in session.key_averages(group_by_input_shape=True))
    assert session.summary().top_ops
    stacks = tmp_path / "stacks.txt"
    session.profiler.export_stacks(str(stacks))
    assert stacks.exists()


def test_session_unwritable_trace_is_kept_as_error(
    tmp_path: Path, xy: tuple[torch.Tensor, torch.Tensor]
) -> None:
    x, y = xy
    blocker = tmp_path / "f"
    blocker.write_text("")
    with ProfilerSession(trace_path=blocker / "s.json") as s:
        x + y
    assert s.trace_path is None and s.error and "could not write profiler trace" in s.error
    assert s.table and "aten::add" in s.table


def test_session_schedule_never_active_reports_nothing_recorded(
    xy: tuple[torch.Tensor, torch.Tensor],
) -> None:
    x, y = xy
    opts = ProfilerOptions.from_kwargs(schedule={"wait": 5, "warmup": 1, "active": 1})
    with ProfilerSession(opts) as s:
        x + y
        s.step()
    assert s.error and "recorded nothing" in s.error


def test_nested_profiler_is_a_clear_error(xy: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, y = xy
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        with pytest.raises(
            ProfilerActiveError, match="a torch profiler is already active in this test"
        ):
            with ProfilerSession():
                pass
        with pytest.raises(ProfilerActiveError):
            count_ops(lambda: x + y)
        with pytest.raises(ProfilerActiveError):
            peak_memory(lambda: x + y)
        with pytest.raises(ProfilerActiveError):
            profile_run(lambda: x + y, iterations=1, options=ProfilerOptions(), trace_path=None)
    # and the outer profiler ending leaves us free to profile again
    assert count_ops(lambda: x + y) == {"aten::add": 1.0}


def test_session_inside_session_is_a_clear_error() -> None:
    with ProfilerSession():
        with pytest.raises(ProfilerActiveError, match="already active"):
            ProfilerSession().__enter__()


# --- file names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "test_id, expected",
    [
        ("tests/a/test_x.py::TestC::test_f[param]", "tests_a_test_x.py__TestC__test_f-param"),
        ("test_x.py::test_f", "test_x.py__test_f"),
        ("test_x.py::test_f[1-2.5]", "test_x.py__test_f-1-2.5"),
    ],
)
def test_safe_file_stem_readable_cases(test_id: str, expected: str) -> None:
    stem = safe_file_stem(test_id)  # readable, then a hash of the full id (see the folding test)
    assert re.fullmatch(re.escape(expected) + "-[0-9a-f]{8}", stem), stem


def test_safe_file_stem_unsafe_parametrisations_stay_distinct() -> None:
    ids = [
        "t.py::test[α]",
        "t.py::test[β]",
        "t.py::test[a/b]",
        "t.py::test[a_b]",
        "t.py::test[a b]",
        "t.py::test[a\\b]",
        "t.py::test[..]",
        't.py::test[<>:"|?*]',
        "t.py::test[😀]",
        "t.py::test[\x00]",
    ]
    stems = [safe_file_stem(i) for i in ids]
    assert len(set(stems)) == len(ids)
    for stem in stems:
        assert stem and len(stem) <= 100
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in stem)
        assert not stem.startswith((".", "-"))
    assert stems == [safe_file_stem(i) for i in ids]  # deterministic


def test_safe_file_stem_truncates_long_ids_with_hash() -> None:
    long_a = "tests/test_x.py::test_f[" + "a" * 500 + "]"
    long_b = "tests/test_x.py::test_f[" + "a" * 499 + "b]"
    a, b = safe_file_stem(long_a), safe_file_stem(long_b)
    assert len(a) <= 100 and len(b) <= 100 and a != b
    assert a.startswith("tests_test_x.py__test_f-aaa")
    assert len(safe_file_stem(long_a, max_length=40)) <= 40


def test_safe_file_stem_edge_cases() -> None:
    assert safe_file_stem("").startswith("test-")
    assert safe_file_stem("///").startswith("test-")
    assert safe_file_stem("CON").startswith("_CON")


# --- CUDA (skipped without a device) --------------------------------------------------------------


@needs_cuda
def test_cuda_counts_and_peak_memory() -> None:
    x = torch.randn(4, 4, device="cuda")
    assert count_ops(lambda: x + x) == {"aten::add": 1.0}
    result = peak_memory(lambda: torch.empty(MiB // 4, device="cuda"))
    assert result["cuda_peak_bytes"] is not None and result["cuda_peak_bytes"] >= MiB
    assert result["cpu_peak_bytes"] == 0


@needs_cuda
def test_cuda_profile_run_has_device_times(tmp_path: Path) -> None:
    x = torch.randn(256, 256, device="cuda")
    summary = profile_run(
        lambda: x @ x, iterations=3, options=ProfilerOptions(), trace_path=tmp_path / "c.json"
    )
    assert summary.error is None
    mm = next(op for op in summary.top_ops if op.name == "aten::mm")
    assert mm.self_device_time_us is not None and mm.device_total_us and mm.device_total_us > 0


def test_safe_file_stem_ids_that_fold_to_one_name_stay_distinct() -> None:
    """Issue 8: ids differing only in characters the rule folds or strips overwrote each other's
    traces."""
    ids = [
        "t.py::test[a]",
        "t.py::test[a.]",
        "t.py::test[a_]",
        "t.py::test[a-]",
        "t.py::test__x",
        "t.py::test::x",
        "t.py::Test/x",
        "t.py::Test_x",
    ]
    stems = [safe_file_stem(i) for i in ids]
    assert len(set(stems)) == len(ids), stems
    assert all(stem.startswith("t.py__") for stem in stems)  # still readable


# --- the shared iteration rule --------------------------------------------------------------------


def test_windows_put_a_time_in_the_window_that_contains_it() -> None:
    windows = iterations.Windows([(30, 40), (10, 20)])
    assert [windows.index(t) for t in (5, 10, 15, 20, 25, 30, 40, 41)] == [
        None,
        0,
        0,
        0,
        None,
        1,
        1,
        None,
    ]
    assert len(windows) == 2


def test_every_profiled_measurement_goes_through_one_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 9: the per-iteration marker logic was written three ways; op counts, peak memory,
    call sites and --bench-profile now all run ``iterations.record``."""
    from pytest_torchbench.engines.profiler import memory, ops

    calls: list[str] = []
    real = iterations.record

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(str(kwargs["what"]))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    for module in (ops, memory, traces):
        monkeypatch.setattr(module, "record", spy)
    x = torch.ones(4, 4)
    count_ops(lambda: x + x)
    peak_memory(lambda: x + x)
    profile_run(
        lambda: x + x,
        iterations=2,
        options=ProfilerOptions.from_kwargs(activities=["cpu"]),
        trace_path=None,
    )
    ops.op_call_sites(lambda: x + x, root=Path.cwd())
    assert calls == ["count_ops", "peak_memory", "profile_run", "op_call_sites"]


# --- call sites -----------------------------------------------------------------------------------


def _helper_that_clones(x: torch.Tensor) -> torch.Tensor:
    y = x + 1
    return y.clone()


def test_op_call_sites_name_the_users_line_and_function() -> None:
    from pytest_torchbench.engines.profiler import op_call_sites

    x = torch.ones(4, 4)
    here = Path(__file__)
    sites = op_call_sites(lambda: torch.mm(x, _helper_that_clones(x)), root=here.parent.parent)
    clone_line = _helper_that_clones.__code__.co_firstlineno + 2
    add_line = clone_line - 1
    assert sites["aten::clone"] == [(f"engines/{here.name}:{clone_line} in _helper_that_clones", 1)]
    # nested ops come from the line too (``x + 1`` copies its scalar as well: two sites)
    assert (f"engines/{here.name}:{clone_line} in _helper_that_clones", 1) in sites["aten::copy_"]
    assert sites["aten::add"] == [(f"engines/{here.name}:{add_line} in _helper_that_clones", 1)]
    (mm_site,) = sites["aten::mm"]
    assert mm_site[0].endswith("in <lambda>")
    # The same keys as count_ops, so a verdict's changed ops can be looked up.
    assert set(sites) == set(count_ops(lambda: torch.mm(x, _helper_that_clones(x))))


def test_op_call_sites_outside_the_root_keep_their_path() -> None:
    from pytest_torchbench.engines.profiler import op_call_sites

    x = torch.ones(2)
    sites = op_call_sites(lambda: x * 2, root=Path("/nonexistent-root"))
    ((site, calls),) = sites["aten::mul"]
    assert site.startswith(str(Path(__file__).parent)) and calls == 1


# --- kernels (the attribution rule runs without a GPU) --------------------------------------------


def test_kernels_are_counted_in_the_iteration_whose_op_launched_them() -> None:
    from pytest_torchbench.engines.profiler.kernels import (
        Activity,
        kernels_per_iteration,
        per_iteration,
    )

    def op(start: int, correlation: int) -> list[Activity]:  # an op and the launch it makes
        return [
            Activity("aten::op", False, start, start + 2, correlation, 0),
            Activity(
                "cudaLaunchKernel", False, start + 1, start + 2, 1000 + correlation, correlation
            ),
        ]

    def kernel(name: str, linked: int) -> Activity:  # kernels run later, on the GPU's clock
        return Activity(name, True, 10_000, 10_001, 1000 + linked, linked)

    events = [
        Activity(ITERATION_MARKER, False, 100, 200, 90, 0),
        Activity(ITERATION_MARKER, False, 300, 400, 91, 0),
        *op(50, 1),
        *op(150, 2),
        *op(160, 3),
        *op(350, 4),
        *op(450, 5),
        # Only the correlation says which call launched a kernel.
        kernel("gemm", 2),
        kernel("relu", 3),
        kernel("gemm", 4),
        kernel("warmup_kernel", 1),
        kernel("after", 5),
        kernel("gemm", 99),
    ]
    counters = kernels_per_iteration(per_iteration(events))
    assert [dict(c) for c in counters] == [{"gemm": 1, "relu": 1}, {"gemm": 1}]


def test_count_kernels_without_cuda_is_a_clear_error() -> None:
    from pytest_torchbench.engines.profiler import NoCudaError, count_kernels

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(NoCudaError, match="no CUDA device"):
        count_kernels(lambda: None)


@needs_cuda
def test_cuda_peak_memory_is_not_reported_for_cpu_code_in_a_process_without_cuda_work(
    tmp_path: Path,
) -> None:
    """Issue 13: the CUDA peak is reported when the process uses CUDA, not a meaningless 0."""
    import subprocess
    import sys

    code = (
        "import torch; from pytest_torchbench.engines.profiler import peak_memory; "
        "print(peak_memory(lambda: torch.ones(64, 64))['cuda_peak_bytes'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "None"


@needs_cuda
def test_cuda_kernel_counts_are_per_call_and_deterministic() -> None:
    from pytest_torchbench.engines.profiler import count_kernels

    x = torch.randn(64, 64, device="cuda")
    one = count_kernels(lambda: x + x)
    assert sum(one.values()) == 1.0 and all(v == int(v) for v in one.values())
    assert count_kernels(lambda: x + x, iterations=5) == one
    two = count_kernels(lambda: (x + x).relu())
    assert sum(two.values()) == 2.0
    assert set(one) < set(two)


@needs_cuda
def test_cuda_activity_is_recorded_by_the_profiler_session(tmp_path: Path) -> None:
    x = torch.randn(64, 64, device="cuda")
    with ProfilerSession(trace_path=tmp_path / "t.json") as session:
        x @ x
    assert session.error is None and session.trace_path is not None
    assert "cuda" in session.trace_path.read_text().lower()  # GPU kernels are in the trace


def test_after_calls_runs_once_after_the_last_call_while_the_profiler_still_records() -> None:
    """gpu_time reads the SM clock there: right after the profiled calls' work, not after the trace
    has been parsed (the device idle by then, its clock anything)."""
    from pytest_torchbench.common.compat import profiler_enabled
    from pytest_torchbench.engines.profiler.iterations import CallHooks, record

    calls: list[str] = []
    record(
        lambda: calls.append("call"),
        iterations=3,
        warmup=1,
        what="this test",
        options=ProfilerOptions(activities=(torch.profiler.ProfilerActivity.CPU,)),
        hooks=CallHooks(after_calls=lambda: calls.append(f"after, recording={profiler_enabled()}")),
    )
    assert calls == ["call"] * 4 + ["after, recording=True"]
    assert not profiler_enabled()


def test_profiler_bookkeeping_warnings_are_kept_from_the_user_and_theirs_are_not() -> None:
    """torch 2.11 warns at every profiler start that it "clears events at the end of each cycle"
    (seen 2026-11-28 on its CUDA build): pytest's warnings summary then showed it under the user's
    test. Around the profiler's own calls that warning is ignored; any other warning is not."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with iterations.profiler_output_silenced():
            warnings.warn(
                "Warning: Profiler clears events at the end of each cycle.Only events from the "
                "current cycle will be reported.To keep events across cycles, set acc_events=True."
            )
            warnings.warn("the user's own warning")
        warnings.warn("Warning: Profiler clears events at the end of each cycle (after the block)")
        with iterations.profiler_output_silenced(
            one_cycle=False
        ):  # a repeating schedule: true there
            warnings.warn(
                "Warning: Profiler clears events at the end of each cycle (a repeating schedule)"
            )
    assert [str(w.message) for w in seen] == [
        "the user's own warning",
        "Warning: Profiler clears events at the end of each cycle (after the block)",
        "Warning: Profiler clears events at the end of each cycle (a repeating schedule)",
    ]
