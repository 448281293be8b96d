"""CPython 3.11's specializing interpreter (and 3.10's inline caches), brought to one state
whatever ran before.

Why: CPython 3.11 runs a function's plain bytecode for its first 8 calls, then "quickens" it
(rewrites it in place with adaptive instructions that specialise on their first execution: a
global lookup becomes a cached read, a call of a Python function a direct frame push). A heavy
benchmark is called only 3-7 times (its own first call, the probe, then one to four counted calls),
so the Python helpers it shares with earlier tests (``F.pad``, ``Module.__call__``) ran specialised
or not depending on how many earlier tests had called them: a blur counted differently as a worker's
only test and after other blurs, all of it in dict and attribute lookups and frame set-up, and
nearly alike once the helpers had been called often enough before either run
(docs/design/counting.md, "Quickening the helpers it calls"). So the counted process marks every
function it has to be quickened at its next call: a helper is then specialised by the benchmark's
own (uncounted) first call, in every run, whatever ran before it.
How: the only handle is the code object's warm-up counter (``co_warmup``, a ``short`` that
counts up from -8 to 0), not exposed to Python; it is written through :mod:`ctypes` at the
offset it has in CPython 3.11's ``PyCodeObject``, after checking that offset on a fresh
function (its flags where ``co_flags`` should be, -8 where the counter should be, 0 after 8
calls). Setting it to -1 is the state 7 more calls would have left, nothing the interpreter
does not reach by itself. Code that is already quickened is never written to (its counter is
0; a non-zero counter there would make CPython quicken it again, over its inline caches), and
the read, the check and the write have no call between them, so no other thread can run in
between. Anywhere else (another Python, a 32-bit or trace-refs build, whose layouts fail the
check) this does nothing, and counts keep the history dependence described above (well under
the 1% limit). Python 3.12 quickens at creation and specialises per instruction instead.

CPython 3.10 has the same history by an older mechanism: a code object gets its inline cache for
global loads and instance-attribute loads (``co_opcache``) at its 1024th call or generator resume,
counted in ``co_opcache_flag``; nothing else writes that counter, and the read, check and write
below have no call and no taken jump between them (3.10 switches threads only there).
A benchmark of 100 warm-up calls ran its helpers with the cache or without it depending on how
often earlier tests had called them: tensordict's own benchmarks counted several percent more
under ``-n 2`` than serially, in ``_PyDict_LoadGlobal`` and dict lookups
(docs/design/measurements.md). There the counter is set to 1023, the state 1023 calls leave, so
the next call makes the cache; code that has its cache (1024) is left alone. (The other half of
that history on 3.10, the type attribute cache emptied per region, is left out in
``collect.count_region``.)

What it does not do: a helper an earlier test already quickened keeps the specialisations and
back-off counters that test gave it; only code not yet quickened is brought to one state. Under a
trace or profile function (coverage, a debugger) it marks nothing. Modules imported later are
read one level deep (their functions, their classes' functions, static and class methods and
properties); a decorator's inner function, held in a closure, waits for its 8 calls (3.10: 1024).
"""

from __future__ import annotations

import ctypes
import functools
import gc
import sys
import types
from collections.abc import Callable, Iterable

__all__ = ["supported", "quicken_at_next_call", "quicken_new_modules"]

_COUNTER: type[ctypes.c_short] | type[ctypes.c_int]
if sys.version_info[:2] == (3, 10):
    #: CPython 3.10 ``PyCodeObject``: ``PyObject_HEAD`` (16 bytes), five ``int`` fields, then
    #: ``int co_flags``; ``int co_opcache_flag`` after the code's pointers and ``co_opcache``.
    _FLAGS_OFFSET = 36
    _WARMUP_OFFSET = 168
    _COUNTER = ctypes.c_int
    #: A code object that was never called.
    _INITIAL_WARMUP = 0
    #: One call before the cache is made (``opcache_min_runs`` is 1024).
    _NEXT_CALL = 1023
    #: Where the counter stops: the cache is made.
    _QUICKENED = 1024
