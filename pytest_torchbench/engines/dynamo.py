"""What torch.compile does when a callable runs: graphs, graph breaks and recompilations.

This module knows nothing of pytest. :func:`count_compiles` resets dynamo
(``torch._dynamo.reset()``: every compiled frame forgotten, as in a fresh process), then calls the
callable a few times and reads dynamo's own bookkeeping (through ``_compat``): how many graphs it
handed to a backend, each graph break with its reason and the user's source line, each recompilation
with its guard failure, and each frame dynamo gave up on (a graph break inside a loop runs the whole
frame eagerly).

Why the reset: dynamo caches compiled code per code object for the life of the process, so without
it a benchmark would see nothing (its function was compiled by an earlier test, or by the test's
own first call) or would see another test's recompilations. After the reset the first call compiles
as it would in a fresh process, whatever ran before, so the counts are the same whichever tests run
and in whichever order. Why it is deterministic: it counts what the compiler decided (graphs,
breaks, guard failures), which depends on the code, its inputs and the torch version, never on time
or load. The text kept is made deterministic too: file paths relative to the root directory (or to
site-packages), memory addresses removed.

Why not ``torch._dynamo.explain``: it compiles the callable it is given with its own backend, so a
benchmark calling an already compiled function (with inductor, say) would be measured as something
else, and a callable that compiles nothing would be compiled anyway.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..common import compat as _compat

__all__ = [
    "DEFAULT_WARMUP",
    "CompileCounts",
    "Event",
    "count_compiles",
    "grouped",
    "relative_location",
    "short_reason",
]

#: Calls after the first one when the benchmark gives no ``warmup``: the second call shows a
#: recompilation caused by the first (state it changed, a shape seen for the second time), the third
#: that the code settled.
DEFAULT_WARMUP = 2

_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
#: A guard on an object's identity names its id (a heap address in decimal, new in every process):
#: ``___check_type_id(m, 94284816984272)``, ``___check_obj_id(fn.__code__, 140107592005072)``.
_GUARD_ID = re.compile(r"(\b\w*_id\([^\n]*?,\s*)\d+(?=\))")
#: The user's line in a guard failure, ``  # model.py:11 in f``, whose path torch shortened relative
#: to where torch is installed (``torch.utils._traceback.shorten_filename``): a suffix of the
#: absolute path that depends on the checkout's folder. Kept as its file name.
_SEPARATORS = re.compile(r"[/\\]")
_GUARD_FRAME = re.compile(r"(?<=  # )([^#\n]+?):(\d+) in (?=[\w<])")
_COMPILE_ID = re.compile(r"^\[?\d+/\d+\]?:\s*")
_MAX_REASON = 300


@dataclasses.dataclass(frozen=True, order=True)
class Event:
    """One graph break or recompilation: why, and where in the user's code (``path:line``)."""

    where: str
    reason: str

    def __str__(self) -> str:
        return f"{self.reason} at {self.where}"


@dataclasses.dataclass
class CompileCounts:
    """What torch.compile did during ``calls`` calls after a reset."""

    calls: int
    graphs: int
    breaks: list[Event]
    recompiles: list[Event]
    frames: int


def is_compiled(fn: object) -> bool:
    """Whether calling ``fn`` runs torch.compile: a ``torch.compile``d function or module
    (``OptimizedModule``), or a module compiled in place with ``Module.compile()``. A plain
    function that calls a compiled one inside is not recognised."""
    return (
        hasattr(fn, "_torchdynamo_orig_callable")
        or getattr(fn, "_compiled_call_impl", None) is not None
    )


