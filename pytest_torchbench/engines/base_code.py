"""The base revision's code of the user's changed files, run in place of the checkout's: for the
per-site counts of a failed ops verdict (``metrics.ops``).

Why: a baseline keeps op counts, not call sites, so when an op that several lines call is called
more often, the lines of the checkout alone do not say which one moved; a line being edited does
not say it either (``return lib.loss(x)`` made ``y = lib.loss(x)`` calls the same twelve ops).
The counts per site of the base are known by running the base's code: every live function of a
module imported from a file changed since the base gets, for the time of one call, the code of
the function of the same qualified name compiled from the base's text of that file. Its frames
are named with the base's line numbers in a file named ``path`` + :data:`BASE_MARK`, which the
caller maps to the checkout's lines. What did not change (other files, installed packages, the
checkout's module-level values) runs as it is: the caller trusts the base's sites only where
they add up to the baseline's count.

Needs CPython 3.11+ (``co_qualname``); a function whose name is not unique in the base's file, a
new function, or one whose closure differs keeps its own code.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import types
from collections.abc import Callable, Iterable, Iterator

__all__ = ["BASE_MARK", "base_code"]

#: Appended to the file name of the base's code: a site named ``conftest.py\x1fbase:11`` is line 11
#: of the base's text of ``conftest.py``. A control character no file name of a project holds.
BASE_MARK = "\x1fbase"


def _base_functions(path: str, text: str) -> dict[str, types.CodeType]:
    """The code of each function of the base's ``text`` of ``path`` by qualified name, those whose
    name is not unique left out; none when it does not compile."""
    try:
        module = compile(text, path + BASE_MARK, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, types.CodeType] = {}
    twice: set[str] = set()
    pending = [module]
    while pending:
        code = pending.pop()
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                name = getattr(const, "co_qualname", None)
                if name is not None:
                    if name in found:
                        twice.add(name)
                    found[name] = const
                pending.append(const)
    return {name: code for name, code in found.items() if name not in twice}


def _live_functions(paths: frozenset[str]) -> list[types.FunctionType]:
    """Every function object of this process whose code comes from one of ``paths`` (real
    paths): those that refer to the globals of a module imported from one of them (every
    function a module defines does, closures and methods included). Asked of the garbage
    collector's referrers, not of all its objects: a process that imported torch holds some
    hundred thousand, and walking them in Python was most of the cost."""
    names = {os.path.basename(path) for path in paths}
    ours: dict[str, bool] = {}

    def mine(filename: object) -> bool:
        if not isinstance(filename, str):
            return False
        if filename not in ours:
            ours[filename] = (
                os.path.basename(filename) in names and os.path.realpath(filename) in paths
            )
        return ours[filename]

    spaces = [
        vars(module)
        for module in list(sys.modules.values())
        if mine(getattr(module, "__file__", None))
    ]
    if not spaces:
        return []
    function = types.FunctionType
    return [
        obj
        for obj in gc.get_referrers(*spaces)
        if type(obj) is function and mine(obj.__code__.co_filename)
    ]


@contextlib.contextmanager
def base_code(paths: Iterable[str], text_of: Callable[[str], str | None]) -> Iterator[int]:
    """Within it, the live functions of the files ``paths`` (absolute) run the code of the same
    qualified name in the base's text of their file (``text_of(path)``, None when there is none);
    yields how many do. Restored on exit. The base's text is asked only of files with live code."""
    if sys.version_info < (3, 11):
        yield 0
        return
    live = _live_functions(frozenset(os.path.realpath(path) for path in paths))
    # keyed and compiled by the file name the code has, so that a site of the base's code is named
    # as the checkout's site of the same line (a symlinked folder stays as it was imported)
    by_path: dict[str, dict[str, types.CodeType]] = {}
    for path in sorted({f.__code__.co_filename for f in live}):
        text = text_of(path)
        by_path[path] = {} if text is None else _base_functions(path, text)
    swapped: list[tuple[types.FunctionType, types.CodeType]] = []
    try:
        for function in live:
            own = function.__code__
            base = by_path[own.co_filename].get(own.co_qualname)
            if base is None or base.co_freevars != own.co_freevars:
                continue
            function.__code__ = base
            swapped.append((function, own))
        yield len(swapped)
    finally:
        for function, own in reversed(swapped):
            function.__code__ = own