else:
    #: CPython 3.11 ``PyCodeObject``: ``PyObject_VAR_HEAD`` (24 bytes), ``co_consts``, ``co_names``,
    #: ``co_exceptiontable`` (8 each), then ``int co_flags`` and ``short co_warmup``.
    _FLAGS_OFFSET = 48
    _WARMUP_OFFSET = 52
    _COUNTER = ctypes.c_short
    #: ``QUICKENING_INITIAL_WARMUP_VALUE``: a code object that was never called.
    _INITIAL_WARMUP = -8
    #: One call before quickening: the next call quickens.
    _NEXT_CALL = -1
    #: Quickened.
    _QUICKENED = 0


class ModulesSince:
    """The modules imported since :meth:`all_seen` or the last :meth:`new`: what a walk over
    module namespaces (quickening marks, shared key tables) has not read yet."""

    def __init__(self) -> None:
        #: Names of the modules already read (or that were there when everything was).
        self.seen: set[str] = set()
        #: ``len(sys.modules)`` then: the cheap test for "imported anything since" (every test
        #: asks).
        self.length = 0

    def all_seen(self) -> None:
        """Every module imported so far counts as read."""
        self.seen.update(_module_names())
        self.length = len(sys.modules)

    def new(self) -> list[object]:
        """The modules imported since, now counted as read; ``[]`` at once when none were."""
        if len(sys.modules) == self.length:
            return []
        names = [name for name in _module_names() if name not in self.seen]
        self.seen.update(names)
        self.length = len(sys.modules)
        return [sys.modules.get(name) for name in names]


#: The modules whose functions were marked.
_modules = ModulesSince()


def _warmup_counter(code: types.CodeType) -> ctypes.c_short | ctypes.c_int:
    return _COUNTER.from_address(id(code) + _WARMUP_OFFSET)


def _flags_match(code: types.CodeType) -> bool:
    return ctypes.c_int.from_address(id(code) + _FLAGS_OFFSET).value == code.co_flags


@functools.lru_cache(maxsize=1)
def supported() -> bool:
    """Whether this interpreter is CPython 3.10 or 3.11 with the code-object layout assumed here."""
    if sys.implementation.name != "cpython" or sys.version_info[:2] not in ((3, 10), (3, 11)):
        return False
    namespace: dict[str, object] = {}
    exec("def probe(x):\n    return len(x)\n", namespace)  # a code object no one has called
    probe = namespace["probe"]
    assert isinstance(probe, types.FunctionType)
    code = probe.__code__
    if not _flags_match(code) or _warmup_counter(code).value != _INITIAL_WARMUP:
        return False
    for _ in range(_QUICKENED - _INITIAL_WARMUP - 1):
        probe("x")
    if _warmup_counter(code).value != _NEXT_CALL:
        return False
    probe("x")
    return _warmup_counter(code).value == _QUICKENED


def _codes(functions: Iterable[types.FunctionType]) -> list[types.CodeType]:
    """The functions' code objects and every code object nested in them (inner functions,
    comprehensions, lambdas: their code lives in the outer one's constants)."""
    seen: dict[int, types.CodeType] = {}
    stack = [function.__code__ for function in functions]
    while stack:
        code = stack.pop()
        if id(code) in seen:
            continue
        seen[id(code)] = code
        stack.extend(constant for constant in code.co_consts if type(constant) is types.CodeType)
    return list(seen.values())


def quicken_at_next_call(objects: Iterable[object] | None = None) -> int:
    """Mark the code of every function among ``objects`` (default: all the collector tracks) to
    be quickened at its next call; returns how many were marked. A no-op where not
    :func:`supported`.

    ``gc.get_objects()`` does not list what ``gc.freeze()`` moved to the permanent generation:
    call this before freezing, or pass the objects. It walks every function of torch, numpy and
    pytest, once per counted worker (its cost: docs/design/measurements.md, "Counting in the
    worker")."""
    if not supported():
        return 0
    if sys.gettrace() is not None or sys.getprofile() is not None:
        # A trace or profile function (coverage, a debugger) runs Python code between any two
        # lines and at every call: the read and the write below would no longer be one step.
        return 0
    if objects is None:
        _modules.all_seen()
    pool = gc.get_objects() if objects is None else objects
    functions = [thing for thing in pool if type(thing) is types.FunctionType]
    del pool
    marked = 0
    for code in _codes(functions):
        if not _flags_match(code):
            continue
        # No call and no backward jump between the read and the write (and no trace function,
        # above), so the interpreter cannot switch threads in between: no other thread can
        # quicken this code there (a non-zero counter on quickened code would make CPython
        # quicken it again, over its inline caches).
        counter = _warmup_counter(code)
        if _INITIAL_WARMUP <= counter.value < _NEXT_CALL:
            counter.value = _NEXT_CALL
            marked += 1
    return marked


