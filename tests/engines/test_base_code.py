"""The base revision's code run in place of the checkout's (``engines/base_code.py``): real
modules imported from files, their functions given the base's code for a while and their own
back after, sites named by the base's lines."""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_torchbench.engines.base_code import BASE_MARK, base_code

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="needs co_qualname (3.11+)")

BASE = """
def scale(x):
    return x * 2


def shared(x):
    return x + 1


class Model:
    def forward(self, x):
        return scale(x)


def make(k):
    def inner(x):
        return x + k
    return inner


def lineno():
    import sys
    return sys._getframe().f_code.co_filename, sys._getframe().f_lineno
"""

#: scale triples now, a new helper, every line moved down by two, one function defined twice.
HEAD = (
    "\nimport os\n"
    + BASE.replace("return x * 2", "return helper(x)")
    + """

def helper(x):
    return x * 3


def twice():
    return 1


def twice():  # noqa: F811
    return 2
"""
)


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path, str, str], types.ModuleType]:
    """``load(path, text, name)``: ``text`` written to ``path`` and imported as ``name`` (in
    ``sys.modules`` for the test's time, as an import puts it)."""

    def load(path: Path, text: str, name: str) -> types.ModuleType:
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
        spec.loader.exec_module(module)
        return module

    return load


def test_the_live_functions_of_a_changed_file_run_the_bases_code_for_a_while(
    tmp_path: Path, load: Callable[[Path, str, str], types.ModuleType]
) -> None:
    module = load(tmp_path / "headmod.py", HEAD, "headmod")
    closure = module.make(10)
    asked: list[str] = []

    def text_of(path: str) -> str | None:
        asked.append(path)
        return BASE

    assert module.scale(5) == 15
    with base_code([str(tmp_path / "headmod.py"), str(tmp_path / "absent.py")], text_of) as n:
        assert module.scale(5) == 10  # the base's code
        assert module.Model().forward(5) == 10  # a method
        assert closure(1) == 11  # a closure made before, its cell kept
        assert module.helper(5) == 15  # new since the base: its own code
        assert module.twice() == 2
        filename, line = module.lineno()
        assert filename == str(tmp_path / "headmod.py") + BASE_MARK
        assert (
            line
            == BASE.splitlines().index(
                "    return sys._getframe().f_code.co_filename, sys._getframe().f_lineno"
            )
            + 1
        )
        assert n >= 5
    assert module.scale(5) == 15 and module.lineno()[0] == str(tmp_path / "headmod.py")
    assert asked == [str(tmp_path / "headmod.py")]  # only a file with live code is read


def test_a_closure_that_differs_keeps_its_code_and_a_failure_restores_all(
    tmp_path: Path, load: Callable[[Path, str, str], types.ModuleType]
) -> None:
    module = load(
        tmp_path / "closures.py",
        "def make(k):\n    def inner():\n        return k\n    return inner\n",
        "closures",
    )
    inner = module.make(3)
    base = "def make(k):\n    j = 1\n    def inner():\n        return j\n    return inner\n"
    with pytest.raises(RuntimeError):
        with base_code([str(tmp_path / "closures.py")], lambda path: base):
            assert inner() == 3  # its free variables differ (k, j): its own code
            assert module.make(3)() == 1  # made by the base's code
            raise RuntimeError
    assert module.make(3)() == 3
    # a base that does not compile, or none, changes nothing
    with base_code([str(tmp_path / "closures.py")], lambda path: "def make(:\n") as n:
        assert n == 0
    with base_code([str(tmp_path / "closures.py")], lambda path: None) as n:
        assert n == 0
