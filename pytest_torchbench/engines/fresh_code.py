"""Fresh, unspecialised copies of a benchmarked Python function, so its state has no history.

Why: CPython (3.11+) quickens a code object after a few calls and then specialises its
instructions to the types it saw. A heavy benchmark is counted after one or two calls, so the
instructions it counts depend on how often *other* tests already ran the same function: a
parametrised ``test_blur[192]`` counted 0.17% fewer instructions after seven other sizes than
alone (all in CPython's attribute and dict lookups), and under ``-n`` which tests ran before it
depends on the scheduling. Counting a fresh copy of the function's code makes its start the
same in every run: as in a fresh process, whatever ran before. This is what ``timeit`` (and
:mod:`.callgrind.collect`) already do for the timing loop itself.

Only the benchmarked callable's own code is copied (nested functions and lambdas included); what
it calls keeps its state. Callables that are not plain Python functions (``nn.Module``
instances, C functions, ``torch.jit`` functions), torch's own functions and anything
``torch.compile`` wrapped are left as they are: a copy of a compiled function's code would lose
its compiled graphs.
"""
from __future__ import annotations

import functools
import os
import sys
import types
from typing import Any, Callable

__all__ = ["fresh_callable"]


def fresh_callable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, or an equivalent whose Python code has never run (see the module docstring)."""
    if isinstance(fn, functools.partial):
        fresh = fresh_callable(fn.func)
        return fn if fresh is fn.func else functools.partial(fresh, *fn.args, **fn.keywords)
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        fresh = _fresh_function(fn.__func__)
        return fn if fresh is fn.__func__ else types.MethodType(fresh, fn.__self__)
    if isinstance(fn, types.FunctionType):
        return _fresh_function(fn)
    return fn


def _fresh_function(fn: types.FunctionType) -> types.FunctionType:
    if not _copyable(fn):
        return fn
    copy = types.FunctionType(_fresh_code(fn.__code__), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = None if fn.__kwdefaults__ is None else dict(fn.__kwdefaults__)
    copy.__qualname__ = fn.__qualname__
    copy.__module__ = fn.__module__
    copy.__doc__ = fn.__doc__
    copy.__dict__.update(fn.__dict__)
    return copy


def _fresh_code(code: types.CodeType) -> types.CodeType:
    """A new code object with the same bytecode, unquickened (nested code objects too)."""
    consts = tuple(_fresh_code(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_consts=consts)


def _torch_directory() -> str | None:
    """Where torch's own code lies, from the imported module: no search of the file system.

    Why not ``importlib.util.find_spec``/``os.path.realpath``: they list and stat folders whose
    contents change while pytest runs (a baselines folder appearing), and what they allocate
    then moved later counts of the test by up to 0.02% from run to run (measured on a conv-net).
    """
    torch = sys.modules.get("torch")
    filename = getattr(torch, "__file__", None)
    return None if not filename else os.path.join(os.path.dirname(filename), "")


def _copyable(fn: types.FunctionType) -> bool:
    """Plain user code only: not torch's own functions, not a ``torch.compile`` wrapper."""
    if any(hasattr(fn, marker) for marker in ("_torchdynamo_orig_callable", "_torchdynamo_inline",
                                               "_torchdynamo_disable")):
        return False
    torch_dir = _torch_directory()
    return not (torch_dir and fn.__code__.co_filename.startswith(torch_dir))