#: The C-level ``__dict__`` getters of modules and classes: reading a namespace through them runs
#: no Python code (``getattr``/``isinstance``/``vars`` may: a lazy module's ``__getattr__``, a
#: metaclass's ``__getattribute__``, a deprecated alias whose ``__class__`` warns, as
#: ``torch.distributed.reduce_op`` does), and this runs inside the user's test.
_module_namespace: Callable[[object], object] | None
_class_namespace: Callable[[object], object] | None
try:
    _module_namespace = vars(types.ModuleType)["__dict__"].__get__
    _class_namespace = vars(type)["__dict__"].__get__
except (KeyError, AttributeError):  # not CPython's layout: supported() is False there
    _module_namespace = _class_namespace = None
#: Where a class keeps functions that are not plain attributes; each reached through its C-level
#: member, exactly this type asked (a subclass may override what it returns).
_WRAPPED_FUNCTION_FIELDS: dict[type, tuple[str, ...]] = {
    staticmethod: ("__func__",),
    classmethod: ("__func__",),
    property: ("fget", "fset", "fdel"),
}


def _module_names() -> list[str]:
    """The names in ``sys.modules``; only ``str`` keys (another key's ``__hash__`` is user code)."""
    return [name for name in list(sys.modules) if type(name) is str]


def _functions_in(values: Iterable[object]) -> list[object]:
    """The plain functions among a namespace's values, and those inside its static and class
    methods and properties."""
    found: list[object] = []
    for value in values:
        kind = type(value)
        if kind is types.FunctionType:
            found.append(value)
        elif kind in _WRAPPED_FUNCTION_FIELDS:
            for field in _WRAPPED_FUNCTION_FIELDS[kind]:
                inner = getattr(value, field)
                if type(inner) is types.FunctionType:
                    found.append(inner)
    return found


def module_classes(module: object) -> list[type]:
    """A module's classes (what its ``class`` statements made, and whatever else its namespace
    holds that is a class), read through the C-level namespace getter: no module code runs."""
    if not issubclass(type(module), types.ModuleType) or _module_namespace is None:
        return []
    namespace = _module_namespace(module)
    if type(namespace) is not dict:
        return []
    return [value for value in list(namespace.values()) if issubclass(type(value), type)]


def _module_functions(module: object) -> list[object]:
    """A module's functions and its classes' (one level: what ``def`` and ``class`` made, and the
    functions inside their static and class methods and properties)."""
    found: list[object] = []
    if not issubclass(type(module), types.ModuleType):  # sys.modules may hold any object
        return found
    if _module_namespace is None or _class_namespace is None:
        return found
    namespace = _module_namespace(module)
    if type(namespace) is not dict:
        return found
    values = list(namespace.values())
    found.extend(_functions_in(values))
    for value in values:
        if issubclass(type(value), type):  # a class, asked of its real type, not __class__
            class_namespace = _class_namespace(value)
            if type(class_namespace) is types.MappingProxyType:  # not a C type never readied
                found.extend(_functions_in(list(class_namespace.values())))
    return found


def quicken_new_modules() -> int:
    """Mark the functions of the modules imported since the last marking (a test importing a
    library, torch importing ``torch._dynamo`` in a first call); nothing when there are none.

    Why the modules' namespaces and not ``gc.get_objects()``: each region freezes the collector
    before it counts, so a module imported during a benchmark's first call is frozen, invisible
    to the collector, by the time the next test asks."""
    if not supported():
        return 0
    return quicken_at_next_call([f for module in _modules.new() for f in _module_functions(module)])
