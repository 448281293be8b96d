"""The child pytest runs: the re-run that explains failures measured in other processes, its
command line (pure)."""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_torchbench.pytest.children import (
    Invocation,
    judging_options,
    passed_through,
    pytest_launcher,
    rerun_command,
)


def test_every_option_is_kept_but_the_paths_the_cache_the_debugger_and_basetemp() -> None:
    """A conftest's own options (``--device cpu``) travel too: without them a test may not run, or
    a conftest may refuse to start. The paths pytest parsed are left out (the re-run names the
    failed tests), once each and from the end, so an option's value equal to one stays."""
    args = [
        "-k",
        "tests",
        "tests",
        "-n",
        "2",
        "-p",
        "no:benchmark",
        "-pmyplugin",
        "--import-mode=importlib",
        "-o",
        "addopts=",
        "--rootdir",
        "/r",
        "-c",
        "/r/tox.ini",
        "--bench-mode=instructions,ops",
        "--device",
        "cpu",
        "--lf",
        "--pdb",
        "--basetemp",
        "/tmp/b",
        "--lfnf=all",
        "--sw",
        "t.py::t[a b]",
    ]
    assert passed_through(args, ["tests", "t.py::t[a b]"]) == [
        "-k",
        "tests",
        "-n",
        "2",
        "-p",
        "no:benchmark",
        "-pmyplugin",
        "--import-mode=importlib",
        "-o",
        "addopts=",
        "--rootdir",
        "/r",
        "-c",
        "/r/tox.ini",
        "--bench-mode=instructions,ops",
        "--device",
        "cpu",
    ]


def test_the_rerun_is_serial_native_and_judged_like_this_run(tmp_path: Path) -> None:
    command = rerun_command(
        Invocation(args=("-p", "no:benchmark", "-n", "4"), rootdir=tmp_path, xdist=True),
        ["b/test_x.py::test[1]", "a/test_y.py::T::t", "b/test_x.py::test[1]"],
        ["ops"],
        ["--bench-compare=main", "--bench-fail=ops:5%"],
        tmp_path / "r.json",
    )
    # this interpreter (never under valgrind), started as this pytest was: the same sys.path[0]
    launcher = pytest_launcher()
    assert launcher[0] == sys.executable and command[: len(launcher)] == launcher
    command = ["python", "-m", "pytest", *command[len(launcher) :]]
    assert command[3:9] == [
        "-p",
        "no:benchmark",
        "-n",
        "4",
        "-n",
        "0",
    ]  # -n 0 comes after the user's -n: it wins
    assert (
        "--bench-mode=ops" in command
        and "--bench-compare=main" in command
        and "--bench-fail=ops:5%" in command
    )
    assert command[-2:] == [
        f"{tmp_path}/a/test_y.py::T::t",
        f"{tmp_path}/b/test_x.py::test[1]",
    ]  # once each
    assert "-n" not in rerun_command(
        Invocation(args=(), rootdir=tmp_path), ["t.py::t"], ["ops"], [], tmp_path / "r.json"
    )


def test_the_rerun_judges_with_the_same_baseline_limits_and_strictness(tmp_path: Path) -> None:
    assert judging_options("main", tmp_path, None, False) == [
        "--bench-compare=main",
        f"--bench-baselines-dir={tmp_path}",
    ]
    assert judging_options("HEAD~1", tmp_path, "ops:10%", True)[2:] == [
        "--bench-fail=ops:10%",
        "--bench-strict",
    ]


def test_the_rerun_keeps_its_temporary_files_to_itself(tmp_path: Path) -> None:
    """Without a --basetemp of its own, each re-run took the next /tmp/pytest-of-<user>/pytest-N
    and pointed pytest-current at it: the user looking there for the failed test's tmp_path found
    the re-run's, and a few re-runs made the run's own folder the next pytest's to delete."""
    command = rerun_command(
        Invocation(args=("--basetemp", "/tmp/mine"), rootdir=tmp_path),
        ["t.py::t"],
        ["time"],
        [],
        tmp_path / "r.json",
    )
    assert "/tmp/mine" not in command  # pytest empties its basetemp when it starts
    assert f"--basetemp={tmp_path / 'basetemp'}" in command


def test_the_rerun_names_its_tests_relative_to_the_folder_it_starts_in(tmp_path: Path) -> None:
    """pytest refuses a path argument holding ``[`` (it reads a parameter id), and a CI job's
    checkout may be called ``job[3]``: relative to the re-run's folder the brackets are gone."""
    root = tmp_path / "job[3]"
    (root / "tests").mkdir(parents=True)
    command = rerun_command(
        Invocation(args=(), rootdir=root, cwd=root),
        ["tests/test_y.py::t[1]"],
        ["ops"],
        [],
        tmp_path / "r.json",
    )
    assert command[-1] == "tests/test_y.py::t[1]"
    assert (
        rerun_command(
            Invocation(args=(), rootdir=root, cwd=root / "tests"),
            ["tests/test_y.py::t"],
            ["ops"],
            [],
            tmp_path / "r.json",
        )[-1]
        == "test_y.py::t"
    )


def test_a_symlinked_test_file_keeps_the_name_pytest_gave_it(tmp_path: Path) -> None:
    """pytest names a test by the path it collected it under: a test file that is a symlink is
    named by the link, and so must the re-run name it (resolved, it would be another node id)."""
    root = tmp_path / "project"
    (root / "real").mkdir(parents=True)
    (root / "real" / "test_x.py").write_text("")
    (root / "tests").mkdir()
    (root / "tests" / "test_link.py").symlink_to(root / "real" / "test_x.py")
    command = rerun_command(
        Invocation(args=(), rootdir=root, cwd=root),
        ["tests/test_link.py::t"],
        ["ops"],
        [],
        tmp_path / "r.json",
    )
    assert command[-1] == "tests/test_link.py::t"
