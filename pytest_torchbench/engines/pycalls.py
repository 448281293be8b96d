"""Python function calls: how many times one call of a callable starts each Python function.

Why a count of calls: an instruction count moves with things no benchmark runs (CPython's type
attribute cache collides differently after an unrelated edit, a longer path, another test before
it), and when it moves it names C functions (``_PyType_Lookup``, ``find_name_in_mro``), never the
Python function a library author would change. Which Python functions a call runs, and how many
times, depends only on the code and its inputs: it is exact, it does not move with the layout,
and a change names the function. It is the Python-level counterpart of the ``aten::`` op counts.

How: a hook on every Python function start, on the measuring thread only, around a counted region.
On Python 3.12+ it is a ``sys.monitoring`` ``PY_START`` callback (a free tool id; the profiler's
when free); before 3.12, a ``sys.setprofile`` function that keeps the ``call`` events. Both count a
function each time it starts: a generator or coroutine counts once, when it first runs, not at
every resumption (``sys.setprofile`` reports a resumption as a ``call`` too; those are told apart
by the instruction the frame resumes at). C functions (builtins, methods of C types, torch's C++
bindings) are not counted: ``sys.monitoring`` reports them only through its far costlier ``CALL``
event, and torch's C++ work is what the ``ops`` metric counts.

What is counted: the region is the measured callable's calls only: the hook is set after the
warm-up and the seeding, and code of this plugin (the wrapper calling the user's function) is
left out, and so is abc's walk over an abstract class's subclasses when its caches do not answer
(``ABCMeta.__subclasscheck__``, ``__subclasshook__``: it follows which classes the process has
defined, :func:`_abc_subclass_walk`). Other threads are not counted (a data loader's or a
progress bar's thread would make the counts depend on timing). The counts are those of one call, the
one most iterations agree on (``statistics.representative``), so a one-off first call (a cache fill)
does not show.

A function is named ``file:qualified name``: the file relative to the project's root when it is in
the project, else relative to the ``sys.path`` entry it was imported from (``torch/nn/modules/
module.py``, ``functools.py``), so that a name is the same on every machine. Its line is left out
of the name, so that adding a line above a function does not turn it into another function; the
explanation of a failure shows the line it starts at and the line that calls it
(:func:`call_sites`). Generated code (``<string>``, ``<eval_with_key>.12``) keeps its
pseudo-file name, its numbers replaced by ``#`` (torch.fx numbers its generated modules in the
order they were made, which depends on the tests before).

No torch and no pytest here: the engine works on any Python function.
"""

from __future__ import annotations

import abc
import collections
import dis
import inspect
import os
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..common.statistics import representative
from .sites import PLUGIN_DIR, Site, chain_name, locate, skipped_dirs

__all__ = ["HOOK", "METHOD", "CallSites", "call_sites", "count_calls", "function_name"]

#: What counts the calls in this interpreter (recorded with the results, shown in the docs).
HOOK = "sys.monitoring" if sys.version_info >= (3, 12) else "sys.setprofile"
#: What the counts leave out; a baseline counted otherwise is not comparable. /2: abc's walk over
#: an abstract class's subclasses (:func:`_abc_subclass_walk`); /1: this plugin's own code.
METHOD = "starts/2"

_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_RESUME = dis.opmap.get("RESUME")  # 3.11+: RESUME 0 starts a function, RESUME n>0 resumes it

#: sys.monitoring tool ids tried, in order: the profiler's, then the two that have no name.
_TOOL_IDS = (2, 3, 4)
_TOOL_NAME = "pytest-torchbench calls"


def _starts(frame: types.FrameType) -> bool:
    """Whether a ``sys.setprofile`` ``call`` event is a function's start, not a generator's or
    coroutine's resumption (which ``sys.monitoring`` reports apart, as ``PY_RESUME``)."""
    code = frame.f_code
    if not code.co_flags & _RESUMABLE:
        return True
    lasti = frame.f_lasti
    if lasti < 0:  # 3.10: a frame that never ran
        return True
    if _RESUME is None:  # 3.10: a frame that ran before is resumed
        return False
    raw = code.co_code
    return lasti + 1 < len(raw) and raw[lasti] == _RESUME and raw[lasti + 1] == 0


