"""Fresh, unspecialised copies of a benchmarked Python function, so its state has no history.

Why: CPython (3.11+) quickens a code object after a few calls and then specialises its
instructions to the types it saw. A heavy benchmark is counted after two or three calls, so the
instructions it counts depend on how often *other* tests already ran the same function (a
parametrised test counts fewer after its other parameters than alone, all in CPython's attribute
and dict lookups: docs/design/counting.md, "Fresh code for every benchmark"), and under ``-n`` which
tests ran before it depends on the scheduling. Counting a fresh copy of the function's code makes
its start the same in every run: as in a fresh process, whatever ran before. This is what ``timeit``
(and :mod:`.callgrind.collect`) already do for the timing loop itself.

Only the benchmarked callable's own code is copied (nested functions and lambdas included); what
it calls keeps its state, and so does a recursive function's recursion (it calls the original
through its globals). Callables that are not plain Python functions (``nn.Module``
instances, C functions, ``torch.jit`` functions), torch's own functions and anything
``torch.compile`` wrapped are left as they are: a copy of a compiled function's code would lose
its compiled graphs.

A function under torch's context decorators (``@torch.no_grad()``, ``@torch.inference_mode()``,
``@torch.enable_grad()``, ``@torch.autocast(...)``) is torch's wrapper, and the user's code is the
function it holds in its closure and names in ``__wrapped__``: the copy is torch's wrapper (its
code as it is, shared by every function it decorates) whose closure holds a fresh copy of that
function in a new cell. Without this a ``@torch.no_grad()`` benchmark still counted the history
of its parametrised siblings; with it, only torch's wrapper and ``no_grad``'s methods keep theirs
(docs/design/measurements.md, "Moved from the code"). Only these wrappers, whose code is known to
call the function and nothing else: a user's own decorator may key a cache or a registry on the
function it wraps, or rebind it (``nonlocal``), and a wrapped copy would miss the cache, raise
``KeyError`` or split the state between the original and the copy; it is copied as it is (fresh
code, same closure), with the function inside keeping its history.

Nested functions and lambdas that ``torch.compile`` has compiled (a test body doing
``torch.compile(lambda x: ...)(x)``) keep their code: dynamo keeps its graphs per code object, and a
copy would compile again inside the measured calls.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Callable
from typing import Any

from ..common import compat as _compat

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
        return (
            fn
            if fresh is partial.func
            else functools.partial(fresh, *partial.args, **partial.keywords)
        )
    if kind is types.MethodType:
        method: types.MethodType = fn  # type: ignore[assignment]
        if type(method.__func__) is not types.FunctionType:
            return fn
        fresh = _fresh_function(method.__func__)
        return fn if fresh is method.__func__ else types.MethodType(fresh, method.__self__)
    if kind is types.FunctionType:
        return _fresh_function(fn)  # type: ignore[arg-type]
    return fn


#: How many decorators deep a wrapped function is still freshened (and a guard against a
#: ``__wrapped__`` chain that loops back).
MAX_DECORATORS = 8


def _fresh_function(fn: types.FunctionType, depth: int = 0) -> types.FunctionType:
    if _compiled(fn):
        return fn
    if _torch_code(fn):
        # torch's own code as it is; inside its context decorators, the user's function fresh
        rewrapped = _fresh_wrapped(fn, depth)
        return fn if rewrapped is None else _function_like(fn, fn.__code__, *rewrapped)
    return _function_like(fn, _fresh_code(fn.__code__), fn.__closure__, None)


#: torch's context decorators (``_DecoratorContextManager`` and ``autocast``): wrappers that call
#: the function they hold and keep nothing keyed on it.
CONTEXT_DECORATOR_FILES = tuple(
    os.sep + os.path.join(*parts)
    for parts in (("utils", "_contextlib.py"), ("amp", "autocast_mode.py"))
)


def _fresh_wrapped(
    fn: types.FunctionType, depth: int
) -> tuple[tuple[Any, ...], types.FunctionType] | None:
    """``fn``'s closure with the function it wraps (``__wrapped__``, as ``functools.wraps`` sets
    it) replaced by a fresh copy in a new cell, and that copy; None when it wraps nothing to copy
    or is not one of torch's context decorators (see the module docstring). Only asked of torch's
    own functions (``_torch_code``), so the file's name within torch's folder decides."""
    wrapped = fn.__dict__.get("__wrapped__")
    closure = fn.__closure__
    if type(wrapped) is not types.FunctionType or not closure or depth >= MAX_DECORATORS:
        return None
    if not fn.__code__.co_filename.endswith(CONTEXT_DECORATOR_FILES):
        return None
    if not any(_holds(cell, wrapped) for cell in closure):
        return None  # it reaches the function another way (a global, an attribute): leave it
    fresh = _fresh_function(wrapped, depth + 1)
    if fresh is wrapped:
        return None
    return tuple(
        types.CellType(fresh) if _holds(cell, wrapped) else cell for cell in closure
    ), fresh


def _holds(cell: Any, value: object) -> bool:
    try:
        return cell.cell_contents is value  # type: ignore[no-any-return]
    except ValueError:  # an empty cell (a variable not yet assigned)
        return False


def _function_like(
    fn: types.FunctionType,
    code: types.CodeType,
    closure: tuple[Any, ...] | None,
    wrapped: types.FunctionType | None,
) -> types.FunctionType:
    """A function as ``fn`` is (name, defaults, hints, attributes), with this code and closure."""
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, closure)
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
    if wrapped is not None:
        copy.__dict__["__wrapped__"] = wrapped  # what signature() and pytest follow
    return copy


def _fresh_code(code: types.CodeType) -> types.CodeType:
    """A new code object with the same bytecode, unquickened (nested code objects too), except
    where dynamo has compiled it."""
    if _has_graphs(code):
        return code
    consts = tuple(_fresh_code(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_consts=consts)


def _has_graphs(code: types.CodeType) -> bool:
    """Whether ``torch.compile`` has compiled this code object (dynamo's cache is keyed on it)."""
    if "torch._dynamo" not in sys.modules:  # nothing was compiled: no need to ask
        return False
    return bool(
        _compat.dynamo_cache_entries(code)
    )  # unknown (a private API changed): copy as before


def _torch_directory() -> str | None:
    """Where torch's own code lies, from the imported module: no search of the file system.

    Why not ``importlib.util.find_spec``/``os.path.realpath``: they list and stat folders whose
    contents change while pytest runs (a baselines folder appearing), and what they allocate
    then moved later counts of the test from run to run.
    """
    torch = sys.modules.get("torch")
    filename = getattr(torch, "__file__", None)
    return None if not filename else os.path.join(os.path.dirname(filename), "")


def _compiled(fn: types.FunctionType) -> bool:
    """A ``torch.compile`` wrapper (or a function dynamo was told to skip): its graphs belong to
    it."""
    return any(
        hasattr(fn, marker)
        for marker in ("_torchdynamo_orig_callable", "_torchdynamo_inline", "_torchdynamo_disable")
    )


def _torch_code(fn: types.FunctionType) -> bool:
    torch_dir = _torch_directory()
    return bool(torch_dir and fn.__code__.co_filename.startswith(torch_dir))