def count_compiles(
    fn: Callable[[], Any],
    *,
    warmup: int = DEFAULT_WARMUP,
    before_first: Callable[[], None] | None = None,
    rootdir: str | os.PathLike[str] | None = None,
    before_each: Callable[[], None] | None = None,
) -> CompileCounts:
    """Reset dynamo, run ``before_first`` (seeding, a setup), then call ``fn`` ``1 + warmup``
    times, ``before_each`` (pedantic's setup) before every call, and count what dynamo compiled.
    Exceptions of ``fn`` propagate."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    _compat.dynamo_reset()
    graphs_before = _compat.dynamo_graph_count()
    if before_first is not None:
        before_first()
    frames: list[dict[str, Any]] = []
    calls = 1 + warmup
    for _ in range(calls):
        if before_each is not None:
            before_each()
        fn()
        frames.extend(
            _compat.dynamo_take_frame_compiles()
        )  # drained per call: the record is bounded
    graphs = _compat.dynamo_graph_count() - graphs_before
    breaks = [
        Event(_user_location(stack, rootdir), short_reason(reason, rootdir))
        for reason, stack in _compat.dynamo_graph_breaks()
    ]
    recompiles = []
    for frame in frames:
        if frame.get("fail_type"):
            # The frame was skipped (runs eagerly): a graph break dynamo could not split at
            # (inside a loop, say). Counted as a break where the user's line is known.
            line = frame.get("fail_user_frame_lineno") or frame.get("co_firstlineno") or 0
            filename = frame.get("fail_user_frame_filename") or frame.get("co_filename") or "?"
            reason = short_reason(str(frame.get("fail_reason") or frame["fail_type"]), rootdir)
            breaks.append(
                Event(
                    relative_location(filename, line, rootdir),
                    f"{reason} (frame skipped: runs eagerly)",
                )
            )
        if (frame.get("cache_size") or 0) > 0:
            why = _COMPILE_ID.sub("", str(frame.get("recompile_reason") or "unknown reason"))
            recompiles.append(
                Event(
                    relative_location(
                        frame.get("co_filename") or "?", frame.get("co_firstlineno") or 0, rootdir
                    ),
                    short_reason(f"{frame.get('co_name')}: {why}", rootdir),
                )
            )
    return CompileCounts(
        calls=calls, graphs=graphs, breaks=breaks, recompiles=recompiles, frames=len(frames)
    )


def grouped(events: Sequence[Event]) -> list[tuple[Event, int]]:
    """Each distinct event with how often it happened, sorted (by place, then reason)."""
    return sorted(collections.Counter(events).items())


def short_reason(text: str, rootdir: str | os.PathLike[str] | None = None) -> str:
    """Dynamo's reason as one deterministic line: its first line (the kind of break), with the
    first line of its ``Explanation:`` when there is one; addresses and absolute paths removed."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "unknown reason"
    head = lines[0]
    explanation = next(
        (
            line[len("Explanation:") :].strip()
            for line in lines[1:]
            if line.startswith("Explanation:")
        ),
        "",
    )
    text = f"{head}: {explanation}" if explanation and explanation not in head else head
    text = _GUARD_FRAME.sub(
        lambda match: _SEPARATORS.split(match.group(1))[-1] + f":{match.group(2)} in ", text
    )
    text = _GUARD_ID.sub(r"\1...", _ADDRESS.sub("0x...", _relative_paths(text, rootdir)))
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."


def relative_location(
    filename: str, line: int, rootdir: str | os.PathLike[str] | None = None
) -> str:
    """``path:line`` with the path relative to ``rootdir`` (else to site-packages, else its
    name)."""
    return f"{_relative_path(filename, rootdir)}:{int(line)}"


def _relative_path(filename: str, rootdir: str | os.PathLike[str] | None) -> str:
    if not os.path.isabs(filename):
        return filename.replace(os.sep, "/")  # "<string>", "<bench_timer stmt>"
    path = Path(filename)
    if rootdir is not None:
        try:
            return path.relative_to(rootdir).as_posix()
        except ValueError:
            pass
    parts = path.parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            index = len(parts) - 1 - parts[::-1].index(marker)
            return "/".join(parts[index + 1 :])
    return path.name


#: An absolute path with at least two parts inside a message (``/home/u/proj/model.py``).
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/[^\s'\"():,/]+/[^\s'\"():,]+")
#: The same between quotes, where it may hold spaces: a code object's repr in a guard failure,
#: ``<code object g at 0x..., file "/home/u/my checkout/m.py", line 3>`` (torch 2.11).
_QUOTED_PATH = re.compile(r"""(["'])(/[^\n/]+/[^\n]*?)\1""")


def _relative_paths(text: str, rootdir: str | os.PathLike[str] | None) -> str:
    """Absolute paths inside a message made relative as :func:`relative_location` does."""
    text = _QUOTED_PATH.sub(
        lambda match: match.group(1) + _relative_path(match.group(2), rootdir) + match.group(1),
        text,
    )
    return _ABSOLUTE_PATH.sub(lambda match: _relative_path(match.group(0), rootdir), text)


def _user_location(
    stack: Sequence[tuple[str, int, str]], rootdir: str | os.PathLike[str] | None
) -> str:
    """The user's line of a break: the innermost frame under ``rootdir`` (a break inside a library
    function is reported where the user's code called into it), else the innermost frame."""
    if not stack:
        return "?"
    chosen = stack[-1]
    if rootdir is not None:
        root = Path(rootdir)
        inside = [frame for frame in stack if _is_under(frame[0], root)]
        if inside:
            chosen = inside[-1]
    return relative_location(chosen[0], chosen[1], rootdir)


def _is_under(filename: str, root: Path) -> bool:
    if not os.path.isabs(filename):
        return False
    try:
        relative = Path(filename).relative_to(root)
    except ValueError:
        return False
    # A virtualenv inside the checkout is not the user's code.
    return not any(part in ("site-packages", "dist-packages") for part in relative.parts)