class _Hook:
    """Calls ``on_start(code, frame)`` at every Python function start on this thread while entered.

    ``frame`` is the started function's frame when ``frames`` is set, else None (on 3.12+ looking
    it up costs, and the counts do not need it; the call sites do)."""

    def __init__(
        self,
        on_start: Callable[[types.CodeType, types.FrameType | None], None],
        frames: bool = False,
    ) -> None:
        self.on_start = on_start
        self.frames = frames
        self.tool: int | None = None
        self.previous: Any = None

    def __enter__(self) -> _Hook:
        on_start = self.on_start
        if sys.version_info >= (3, 12):
            monitoring = sys.monitoring
            self.tool = _free_tool_id()
            ident = threading.get_ident()
            get_ident = threading.get_ident
            getframe = sys._getframe
            frames = self.frames

            def started(code: types.CodeType, offset: int) -> None:
                if get_ident() == ident:
                    # the callback's caller is the started function's frame
                    on_start(code, getframe(1) if frames else None)

            monitoring.register_callback(self.tool, monitoring.events.PY_START, started)
            monitoring.set_events(self.tool, monitoring.events.PY_START)
        else:
            self.previous = sys.getprofile()

            def profile(frame: types.FrameType, event: str, arg: Any) -> None:
                if event == "call" and _starts(frame):
                    on_start(frame.f_code, frame)

            sys.setprofile(profile)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if sys.version_info >= (3, 12):
            monitoring = sys.monitoring
            assert self.tool is not None
            monitoring.set_events(self.tool, 0)
            monitoring.register_callback(self.tool, monitoring.events.PY_START, None)
            monitoring.free_tool_id(self.tool)
            self.tool = None
        else:
            sys.setprofile(self.previous)


def _free_tool_id() -> int:
    monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
    for tool in _TOOL_IDS:
        if monitoring.get_tool(tool) is None:
            monitoring.use_tool_id(tool, _TOOL_NAME)
            return tool
    users = ", ".join(f"{tool}: {monitoring.get_tool(tool)}" for tool in _TOOL_IDS)
    raise RuntimeError(
        f"cannot count Python calls: sys.monitoring tool ids {_TOOL_IDS} are all in use ({users}); "
        "stop the profiler or tool that holds them for this run"
    )


