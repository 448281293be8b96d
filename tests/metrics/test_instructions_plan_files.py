"""The baseline's numbers of calls handed to the counting processes (``engines/callgrind/plans.py``,
chosen by ``metrics/instructions.py``'s ``plans_of``): written by the run's main process for
tests that record once (``CallgrindLaunch.hand_over``, set
in its environment by ``LaunchedWorkers.hand_over``), read by a worker before each test's
heap epoch, used by the test's first count only, ignored when not two integers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_torchbench.engines.callgrind import plans
from pytest_torchbench.engines.callgrind.plans import (
    PLANS_VARIABLE,
    load_test_plan,
    read_plan,
    take_test_plan,
)
from pytest_torchbench.judging.results import BenchmarkResult
from pytest_torchbench.metrics.instructions import (
    InstructionsLaunch as CallgrindLaunch,
)
from pytest_torchbench.metrics.instructions import (
    InstructionsMetric,
    plans_of,
)


def write_plans(folder: Path, entries: dict[str, BenchmarkResult]) -> int:
    return plans.write_plans(folder, plans_of(entries))


def entry(key: str, number: int, warmup: int | None, nodeid: str = "") -> BenchmarkResult:
    metric = InstructionsMetric(1000.0, number, {}, warmup=warmup)
    return BenchmarkResult(
        key=key,
        nodeid=nodeid,
        module="t.py",
        label=key,
        sub_label="",
        description="",
        metrics={"instructions": metric},
    )


def test_each_tests_plan_is_read_back_by_its_node_id(tmp_path: Path) -> None:
    odd = "t.py::test_x[\u00e9\\n/../\x1b[31m" + "p" * 300 + "]"
    entries = {
        e.key: e
        for e in [entry("t.py::test_a", 2, 1), entry("t.py::test_b", 100, 100), entry(odd, 1, 1)]
    }
    assert write_plans(tmp_path, entries) == 3
    assert read_plan(tmp_path, "t.py::test_a") == (2, 1)
    assert read_plan(tmp_path, "t.py::test_b") == (100, 100)
    assert read_plan(tmp_path, odd) == (1, 1)
    assert read_plan(tmp_path, "t.py::test_c") is None  # no baseline: adaptive
    assert all(
        len(path.name) == 32 for path in tmp_path.iterdir()
    )  # names of any node id fit a folder


def test_a_test_that_records_several_times_or_under_another_key_gets_no_plan(
    tmp_path: Path,
) -> None:
    entries = {
        e.key: e
        for e in [
            entry("t.py::test_a", 2, 1),
            entry("t.py::test_a [second]", 100, 100, nodeid="t.py::test_a"),
            # its one recording is described: a new plain recording of the test must not take its
            # number
            entry("t.py::test_d [heavy]", 2, 1, nodeid="t.py::test_d"),
            entry("t.py::test_old", 2, None),  # saved before warm-ups were recorded
        ]
    }
    assert write_plans(tmp_path, entries) == 0
    assert not list(tmp_path.iterdir())


def test_a_mangled_file_is_no_plan(tmp_path: Path) -> None:
    write_plans(tmp_path, {"t.py::test_a": entry("t.py::test_a", 2, 1)})
    (file,) = list(tmp_path.iterdir())
    for text in [b"", b"2", b"2 1 3", b"two one", b"\xff\xfe", b"2.5 1", b"9" * 200 + b" 1"]:
        file.write_bytes(text)
        assert read_plan(tmp_path, "t.py::test_a") is None, text
    file.write_bytes(b"2 1\n")
    assert read_plan(tmp_path, "t.py::test_a") == (2, 1)


def test_a_worker_takes_the_folder_out_of_its_environment_and_each_plan_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plans(tmp_path, {"t.py::test_a": entry("t.py::test_a", 2, 1)})
    monkeypatch.setattr(plans, "_plans_folder", None)
    monkeypatch.setenv(PLANS_VARIABLE, str(tmp_path))
    load_test_plan("t.py::test_a")
    assert PLANS_VARIABLE not in os.environ  # a pytest that a test starts finds its own baseline's
    assert take_test_plan() == (2, 1)
    assert take_test_plan() is None  # the test's second recording: adaptive
    load_test_plan("t.py::test_b")
    assert take_test_plan() is None
    load_test_plan("t.py::test_a")  # the folder was kept from the first test
    assert take_test_plan() == (2, 1)


def test_a_save_leaves_the_variable_empty_and_no_test_gets_a_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plans, "_plans_folder", None)
    monkeypatch.setenv(PLANS_VARIABLE, "")
    load_test_plan("t.py::test_a")
    assert take_test_plan() is None
    monkeypatch.setattr(plans, "_plans_folder", None)
    monkeypatch.delenv(PLANS_VARIABLE, raising=False)
    load_test_plan("t.py::test_a")
    assert take_test_plan() is None


def test_a_launched_worker_reads_the_plan_before_it_starts_the_tests_heap_epoch() -> None:
    """What the reading allocates must lie outside the test's epoch (``load_test_plan``)."""
    from pytest_torchbench.engines.launch import WorkerLaunch
    from pytest_torchbench.pytest.workers import IsolatedWorker

    calls: list[str] = []

    class Launch(WorkerLaunch):
        def before_test(self, nodeid: str) -> None:
            calls.append(f"before_test {nodeid}")

        def isolate(self) -> None:
            calls.append("isolate")

    class Item:
        nodeid = "t.py::test_a"

    protocol = IsolatedWorker([Launch()]).pytest_runtest_protocol(Item(), None)  # type: ignore[arg-type]
    next(protocol)  # runs up to the test itself
    assert calls == ["before_test t.py::test_a", "isolate"]


