"""Benchmark metrics and verdicts as JUnit XML test properties (--junitxml)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest


def _properties(path) -> dict[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    tree = ET.parse(path)
    out: dict[str, dict[str, str]] = {}
    for case in tree.iter("testcase"):
        out[case.get("name", "")] = {
            p.get("name", ""): p.get("value", "") for p in case.iter("property")
        }
    return out


def test_metrics_and_verdicts_in_junit(pytester: pytest.Pytester, run_bench, bench_module) -> None:  # type: ignore[no-untyped-def]
    """Real measurements on tiny workloads: time and op counts, then a compare."""
    pytester.makepyfile(
        test_a=bench_module
        + """

def test_plain():
    assert True
"""
    )
    first = run_bench(
        "--bench-mode=time,ops",
        "--bench-min-run-time=0.02",
        "--bench-save=main",
        "--junitxml=j1.xml",
    )
    assert first.ret == 0
    props = _properties(pytester.path / "j1.xml")
    add = props["test_add"]
    assert float(add["torchbench.time.median_s"]) > 0
    assert int(add["torchbench.time.replicates"]) >= 1
    assert float(add["torchbench.ops.calls_per_run"]) >= 1
    assert "torchbench.verdict.ops" not in add  # nothing to compare with yet
    assert props["test_plain"] == {}
    second = run_bench("--bench-mode=ops", "--bench-compare=main", "--junitxml=j2.xml")
    assert second.ret == 0
    mul = _properties(pytester.path / "j2.xml")["test_mul"]
    assert mul["torchbench.verdict.ops"] == "unchanged"
    assert float(mul["torchbench.delta.ops"]) == 0.0
