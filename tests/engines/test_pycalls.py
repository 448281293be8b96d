"""The Python-calls engine (``engines/pycalls.py``): real hooks on real code, in this interpreter
(``sys.setprofile`` on 3.11) and, through ``pycalls_driver.py`` run as a script, in every other
CPython 3.10-3.13 this machine has (``sys.monitoring`` on 3.12+), without torch."""

from __future__ import annotations

import abc
import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_torchbench.engines import pycalls

HERE = Path(__file__).parent
DRIVER = HERE / "pycalls_driver.py"
NAME = "pycalls_driver.py"

#: One call of ``work``: a generator starts once (its 5 resumptions are not starts), C functions
#: (``sorted``, ``range``, dict lookups) are not counted, the lambda ``sorted`` calls is.
WORK = {
    f"{NAME}:Box.get": 4.0,
    f"{NAME}:helper": 4.0,
    f"{NAME}:numbers": 1.0,
    f"{NAME}:work": 1.0,
    f"{NAME}:work.<locals>.<lambda>": 3.0,
}


def _line(text: str) -> int:
    """The line of the driver that holds ``text`` (first one)."""
    return next(n for n, line in enumerate(DRIVER.read_text().splitlines(), 1) if text in line)


def _expected_report(hook: str) -> dict[str, Any]:
    calls, loop, lambdas = (
        _line("total += helper("),
        _line("for key in numbers(4)"),
        _line("key=lambda v"),
    )
    return {
        "hook": hook,
        "work": WORK,
        "again": WORK,  # deterministic
        "resumables": {
            f"{NAME}:resumables": 1.0,
            f"{NAME}:resumables.<locals>.inner": 1.0,
            f"{NAME}:coroutine": 1.0,
            f"{NAME}:Suspend.__await__": 1.0,
        },
        # the warm-up's one-off fill() and the seeding's helper(0) are not in the region
        "cached": {f"{NAME}:cached": 1.0, f"{NAME}:helper": 1.0},
        # a wrapper in the plugin's folder is left out, what it calls is counted
        "ours": WORK,
        # generated code keeps its pseudo-file, without the number that depends on history
        "generated": {"<eval_with_key>.#:forward": 1.0},
        # the other thread's spin() is not counted
        "busy": {
            **{name: calls * 5 for name, calls in WORK.items()},
            f"{NAME}:with_a_busy_thread.<locals>.run": 1.0,
        },
        "sites": {
            f"{NAME}:Box.get": [[f"{NAME}:{calls} in work", 4]],
            f"{NAME}:helper": [[f"{NAME}:{calls} in work", 4]],
            f"{NAME}:numbers": [[f"{NAME}:{loop} in work", 1]],
            # the caller of the measured function: the first frame outside the plugin's folder
            f"{NAME}:work": [[f"{NAME}:{_line('sites = pycalls.call_sites(')} in report", 1]],
            f"{NAME}:work.<locals>.<lambda>": [[f"{NAME}:{lambdas} in work", 3]],
        },
        "defined": {
            f"{NAME}:Box.get": f"{NAME}:{_line('def get(')}",
            f"{NAME}:helper": f"{NAME}:{_line('def helper(')}",
            f"{NAME}:numbers": f"{NAME}:{_line('def numbers(')}",
            f"{NAME}:work": f"{NAME}:{_line('def work(')}",
            f"{NAME}:work.<locals>.<lambda>": f"{NAME}:{lambdas}",
        },
        # the previous profile function is back (3.11), every monitoring tool id is free again
        # (3.12+)
        "left_behind": True,
        "all_taken": "no tool ids before 3.12"
        if hook == "sys.setprofile"
        else (
            "cannot count Python calls: sys.monitoring tool ids (2, 3, 4) are all in use "
            "(2: someone else, 3: someone else, 4: someone else); stop the profiler or tool "
            "that holds them for this run"
        ),
    }


def _in_this_interpreter() -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    try:
        import pycalls_driver
    finally:
        sys.path.remove(str(HERE))
    return json.loads(
        json.dumps(pycalls_driver.report())
    )  # tuples as lists, as the scripts print them


