"""The gate: one pure function for the plugin and the CLI; per-test limits travel with results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_torchbench.cli import compare_sets, main
from pytest_torchbench.common.vocabulary import MISSING, NEW, REGRESSION, UNCHANGED, Policy, Verdict
from pytest_torchbench.judging import gate
from pytest_torchbench.judging.results import BenchmarkResult, OpsMetric
from pytest_torchbench.store.storage import load_set_from_folder, save_set


def _result(key: str, adds: float, limits: dict[str, float] | None = None) -> BenchmarkResult:
    return BenchmarkResult(
        key=key,
        module="test_m.py",
        label=key,
        sub_label="",
        description="",
        metrics={"ops": OpsMetric({"aten::add": adds})},
        limits=dict(limits or {}),
    )


def _base() -> dict[str, BenchmarkResult]:
    return {
        k: _result(k, 1.0) for k in ("test_m.py::loose", "test_m.py::strict", "test_m.py::gone")
    }


def test_per_test_limits_and_the_review_callable() -> None:
    current = [
        _result("test_m.py::loose", 2.0, {"ops": 1.5}),
        _result("test_m.py::strict", 2.0),
        _result("test_m.py::new", 1.0),
    ]
    seen: list[tuple[str, int, bool]] = []

    def review(
        result: BenchmarkResult, verdicts: list[Verdict], baseline: BenchmarkResult | None
    ) -> list[Verdict]:
        seen.append((result.key, len(verdicts), baseline is not None))
        return verdicts

    verdicts = gate.gate(current, _base(), Policy(), review)
    assert [(v.key, v.status, v.failed) for v in verdicts] == [
        ("test_m.py::loose", UNCHANGED, False),  # +100% within its own 150%
        ("test_m.py::new", NEW, False),
        ("test_m.py::strict", REGRESSION, True),  # the default ops limit, 0
        ("test_m.py::gone", MISSING, False),
    ]
    assert seen == [
        ("test_m.py::loose", 1, True),
        ("test_m.py::new", 1, False),
        ("test_m.py::strict", 1, True),
    ]
    assert gate.judge(current[0], None, Policy()) == []  # no baseline set: nothing to judge


def test_per_test_limits_are_saved_with_baselines_and_read_by_the_cli(tmp_path: Path) -> None:
    save_set(tmp_path / "main", _base().values())
    save_set(
        tmp_path / "pr",
        [_result("test_m.py::loose", 2.0, {"ops": 1.5}), _result("test_m.py::strict", 2.0)],
    )
    document = json.loads((tmp_path / "pr/test_m.json").read_text())
    assert document["benchmarks"]["test_m.py::loose"]["limits"] == {"ops": 1.5}
    assert (
        "limits" not in document["benchmarks"]["test_m.py::strict"]
    )  # absent when not set: bytes kept
    verdicts = compare_sets(
        load_set_from_folder(tmp_path / "main", "main"),
        load_set_from_folder(tmp_path / "pr", "pr"),
        Policy(),
    )
    assert {v.key: v.status for v in verdicts}["test_m.py::loose"] == UNCHANGED


def test_cli_and_plugin_give_identical_verdicts_on_the_same_sets(
    bench, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A pytest run compared with baseline set A and saved as B, then ``torchbench compare A B``:
    the same verdicts, including a test whose marker loosens its limit (the CLI ignored it
    before: it failed ``test_loose``, which the pytest run passed) and a missing benchmark."""
    module = """
import pytest, torch

@pytest.mark.benchmark(limits="ops:150%")
def test_loose():
    x = torch.ones(4)
    for _ in range({n}):
        x + 1

@pytest.mark.benchmark
def test_strict():
    x = torch.ones(4)
    for _ in range({n}):
        x + 1
{gone}"""
    gone = "\n@pytest.mark.benchmark\ndef test_gone():\n    torch.ones(2) * 2\n"
    bench.pytester.makepyfile(test_bench=module.format(n=1, gone=gone))
    assert bench.run("--bench-mode=ops", "--bench-save=A").ret == 0
    bench.pytester.makepyfile(test_bench=module.format(n=2, gone=""))
    run = bench.run(
        "--bench-mode=ops", "--bench-compare=A", "--bench-save=B", "--bench-json=run.json"
    )
    run.assert_outcomes(passed=1, failed=1)
    run.stdout.fnmatch_lines(["FAILED test_bench.py::test_strict*"])
    plugin = json.loads((bench.path / "run.json").read_text())["verdicts"]
    assert bench.load("B")["benchmarks"]["test_bench.py::test_loose"]["limits"] == {"ops": 1.5}
    monkeypatch.chdir(bench.path)
    assert main(["compare", "A", "B", "--json", "cli.json"]) == 1
    cli = json.loads((bench.path / "cli.json").read_text())["verdicts"]

    def shown(verdicts: list[dict]) -> list[tuple]:
        return sorted(
            (v["key"], v["metric"], v["status"], v["failed"], v["limit"], v["summary"])
            for v in verdicts
        )

    assert shown(cli) == shown(plugin)
    assert {(v["key"].split("::")[1], v["status"]) for v in cli} == {
        ("test_loose", UNCHANGED),
        ("test_strict", REGRESSION),
        ("test_gone", MISSING),
    }


def test_missing_scope_leaves_out_deselected_tests_and_modules_that_did_not_run() -> None:
    base = {
        k: _result(k, 1.0)
        for k in ("test_m.py::ran", "test_m.py::deselected", "test_m.py::deleted")
    }
    base["other.py::t"] = BenchmarkResult(
        key="other.py::t",
        module="other.py",
        label="t",
        sub_label="",
        description="",
        metrics={"ops": OpsMetric({})},
    )
    scope = gate.missing_scope(
        base,
        modules_run={"test_m.py"},
        nodeids_run={"test_m.py::ran"},
        collected={"test_m.py::ran", "test_m.py::deselected"},
    )
    assert sorted(scope) == ["test_m.py::deleted", "test_m.py::ran"]
    assert [v.key for v in gate.missing(scope, ["test_m.py::ran"], ["ops"])] == [
        "test_m.py::deleted"
    ]


def test_missing_scope_leaves_out_tests_of_modules_narrowed_to_some_nodes() -> None:
    base = {k: _result(k, 1.0) for k in ("test_m.py::ran", "test_m.py::left_out")}
    collected = {"test_m.py::ran"}  # `pytest test_m.py::ran` collects only that node
    whole = gate.missing_scope(
        base, modules_run={"test_m.py"}, nodeids_run=collected, collected=collected
    )
    assert sorted(whole) == [
        "test_m.py::left_out",
        "test_m.py::ran",
    ]  # the file ran whole: left_out is gone
    narrowed = gate.missing_scope(
        base,
        modules_run={"test_m.py"},
        nodeids_run=collected,
        collected=collected,
        narrowed={"test_m.py"},
    )
    assert sorted(narrowed) == ["test_m.py::ran"]


def test_narrowed_modules_are_those_named_only_by_node_ids(tmp_path: Path) -> None:
    from pytest_torchbench.pytest.session_facts import narrowed_modules

    root = tmp_path
    assert narrowed_modules(
        ["tests/test_a.py::test_x", "tests/test_b.py", "test_c.py::T::t"],
        root / "tests" / "..",
        root,
    ) == {"tests/test_a.py", "test_c.py"}
    assert (
        narrowed_modules(["tests/test_a.py::test_x", "tests"], root, root) == set()
    )  # its folder ran whole
    assert narrowed_modules(["test_a.py::test_x[1]"], root / "tests", root) == {"tests/test_a.py"}
