"""The package's functions are short enough to read at once and take few enough parameters.

No function of the package is longer than :data:`MAX_LINES` lines (from its ``def`` to its last
line, nested functions and classes counted inside it) or takes more than :data:`MAX_PARAMETERS`
parameters (positional, keyword-only, ``*args`` and ``**kwargs``; a leading ``self`` or ``cls`` is
not counted). Parameters that travel together go in a small frozen dataclass instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_torchbench"

MAX_LINES = 80
MAX_PARAMETERS = 7

#: The one function allowed more parameters: (file relative to the repository, name) -> why.
WIDE_ALLOWED = {
    ("pytest_torchbench/pytest/fixtures.py", "pedantic"): (
        "pytest-benchmark's public benchmark.pedantic(target, args, kwargs, setup, teardown, "
        "rounds, warmup_rounds, iterations): suites written for it call it unchanged"
    ),
}
_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions() -> list[tuple[str, _Function]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        relative = path.relative_to(ROOT).as_posix()
        found += [
            (relative, node)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
    return found


def _parameters(function: _Function) -> int:
    arguments = function.args
    named = [*arguments.posonlyargs, *arguments.args]
    count = len(named) + len(arguments.kwonlyargs)
    count += (arguments.vararg is not None) + (arguments.kwarg is not None)
    if named and named[0].arg in ("self", "cls"):
        count -= 1
    return count


def _lines(function: _Function) -> int:
    assert function.end_lineno is not None
    return function.end_lineno - function.lineno + 1


def test_the_walk_finds_the_package_functions() -> None:
    """So that the checks below cannot pass by finding nothing."""
    assert len(_functions()) > 300


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = [
        f"{path}:{function.lineno} {function.name}: {_lines(function)} lines"
        for path, function in _functions()
        if _lines(function) > MAX_LINES
    ]
    assert not too_long, f"functions over {MAX_LINES} lines:\n" + "\n".join(too_long)


def test_no_function_takes_more_parameters_than_the_limit() -> None:
    too_wide = [
        f"{path}:{function.lineno} {function.name}: {_parameters(function)} parameters"
        for path, function in _functions()
        if _parameters(function) > MAX_PARAMETERS and (path, function.name) not in WIDE_ALLOWED
    ]
    assert not too_wide, f"functions over {MAX_PARAMETERS} parameters:\n" + "\n".join(too_wide)


def test_the_exception_still_names_a_function_that_needs_it() -> None:
    """An exception left behind after its function changed would excuse another of that name."""
    functions = {(path, function.name): function for path, function in _functions()}
    for key in WIDE_ALLOWED:
        assert key in functions and _parameters(functions[key]) > MAX_PARAMETERS, key