def _check_counts(iterations: int, warmup: int) -> None:
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an int >= 1, got {iterations!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")


class _Namer:
    """Code object -> ``file:qualified name`` (see the module docstring), memoised per region."""

    def __init__(self, root: str | os.PathLike[str] | None) -> None:
        bases = [os.path.abspath(str(root))] if root is not None else []
        # The longest sys.path entry first: site-packages before its parent, the stdlib's folder.
        entries = sorted({os.path.abspath(p) for p in sys.path if p}, key=len, reverse=True)
        self.bases = [b.rstrip(os.sep) + os.sep for b in [*bases, *entries]]
        self.files: dict[str, str] = {}

    def file(self, filename: str) -> str:
        shown = self.files.get(filename)
        if shown is None:
            shown = self.files[filename] = self._file(filename)
        return shown

    def _file(self, filename: str) -> str:
        if filename.startswith("<"):
            return re.sub(r"\d+", "#", filename)
        path = os.path.abspath(filename)
        for base in self.bases:
            if path.startswith(base):
                return Path(path[len(base) :]).as_posix()
        return Path(path).as_posix()

    def name(self, code: types.CodeType) -> str:
        return f"{self.file(code.co_filename)}:{getattr(code, 'co_qualname', code.co_name)}"


def function_name(code: types.CodeType, root: str | os.PathLike[str] | None = None) -> str:
    """The name a function's calls are counted under: ``file:qualified name``."""
    return _Namer(root).name(code)


def _ours(code: types.CodeType) -> bool:
    """Code of this plugin (the wrappers between the counting loop and the user's function)."""
    return code.co_filename.startswith(PLUGIN_DIR)


def _abc_subclass_walk(code: types.CodeType) -> bool:
    """``ABCMeta.__subclasscheck__`` and the ``__subclasshook__`` methods it calls: what
    ``isinstance``/``issubclass`` against an abstract base class runs when abc's caches do not
    answer, once for the class and once for each of its subclasses, recursively. How often that
    happens follows the process, not the code: which subclasses exist (every module imported so
    far: a benchmark counted more calls after another file's tests had defined subclasses of
    tensordict's base class than in its own file's run, docs/design/measurements.md) and what the
    caches hold. Left out of the counts, with a direct ``issubclass`` too;
    ``ABCMeta.__instancecheck__``, which every such ``isinstance`` starts once, stays."""
    return code is _SUBCLASSCHECK or code.co_name == "__subclasshook__"


#: abc's own ``__subclasscheck__`` (Python code in ``abc.py`` over ``_abc``'s C functions).
_SUBCLASSCHECK: types.CodeType | None = getattr(abc.ABCMeta.__subclasscheck__, "__code__", None)


def _warm_up(
    fn: Callable[[], object],
    warmup: int,
    before_region: Callable[[], object] | None,
    before_each: Callable[[], object] | None = None,
) -> None:
    """``before_region`` (the seeding), ``warmup`` uncounted calls (each after ``before_each``),
    ``before_region`` again: what precedes every counted region, here as in the profiler's loop."""
    if before_region is not None:
        before_region()
    for _ in range(warmup):
        if before_each is not None:
            before_each()
        fn()
    if before_region is not None:
        before_region()


def count_calls(
    fn: Callable[[], object],
    *,
    iterations: int = 3,
    warmup: int = 1,
    before_region: Callable[[], object] | None = None,
    before_each: Callable[[], object] | None = None,
    root: str | os.PathLike[str] | None = None,
) -> dict[str, float]:
    """Python function starts per call of ``fn``, by function name, sorted by name.

    ``fn`` is called ``warmup`` times uncounted, then ``iterations`` times each with its own count;
    the counts returned are one call's (the one most iterations agree on). ``before_region`` (the
    seeding) runs before the warm-up and again before the counted calls, uncounted;
    ``before_each`` (pedantic's setup: every call gets its own arguments) before every call, its
    own calls uncounted. Values are
    floats holding integers (stored beside other metrics). ``root``: files under it are named
    relative to it."""
    _check_counts(iterations, warmup)
    _warm_up(fn, warmup, before_region, before_each)
    per_call: list[dict[types.CodeType, int]] = [{} for _ in range(iterations)]
    setup_calls: dict[types.CodeType, int] = {}  # what before_each starts: counted, then dropped
    counts = per_call[0]

    def on_start(code: types.CodeType, frame: types.FrameType | None) -> None:
        counts[code] = counts.get(code, 0) + 1

    with _Hook(on_start):
        for index in range(iterations):
            if before_each is not None:
                counts = setup_calls
                before_each()
            counts = per_call[index]
            fn()
    namer = _Namer(root)
    counters: list[collections.Counter[str]] = []
    for counted in per_call:
        counter: collections.Counter[str] = collections.Counter()
        for code, calls in counted.items():
            if not _ours(code) and not _abc_subclass_walk(code):
                counter[namer.name(code)] += calls
        counters.append(counter)
    chosen = representative(counters)
    return {name: float(chosen[name]) for name in sorted(chosen)}


class CallSites:
    """Where one call of the measured callable starts each function: ``sites[name]`` is
    ``[(site, calls)]``, most calls first, a site being ``path:line in function`` of the innermost
    frame of the user's code that led to the call (``sites.locate``: with the test's line when that
    frame is in an installed copy of the project's package), or why there is none;
    ``defined[name]`` is ``path:line`` where the function starts."""

    def __init__(self, sites: dict[str, list[tuple[str, int]]], defined: dict[str, str]) -> None:
        self.sites = sites
        self.defined = defined

    def __iter__(self) -> Iterator[str]:
        return iter(self.sites)


def call_sites(
    fn: Callable[[], object],
    *,
    root: str | os.PathLike[str],
    warmup: int = 1,
    before_region: Callable[[], object] | None = None,
    before_each: Callable[[], object] | None = None,
    own: tuple[str, ...] = (),
    caller: Site | None = None,
) -> CallSites:
    """One warm-up call, then one call with every function start attributed to its call site in
    the user's code (:class:`CallSites`). Walking the stack at each start costs: meant for
    benchmarks that already failed. The names are :func:`count_calls`'s. ``own`` and ``caller``:
    as for the op call sites (``sites.locate``); ``before_each``: as for :func:`count_calls`, run
    before the hook is on."""
    _check_counts(1, warmup)
    _warm_up(fn, warmup, before_region, before_each)
    if before_each is not None:
        before_each()
    skipped = skipped_dirs()
    found: dict[types.CodeType, collections.Counter[tuple[Site, Site | None] | str]] = {}

    def on_start(code: types.CodeType, frame: types.FrameType | None) -> None:
        back = frame.f_back if frame is not None else None
        counter = found.get(code)
        if counter is None:
            counter = found[code] = collections.Counter()
        counter[locate(back, skipped, own, caller)] += 1

    with _Hook(on_start, frames=True):
        fn()
    namer = _Namer(root)
    root_path = Path(root)
    sites: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    defined: dict[str, str] = {}
    for code, counter in found.items():
        if _ours(code) or _abc_subclass_walk(code):
            continue
        name = namer.name(code)
        defined.setdefault(name, f"{namer.file(code.co_filename)}:{code.co_firstlineno}")
        for site, calls in counter.items():
            sites[name][chain_name(site, root_path)] += calls
    return CallSites(
        {
            name: sorted(counter.items(), key=lambda item: (-item[1], item[0]))
            for name, counter in sorted(sites.items())
        },
        defined,
    )
