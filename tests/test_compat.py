"""_compat: the private torch and pytest APIs behind one module, and their fallbacks."""
from __future__ import annotations

import types

import pytest

from pytest_torchbench import _compat


def test_version_tuple() -> None:
    assert _compat.version_tuple("2.13.0+cpu") == (2, 13)
    assert _compat.version_tuple("9.2.1") == (9, 2)
    assert _compat.version_tuple("2") == (2, 0)
    assert _compat.torch_version() >= (2, 1)


def test_function_counts_from_dict_is_torchs_type() -> None:
    counts = _compat.function_counts_from_dict({"a.c:f": 10, "b.c:g": 3})
    assert type(counts).__name__ == "FunctionCounts" and counts.sum() == 13
    assert (counts - _compat.function_counts_from_dict({"a.c:f": 4})).sum() == 9  # FunctionCounts arithmetic


def test_kineto_events_none_when_missing_and_profiler_enabled_false_outside_a_profile() -> None:
    assert _compat.kineto_events(types.SimpleNamespace()) is None
    assert _compat.profiler_enabled() is False


def test_pytest_private_attributes_with_fallbacks() -> None:
    writer = types.SimpleNamespace(fullwidth=132)
    assert _compat.terminal_width(types.SimpleNamespace(_tw=writer)) == 132
    assert _compat.terminal_width(types.SimpleNamespace(), default=80) == 80
    item = types.SimpleNamespace(_fixtureinfo=types.SimpleNamespace(argnames=("benchmark", "n")))
    assert _compat.fixture_argnames(item) == ("benchmark", "n")


@pytest.mark.parametrize("public", ["Metric", "Verdict", "BenchmarkResult", "Policy", "Environment",
                                    "TimeMetric", "InstructionsMetric", "OpsMetric", "MemoryMetric"])
def test_public_api_names(public: str) -> None:
    import pytest_torchbench

    assert public in pytest_torchbench.__all__ and getattr(pytest_torchbench, public) is not None