def _expected_for(version: tuple[int, int]) -> dict[str, Any]:
    """The report an interpreter of ``version`` gives: 3.12 and 3.13 count with ``sys.monitoring``,
    3.10 and 3.11 with ``sys.setprofile``; 3.10's code objects have no qualified names, so its
    functions are named by their plain names."""
    expected = _expected_report("sys.monitoring" if version >= (3, 12) else "sys.setprofile")
    if version >= (3, 11):
        return expected

    def plain(name: str) -> str:
        file, _, qualified = name.rpartition(":")
        return f"{file}:{qualified.rsplit('.', 1)[-1]}"

    def strip(value: Any) -> Any:
        return {plain(k): strip(v) for k, v in value.items()} if isinstance(value, dict) else value

    return {key: strip(value) for key, value in expected.items()}


def test_calls_are_counted_by_function_in_this_interpreter() -> None:
    assert _in_this_interpreter() == _expected_for(sys.version_info[:2])


def _other_interpreters() -> list[str]:
    found = []
    for minor in ("3.10", "3.12", "3.13"):
        found += sorted(glob.glob(f"/root/.pyenv/versions/{minor}.*/bin/python"))[-1:]
    return found


@pytest.mark.parametrize(
    "python", _other_interpreters() or [pytest.param("", marks=pytest.mark.skip("none found"))]
)
def test_both_hooks_count_the_same_calls(python: str) -> None:
    """3.12 and 3.13 count with ``sys.monitoring``, 3.10 with ``sys.setprofile`` and no qualified
    names (functions are named by their plain names there)."""
    done = subprocess.run(
        [python, str(DRIVER)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    major, minor = (int(part) for part in Path(python).parts[-3].split(".")[:2])
    assert report == _expected_for((major, minor))


def test_names_are_relative_to_the_root_else_to_the_import_path(tmp_path: Path) -> None:
    code = compile("def f():\n    pass\n", str(tmp_path / "pkg" / "mod.py"), "exec").co_consts[0]
    assert pycalls.function_name(code, root=tmp_path) == "pkg/mod.py:f"
    import functools

    assert pycalls.function_name(functools.wraps.__code__, root=tmp_path) == "functools.py:wraps"
    import _pytest.python

    qualified = (
        "Function.runtest" if sys.version_info >= (3, 11) else "runtest"
    )  # 3.10: no co_qualname
    assert (
        pycalls.function_name(_pytest.python.Function.runtest.__code__)
        == f"_pytest/python.py:{qualified}"
    )


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="iterations must be an int >= 1"):
        pycalls.count_calls(lambda: None, iterations=0)
    with pytest.raises(ValueError, match="warmup must be an int >= 0"):
        pycalls.count_calls(lambda: None, warmup=-1)


def test_each_call_gets_its_own_setup_outside_the_count(tmp_path: Path) -> None:
    """pedantic's ``setup`` runs before every call, warm-up and counted, and its own calls are not
    counted: a drained list would give later calls nothing to do."""
    state: dict[str, list[int]] = {}

    def setup() -> None:
        state["items"] = [1, 2, 3]

    def helper(item: int) -> int:
        return item

    def drain() -> None:
        items = state["items"]
        while items:
            helper(items.pop())

    counts = pycalls.count_calls(drain, before_each=setup, iterations=3, root=tmp_path)
    assert {re.split(r"[.:]", name)[-1]: calls for name, calls in counts.items()} == {
        "drain": 1.0,
        "helper": 3.0,
    }
    found = pycalls.call_sites(drain, root=tmp_path, before_each=setup)
    (helper_name,) = [name for name in found.sites if name.endswith("helper")]
    assert sum(calls for _, calls in found.sites[helper_name]) == 3


def test_abcs_walk_over_subclasses_is_left_out_and_isinstance_itself_counted() -> None:
    """``isinstance`` against an abstract class whose caches do not answer runs
    ``ABCMeta.__subclasscheck__`` once for the class and once per subclass: the number follows
    which classes the process has defined (tensordict's ``test_cat``: 292 calls per call after the
    other file's tests, 244 in its own file's run). Left out, the counts no longer move; the
    ``__instancecheck__`` every such ``isinstance`` starts stays."""

    class Base(abc.ABC):
        pass

    class Left(Base):
        pass

    def check() -> bool:
        Base.register(type("Fresh", (), {}))  # empties abc's negative cache: every call walks
        return isinstance("text", Base)

    before = pycalls.count_calls(check)
    walked = [type(f"Sub{i}", (Left,), {}) for i in range(5)]
    after = pycalls.count_calls(check)
    assert before == after, (before, after)
    assert [
        calls for name, calls in after.items() if name.endswith("ABCMeta.__instancecheck__")
    ] == [1.0]
    assert not [name for name in after if "__subclasscheck__" in name or "__subclasshook__" in name]
    assert walked
