"""The import path of a benchmarking run (pytest/importpath.py) and how a base run is started
(base.pytest_launcher): both sides of a comparison import their own tree through paths of one
shape."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from pytest_torchbench.pytest import importpath
from pytest_torchbench.pytest.base import _child_environment, pytest_launcher


def test_the_tree_goes_first_once_after_the_scripts_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    entries = importpath.tree_entries(tmp_path)
    assert entries == [str(tmp_path / "src"), str(tmp_path)]
    monkeypatch.setattr(sys, "path", ["/script/folder", "/user/entry", "/stdlib"])
    monkeypatch.setenv("PYTHONPATH", "/user/entry")
    importpath.put_first(entries)
    assert sys.path == ["/script/folder", *entries, "/user/entry", "/stdlib"]
    assert os.environ["PYTHONPATH"] == os.pathsep.join([*entries, "/user/entry"])
    # A process started with that environment has them in place already, and adds nothing.
    started = ["/script/folder", *entries, "/user/entry", "/stdlib"]
    monkeypatch.setattr(sys, "path", list(started))
    importpath.put_first(entries)
    assert sys.path == started
    assert os.environ["PYTHONPATH"] == os.pathsep.join([*entries, "/user/entry"])


def test_xdists_copy_for_its_workers_gets_the_tree_too(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("xdist.plugin")
    fake._sys_path = ["/script/folder", "/stdlib"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "xdist.plugin", fake)
    monkeypatch.setattr(sys, "path", ["/script/folder", "/stdlib"])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    importpath.put_first(["/tree"])
    assert fake._sys_path == ["/script/folder", "/tree", "/stdlib"]  # type: ignore[attr-defined]
    assert os.environ["PYTHONPATH"] == "/tree"


def test_a_base_runs_pythonpath_names_the_worktree_where_the_heads_names_the_checkout(
    tmp_path: Path,
) -> None:
    checkout, worktree = tmp_path / "checkout", tmp_path / "wt"
    (checkout / "tools").mkdir(parents=True)
    value = os.pathsep.join(
        [str(checkout / "src"), str(checkout), "/elsewhere", "relative", str(checkout / "tools")]
    )
    assert importpath.map_pythonpath(value, checkout, worktree).split(os.pathsep) == [
        str(worktree / "src"),
        str(worktree),
        "/elsewhere",
        "relative",
        str(worktree / "tools"),
    ]
    assert importpath.map_pythonpath("", checkout, worktree) == ""


def test_a_child_gets_the_mapped_path_and_nothing_in_front(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    checkout, worktree = tmp_path / "checkout", tmp_path / "wt"
    checkout.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(checkout), "/user"]))
    env = _child_environment(checkout, worktree, tmp_path / "modules")
    assert env["PYTHONPATH"] == os.pathsep.join([str(worktree), "/user"])
    assert (
        _child_environment(checkout, checkout, tmp_path / "m")["PYTHONPATH"]
        == os.environ["PYTHONPATH"]
    )


def test_a_package_found_outside_the_tree_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tree, other = tmp_path / "tree", tmp_path / "other"
    for folder in (tree / "mylib", other / "mylib", tree / "fresh"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    module = types.ModuleType("mylib")
    module.__file__ = str(other / "mylib" / "__init__.py")
    monkeypatch.setitem(sys.modules, "mylib", module)
    monkeypatch.syspath_prepend(str(tree))
    assert importpath.first_import_outside(["fresh", "mylib"], tree) == ("mylib", module.__file__)
    module.__file__ = str(tree / "mylib" / "__init__.py")
    # not imported yet: where it would be found decides; not importable at all: nothing to say
    assert importpath.first_import_outside(["fresh", "mylib", "no_such_package_here"], tree) is None


@pytest.mark.parametrize(
    ("orig", "argv", "expected"),
    [
        (
            ["/v/bin/python", "/v/bin/pytest", "-k", "x"],
            ["/v/bin/pytest", "-k", "x"],
            ["/v/bin/pytest"],
        ),
        (
            ["/v/bin/python", "-X", "dev", "-m", "pytest", "t.py"],
            ["/x/pytest/__main__.py", "t.py"],
            ["-X", "dev", "-m", "pytest"],
        ),
        (["/v/bin/python", "-mpytest", "t.py"], ["/x/pytest/__main__.py", "t.py"], ["-mpytest"]),
        (
            ["/v/bin/python", "run_tests.py"],
            ["-m", "t.py"],
            ["-m", "pytest"],
        ),  # pytest.main() in a program
        (
            ["/v/bin/python", "-u", "pytest_ci.py", "t.py"],
            ["pytest_ci.py", "t.py"],
            ["-u", "-m", "pytest"],
        ),  # a program whose name starts like pytest's is not started again
        (
            ["/v/bin/python", "-m", "pdb", "-m", "pytest", "t.py"],
            ["/x/pytest/__main__.py", "t.py"],
            ["-m", "pytest"],
        ),  # nor a wrapper module (pdb, cProfile)
        (
            ["/v/bin/python", "-W", "error", "-m", "pytest", "t.py"],
            ["/x/pytest/__main__.py", "t.py"],
            ["-W", "error", "-m", "pytest"],
        ),
    ],
)
def test_a_base_run_starts_as_this_run_did(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    orig: list[str],
    argv: list[str],
    expected: list[str],
) -> None:
    script = tmp_path / "pytest"
    script.write_text("")
    orig = [str(script) if a == "/v/bin/pytest" else a for a in orig]
    argv = [str(script) if a == "/v/bin/pytest" else a for a in argv]
    monkeypatch.setattr(sys, "orig_argv", orig, raising=False)
    monkeypatch.setattr(sys, "argv", argv)
    assert pytest_launcher() == [
        sys.executable,
        *[str(script) if a == "/v/bin/pytest" else a for a in expected],
    ]