def test_the_launch_hands_the_baselines_plans_over_in_the_runs_folder(tmp_path: Path) -> None:
    entries = {"t.py::test_a": entry("t.py::test_a", 2, 1)}
    variables = CallgrindLaunch().hand_over(entries, tmp_path, {})
    assert variables == {PLANS_VARIABLE: str(tmp_path / "plans")}
    assert read_plan(variables[PLANS_VARIABLE], "t.py::test_a") == (2, 1)


def test_a_base_run_or_rerun_keeps_its_parents_plans(tmp_path: Path) -> None:
    entries = {"t.py::test_a": entry("t.py::test_a", 100, 100)}
    assert CallgrindLaunch().hand_over(entries, tmp_path, {PLANS_VARIABLE: "/parent/plans"}) == {}
    assert CallgrindLaunch().hand_over(None, tmp_path, {PLANS_VARIABLE: ""}) == {}
    assert not (tmp_path / "plans").exists()


def test_no_baseline_no_plan_or_no_room_sets_the_variable_empty(tmp_path: Path) -> None:
    """Set all the same, so that a save and a compare start their workers with the same
    variables."""
    launch = CallgrindLaunch()
    assert launch.hand_over(None, tmp_path, {}) == {PLANS_VARIABLE: ""}
    assert launch.hand_over({}, tmp_path, {}) == {PLANS_VARIABLE: ""}
    several = {e.key: e for e in [entry("t.py::test_a [x]", 2, 1, nodeid="t.py::test_a")]}
    assert launch.hand_over(several, tmp_path, {}) == {PLANS_VARIABLE: ""}  # nothing to plan
    missing = tmp_path / "gone"  # the run's folder cannot take the plans: adaptive, as in a save
    assert launch.hand_over({"t.py::test_a": entry("t.py::test_a", 2, 1)}, missing, {}) == {
        PLANS_VARIABLE: ""
    }


def test_the_controller_hands_the_baseline_over_for_the_run_and_takes_it_back(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``configure_controller`` with the baseline's entries: the variable names the plans in the
    run's folder until the run ends (every process it starts inherits it), then both are gone."""
    from pytest_torchbench.pytest.workers import configure_controller

    monkeypatch.setattr(CallgrindLaunch, "prepare", lambda self, python: None)  # no valgrind needed
    monkeypatch.delenv(PLANS_VARIABLE, raising=False)
    config = pytester.parseconfigure()
    workers = configure_controller(
        config, ["instructions", "ops"], {"t.py::test_a": entry("t.py::test_a", 2, 1)}
    )
    assert workers is not None
    folder = os.environ[PLANS_VARIABLE]
    assert folder == str(workers.dump_dir / "plans") and read_plan(folder, "t.py::test_a") == (2, 1)
    config._ensure_unconfigure()
    assert PLANS_VARIABLE not in os.environ and not workers.dump_dir.exists()
