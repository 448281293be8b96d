"""Which frame is the user's code (``engines/sites.py``): code of installed packages, the
project's own installed package, and the phrase that says why a call has no site
(issue 27 item 13)."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_torchbench.engines import sites
from pytest_torchbench.pytest.options import project_packages


def _installed_function(folder: Path, source: str) -> Callable[..., object]:
    """``f`` from ``source`` compiled as if it were ``.../site-packages/fakepkg/mod.py``."""
    path = folder / "lib" / "site-packages" / "fakepkg" / "mod.py"
    namespace: dict[str, object] = {}
    exec(compile(source, str(path), "exec"), namespace)
    return namespace["f"]  # type: ignore[return-value]


def _frame_inside(fn: Callable[..., object]) -> types.FrameType:
    """The frame of ``fn``'s callee: ``fn`` calls ``grab`` with its own frame's caller chain."""
    return fn(lambda: sys._getframe(1))  # type: ignore[return-value]


def test_a_call_from_an_installed_package_says_which_and_how_to_claim_it(tmp_path: Path) -> None:
    f = _installed_function(tmp_path, "def f(grab):\n    return grab()\n")
    frame = _frame_inside(f)
    # Only the stack above this test is the user's; starting inside the package, this file is found.
    inner, test_line = sites.locate(frame, sites.skipped_dirs())  # type: ignore[misc]
    assert inner[0] == os.path.abspath(__file__) and test_line is None
    # With this test's own frames counted as not the user's, only the installed package is left.
    skipped = (*sites.skipped_dirs(), os.path.dirname(os.path.abspath(__file__)) + os.sep)
    assert (
        sites.locate(frame, skipped)
        == "site unknown: in installed package 'fakepkg' (yours? --bench-sites=fakepkg)"
    )


def test_the_projects_own_installed_package_is_a_site_with_the_test_line_that_led_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path / "lib" / "site-packages"))
    f = _installed_function(tmp_path, "def f(grab):\n    return grab()\n")
    frame = _frame_inside(f)
    own = (str(tmp_path / "lib" / "site-packages" / "fakepkg") + os.sep,)
    located = sites.locate(frame, sites.skipped_dirs(), own)
    assert not isinstance(located, str)
    inner, test_line = located
    assert (
        inner[1:] == (2, "f")
        and test_line is not None
        and test_line[0] == os.path.abspath(__file__)
    )
    name = sites.chain_name(located, Path(__file__).parent.parent)
    # named from its sys.path entry, then this test's line (the outermost frame of the user's code)
    assert name.startswith("fakepkg/mod.py:2 in f, from engines/test_sites.py:")
    assert name.endswith(
        " in test_the_projects_own_installed_package_is_a_site_with_the_test_line_that_led_there"
    )
    # read back (to match the lines changed since a revision): the inner site, then the test's line
    assert sites.chain_locations(name) == [
        ("fakepkg/mod.py", 2),
        ("engines/test_sites.py", test_line[1]),
    ]


def test_chain_locations_reads_back_what_chain_name_writes() -> None:
    root = Path("/project")
    inner, outer = (
        ("/project/dir with space/a.py", 12, "<lambda>"),
        ("/elsewhere/t.py", 3, "test_x"),
    )
    assert sites.chain_locations(sites.chain_name((inner, None), root)) == [
        ("dir with space/a.py", 12)
    ]
    assert sites.chain_locations(sites.chain_name((inner, outer), root)) == [
        ("dir with space/a.py", 12),
        ("/elsewhere/t.py", 3),
    ]
    assert sites.chain_locations(sites.ONLY_TORCH) == []


def test_only_torch_frames_and_the_benchmark_callers_line() -> None:
    skipped = (*sites.skipped_dirs(), os.path.dirname(os.path.abspath(__file__)) + os.sep)
    frame = sys._getframe()
    caller = ("/project/test_a.py", 7, "test_mm")
    assert (
        sites.locate(frame, skipped)
        == sites.ONLY_TORCH
        == "site unknown: only torch, pytest, the standard library or generated frames"
    )
    assert sites.locate(frame, skipped, caller=caller) == (
        caller,
        None,
    )  # benchmark(torch.mm, x, y)


def test_project_packages_come_from_pyproject_and_src(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "My-Lib.ext"\n[tool.setuptools]\npackages = ["mylib", "mylib.sub"]\n'
        'py-modules = ["single"]\n[tool.poetry]\npackages = [{include = "poetrypkg"}]\n'
    )
    (tmp_path / "src" / "srcpkg").mkdir(parents=True)
    (tmp_path / "src" / "srcpkg" / "__init__.py").write_text("")
    (tmp_path / "src" / "not_a_package").mkdir()
    assert project_packages(tmp_path) == ("my_lib_ext", "mylib", "single", "poetrypkg", "srcpkg")
    (tmp_path / "pyproject.toml").write_text("not [toml")
    assert project_packages(tmp_path) == ("srcpkg",)


def test_own_dirs_finds_installed_packages_and_never_torch_or_the_plugin() -> None:
    import torch

    assert sites.own_dirs(["torch", "pytest_torchbench", "no_such_package_here"]) == ()
    found = sites.own_dirs(["json"])
    assert found == (os.path.dirname(os.path.abspath(sys.modules["json"].__file__ or "")) + os.sep,)
    assert torch  # imported: its folder is one of the skipped ones


def test_the_standard_library_is_not_the_users_code() -> None:
    """3.11+ freezes ``os`` and ``runpy`` (``<frozen os>``); 3.10 does not, and there ``os.py`` and
    ``runpy.py`` were named as the user's lines (a call through ``os.environ.get``). A Python file
    of the standard library, here ``copy.py``, is passed over to the line that called it."""
    import copy

    class Grab:
        frame: Any = None

        def __deepcopy__(self, memo: Any) -> Grab:
            Grab.frame = sys._getframe(1)  # copy.deepcopy's own frame
            return self

    copy.deepcopy(Grab())
    assert Grab.frame.f_code.co_filename == copy.__file__
    located = sites.locate(Grab.frame, sites.skipped_dirs())
    assert not isinstance(located, str)
    inner, _ = located
    assert (
        inner[0] == os.path.abspath(__file__)
        and inner[2] == "test_the_standard_library_is_not_the_users_code"
    )


def test_relocated_names_a_base_site_by_the_checkouts_line() -> None:
    """A site of the base's code (``engines.base_code``) read as the checkout's line it is now;
    a removed line keeps the base's number and says so; other sites and reasons are left as
    they are."""
    from pytest_torchbench.engines.base_code import BASE_MARK

    moved = {("lib/ops.py", 5): 7, ("lib/ops.py", 6): None}

    def line_of(path: str, line: int) -> int | None:
        return moved[(path, line)]

    inner = f"lib/ops.py{BASE_MARK}:5 in f, from test_a.py:9 in test_f"
    assert sites.relocated(inner, line_of) == (
        "lib/ops.py:7 in f, from test_a.py:9 in test_f",
        False,
    )
    assert sites.relocated(f"lib/ops.py{BASE_MARK}:6 in f", line_of) == ("lib/ops.py:6 in f", True)
    assert sites.relocated("lib/ops.py:6 in f", line_of) == ("lib/ops.py:6 in f", False)
    assert sites.relocated(sites.ONLY_TORCH, line_of) == (sites.ONLY_TORCH, False)
