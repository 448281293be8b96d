"""Every private torch and pytest API this plugin uses, in one place, with version checks.

Why: private APIs change without notice. Kept here, a new torch or pytest that moves one breaks
one function with a clear fallback or message, not a traceback deep inside an engine or a report,
and ``grep _compat`` lists everything to re-check on an upgrade. Tested against torch 2.13 and
pytest 9 (``TESTED_TORCH``/``TESTED_PYTEST``); each function says what it does when the private
API is gone. Imports torch and pytest lazily: importing this module costs nothing.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

#: The versions these shims were checked against (major, minor).
TESTED_TORCH = (2, 13)
TESTED_PYTEST = (9, 0)


def version_tuple(version: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13)``; unknown parts read as 0."""
    parts = [int(p) if p.isdigit() else 0 for p in re.split(r"[.+]", version)[:2]]
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


def torch_version() -> tuple[int, int]:
    import torch

    return version_tuple(torch.__version__)


# -- torch --------------------------------------------------------------------------------------


def function_counts_from_dict(counts: Mapping[str, int], inclusive: bool = False) -> Any:
    """torch's ``FunctionCounts`` from ``{function: count}``.

    ``FunctionCounts._from_dict`` is private (torch 1.8-2.13 at least); without it the public
    constructor is called with the same tuple of ``FunctionCount`` it builds."""
    from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import FunctionCount, FunctionCounts

    from_dict = getattr(FunctionCounts, "_from_dict", None)
    if from_dict is not None:
        return from_dict(dict(counts), inclusive=inclusive)
    ordered = tuple(sorted((FunctionCount(c, f) for f, c in counts.items()), reverse=True))  # pragma: no cover
    return FunctionCounts(ordered, inclusive=inclusive)  # pragma: no cover


def kineto_events(prof: Any) -> list[Any] | None:
    """The raw Kineto events of a finished ``torch.profiler.profile`` (``profiler.kineto_results``,
    private), or None where this torch does not have them (callers fall back). The engine reads
    their ``name()``, ``start_ns()``, ``end_ns()``, ``device_type()``, ``nbytes()`` (peak memory)
    and ``correlation_id()`` / ``linked_correlation_id()`` (kernels to the op that launched them),
    as torch's own ``_parse_kineto_results`` does (checked with torch 2.13)."""
    try:
        return list(prof.profiler.kineto_results.events())
    except Exception:  # noqa: BLE001 - any shape change of a private API means "not available"
        return None


def profiler_enabled() -> bool:
    """Whether any torch profiler (kineto or the legacy autograd profiler) is recording now.

    ``torch._C._autograd._profiler_enabled`` is private; ``torch.autograd.profiler._is_profiler_enabled``
    the legacy flag. Either missing reads as "not recording"."""
    import torch

    checker = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
    if checker is not None:
        try:
            if checker():
                return True
        except Exception:  # noqa: BLE001 # pragma: no cover - defensive across torch versions
            pass
    return bool(getattr(torch.autograd.profiler, "_is_profiler_enabled", False))


# -- pytest -------------------------------------------------------------------------------------


def fixture_argnames(item: Any) -> tuple[str, ...]:
    """The test function's own arguments (what pytest passes to it): ``item._fixtureinfo.argnames``
    (private, pytest 3-9), else the signature's parameters that pytest filled in."""
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and hasattr(info, "argnames"):
        return tuple(info.argnames)
    import inspect  # pragma: no cover

    return tuple(p for p in inspect.signature(item.obj).parameters if p in item.funcargs)  # pragma: no cover


def terminal_width(terminalreporter: Any, default: int = 100) -> int:
    """The terminal's width: ``terminalreporter._tw.fullwidth`` (private), else ``default``."""
    writer = getattr(terminalreporter, "_tw", None)
    width = getattr(writer, "fullwidth", None)
    return width if isinstance(width, int) and width > 0 else default
