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
it calls keeps its state, and so does a recursive function's recursion (it calls the original
through its globals). Callables that are not plain Python functions (``nn.Module``
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
    """``fn``, or an equivalent whose Python code has never run (see the module docstring).

    Types are asked exactly (``type(fn) is ...``), never with ``isinstance``: that reads
    ``fn.__class__``, which a proxy (``wrapt``'s decorators, ``Mock(spec=f)``) fakes, and the
    copy would then drop the proxy's own behaviour; a ``partial`` subclass is left alone for
    the same reason (its ``__call__`` may be its own)."""
    kind = type(fn)
    if kind is functools.partial:
        partial: functools.partial[Any] = fn  # type: ignore[assignment]
        fresh = fresh_callable(partial.func)
        return fn if fresh is partial.func else functools.partial(fresh, *partial.args, **partial.keywords)
    if kind is types.MethodType:
        method: types.MethodType = fn  # type: ignore[assignment]
        if type(method.__func__) is not types.FunctionType:
            return fn
        fresh = _fresh_function(method.__func__)
        return fn if fresh is method.__func__ else types.MethodType(fresh, method.__self__)
    if kind is types.FunctionType:
        return _fresh_function(fn)  # type: ignore[arg-type]
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
    # Its type hints, for code that reads them. From 3.14 they are computed on first access
    # (and may name what does not exist yet): copy the function that computes them instead.
    if hasattr(fn, "__annotate__"):
        setattr(copy, "__annotate__", getattr(fn, "__annotate__"))
    else:
        copy.__annotations__ = dict(fn.__annotations__)
    if hasattr(fn, "__type_params__"):  # 3.12+
        setattr(copy, "__type_params__", getattr(fn, "__type_params__"))
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
