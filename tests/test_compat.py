"""_compat: the private torch and pytest APIs behind one module, and their fallbacks."""

from __future__ import annotations

import types

import pytest

from pytest_torchbench.common import compat as _compat


def test_version_tuple() -> None:
    assert _compat.version_tuple("2.13.0+cpu") == (2, 13)
    assert _compat.version_tuple("9.2.1") == (9, 2)
    assert _compat.version_tuple("2") == (2, 0)
    assert _compat.torch_version() >= (2, 1)


def test_function_counts_from_dict_is_torchs_type() -> None:
    counts = _compat.function_counts_from_dict({"a.c:f": 10, "b.c:g": 3})
    assert type(counts).__name__ == "FunctionCounts" and counts.sum() == 13
    assert (
        counts - _compat.function_counts_from_dict({"a.c:f": 4})
    ).sum() == 9  # FunctionCounts arithmetic


def test_kineto_events_none_when_missing_and_profiler_enabled_false_outside_a_profile() -> None:
    assert _compat.kineto_events(types.SimpleNamespace()) is None
    assert _compat.profiler_enabled() is False


def test_pytest_private_attributes_with_fallbacks() -> None:
    writer = types.SimpleNamespace(fullwidth=132)
    assert _compat.terminal_width(types.SimpleNamespace(_tw=writer)) == 132
    assert _compat.terminal_width(types.SimpleNamespace(), default=80) == 80
    item = types.SimpleNamespace(_fixtureinfo=types.SimpleNamespace(argnames=("benchmark", "n")))
    assert _compat.fixture_argnames(item) == ("benchmark", "n")


@pytest.mark.parametrize(
    "public",
    [
        "Metric",
        "Verdict",
        "BenchmarkResult",
        "Policy",
        "Environment",
        "TimeMetric",
        "InstructionsMetric",
        "OpsMetric",
        "MemoryMetric",
    ],
)
def test_public_api_names(public: str) -> None:
    import pytest_torchbench

    assert public in pytest_torchbench.__all__ and getattr(pytest_torchbench, public) is not None


def test_recompile_reasons_recovered_where_compilation_metrics_lack_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch 2.5.1's CompilationMetrics has no recompile_reason: dynamo's reason function is wrapped
    and its first answer kept for the record of the same code (checked for real with 2.5.1 by
    benchmarks/torch_versions.sh; here with stand-ins, on any torch)."""
    import dataclasses

    from torch._dynamo import convert_frame, utils

    @dataclasses.dataclass
    class OldMetrics:  # the fields of 2.5.1's record that matter here
        co_name: str
        co_filename: str
        co_firstlineno: int
        cache_size: int

    def reasons(cache_entry, frame):  # type: ignore[no-untyped-def]
        return ["tensor 'L['x']' size mismatch at index 0. expected 4, actual 5", "a later guard"]

    monkeypatch.setattr(utils, "CompilationMetrics", OldMetrics)
    monkeypatch.setattr(
        convert_frame, "get_and_maybe_log_recompilation_reason", reasons, raising=False
    )
    monkeypatch.setattr(_compat, "_recompile_reasons", {})
    _compat._record_recompile_reasons()
    wrapped = convert_frame.get_and_maybe_log_recompilation_reason
    assert wrapped is not reasons
    code = types.SimpleNamespace(co_filename="/m.py", co_firstlineno=3, co_name="f")
    assert wrapped(None, types.SimpleNamespace(f_code=code)) == reasons(
        None, None
    )  # answers as before
    _compat._record_recompile_reasons()
    assert convert_frame.get_and_maybe_log_recompilation_reason is wrapped  # wrapped once
    records = [OldMetrics("f", "/m.py", 3, 0), OldMetrics("f", "/m.py", 3, 1)]
    monkeypatch.setattr(utils, "get_compilation_metrics", lambda: records)
    monkeypatch.setattr(utils, "clear_compilation_metrics", lambda: None)
    first, again = _compat.dynamo_take_frame_compiles()
    assert first["recompile_reason"] is None
    assert again["recompile_reason"] == "tensor 'x' size mismatch at index 0. expected 4, actual 5"


def test_the_sm_clock_is_read_through_one_nvml_handle(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sm_clock_reader`` takes torch's NVML handle once and reads the clock through it; without
    pynvml, or where NVML fails, there is no reader (gpu_time then records no clock)."""
    import sys
    import types

    import torch

    from pytest_torchbench.common import compat as _compat

    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    assert _compat.sm_clock_reader(0) is None
    fake = types.ModuleType("pynvml")
    fake.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    reads: list[tuple[object, int]] = []

    def clock_info(handle: object, kind: int) -> int:
        reads.append((handle, kind))
        return 1470

    fake.nvmlDeviceGetClockInfo = clock_info  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    handles: list[int] = []

    def handler(device: int) -> str:
        handles.append(device)
        return f"h{device}"

    monkeypatch.setattr(torch.cuda, "_get_pynvml_handler", handler, raising=False)
    reader = _compat.sm_clock_reader(3)
    assert reader is not None and reader() == 1470 and reader() == 1470
    assert handles == [3] and reads[-1] == ("h3", 1)

    def broken(device: int) -> object:
        raise RuntimeError("NVML: driver not loaded")

    monkeypatch.setattr(torch.cuda, "_get_pynvml_handler", broken, raising=False)
    assert _compat.sm_clock_reader(0) is None


def test_cpu_allocation_events_give_each_blocks_address_and_size() -> None:
    """The one private view of the profiler that gives a block's address (memory's peak of the
    call's own blocks): an allocation and its free, with the same address."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        block = torch.empty(1 << 16, dtype=torch.uint8)
        del block
    events = _compat.cpu_allocation_events(prof)
    assert events is not None
    sizes = [(int(e.extra_fields.ptr), int(e.extra_fields.alloc_size)) for e in events]
    (address, size), *_ = [s for s in sizes if s[1] == 1 << 16]
    assert (address, -size) in sizes
    assert _compat.cpu_allocation_events(object()) is None  # not a profiler: "not available"
