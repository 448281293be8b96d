"""Every private torch and pytest API this plugin uses, in one place, with version checks.

Why: private APIs change without notice. Kept here, a new torch or pytest that moves one breaks
one function with a clear fallback or message, not a traceback deep inside an engine or a report,
and ``grep _compat`` lists everything to re-check on an upgrade. Tested against torch 2.13 and
pytest 9 (``TESTED_TORCH``/``TESTED_PYTEST``), and against torch 2.5.1 and 2.9.1 with
``benchmarks/torch_versions.sh`` (docs/torch-versions.md); each function says what it does when
the private API is gone. Imports torch and pytest lazily: importing this module costs nothing.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

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

    ``FunctionCounts._from_dict`` is private (torch 1.8-2.13 at least; seen in 2.5.1 and 2.9.1);
    without it the public constructor is called with the same tuple of ``FunctionCount`` it
    builds."""
    from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import (
        FunctionCount,
        FunctionCounts,
    )

    from_dict = getattr(FunctionCounts, "_from_dict", None)
    if from_dict is not None:
        return from_dict(dict(counts), inclusive=inclusive)
    ordered = tuple(
        sorted((FunctionCount(c, f) for f, c in counts.items()), reverse=True)
    )  # pragma: no cover
    return FunctionCounts(ordered, inclusive=inclusive)  # pragma: no cover


def kineto_events(prof: Any) -> list[Any] | None:
    """The raw Kineto events of a finished ``torch.profiler.profile`` (``profiler.kineto_results``,
    private), or None where this torch does not have them (callers fall back). The engine reads
    their ``name()``, ``start_ns()``, ``end_ns()``, ``device_type()``, ``nbytes()`` (peak memory)
    and ``correlation_id()`` / ``linked_correlation_id()`` (kernels to the op that launched them),
    as torch's own ``_parse_kineto_results`` does (checked with torch 2.13, 2.9.1 and 2.5.1)."""
    try:
        return list(prof.profiler.kineto_results.events())
    except Exception:  # noqa: BLE001 - any shape change of a private API means "not available"
        return None


def cpu_allocation_events(prof: Any) -> list[Any] | None:
    """The CPU allocation and free events of a finished ``torch.profiler.profile``, in recorded
    order, each with ``start_time_ns`` and ``extra_fields`` (``ptr``, ``alloc_size``): read from
    the profiler's event tree (``kineto_results.experimental_event_tree``, private; checked with
    torch 2.13 only), the one view that gives a block's address. None where this torch lacks it."""
    try:
        import torch

        roots = prof.profiler.kineto_results.experimental_event_tree()
        allocation = torch._C._profiler._EventType.Allocation
    except Exception:  # noqa: BLE001 - any shape change of a private API means "not available"
        return None
    found = []
    stack = list(reversed(roots))
    while stack:  # depth first, in recorded order
        event = stack.pop()
        stack.extend(reversed(event.children))
        if event.tag == allocation and event.extra_fields.device.type == "cpu":
            found.append(event)
    return found


def sm_clock_reader(device: int) -> Callable[[], int] | None:
    """A function that reads CUDA device ``device``'s SM clock (MHz) from NVML, or None without one.

    torch's public ``torch.cuda.clock_rate`` initialises NVML and looks the device up again on every
    read; settling the clock reads it every 20 ms, so the device's NVML handle is taken once from
    torch's private ``torch.cuda._get_pynvml_handler`` (which maps CUDA_VISIBLE_DEVICES to NVML's
    numbering; read on an H200 with torch 2.11, present in 2.13), falling back to ``clock_rate``
    where it is missing."""
    import torch

    try:
        import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    handler = getattr(torch.cuda, "_get_pynvml_handler", None)
    public = getattr(torch.cuda, "clock_rate", None)
    try:
        if handler is None:
            if public is None:
                return None
            public(device)
            return lambda: int(public(device))
        handle = handler(device)
        pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
    except Exception:  # noqa: BLE001 - no NVML, no driver, a device NVML does not know: no clock
        return None
    return lambda: int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))


def profiler_enabled() -> bool:
    """Whether any torch profiler (kineto or the legacy autograd profiler) is recording now.

    ``torch._C._autograd._profiler_enabled`` is private;
    ``torch.autograd.profiler._is_profiler_enabled`` the legacy flag. Either missing reads as "not
    recording"."""
    import torch

    checker = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
    if checker is not None:
        try:
            if checker():
                return True
        except Exception:  # noqa: BLE001 # pragma: no cover - defensive across torch versions
            pass
    return bool(getattr(torch.autograd.profiler, "_is_profiler_enabled", False))


def stop_profiler() -> None:
    """Stop the recording torch profiler without its ``profile`` object (one a test left running).

    ``torch._C._autograd._disable_profiler`` (private) stops Kineto; ``torch.autograd.profiler.
    _run_on_profiler_stop`` (private, clears the legacy flag read by :func:`profiler_enabled`) runs
    where it exists. Each is skipped where missing. Checked with torch 2.5.1, 2.9.1 and 2.13."""
    import torch

    disable = getattr(getattr(torch._C, "_autograd", None), "_disable_profiler", None)
    if disable is not None:
        try:
            disable()
        except Exception:  # noqa: BLE001 # pragma: no cover - kineto already stopped it on its side
            pass
    on_stop = getattr(torch.autograd.profiler, "_run_on_profiler_stop", None)
    if on_stop is not None:
        on_stop()


def dynamo_cache_entries(code: Any) -> bool | None:
    """Whether dynamo has compiled ``code`` (its cache is keyed on the code object), from
    ``torch._C._dynamo.eval_frame._debug_get_cache_entry_list`` (private; present in torch 2.5.1,
    2.9.1 and 2.13). None where this torch lacks it or it fails: the caller decides."""
    import sys

    torch = sys.modules.get("torch")
    entries = getattr(
        getattr(getattr(getattr(torch, "_C", None), "_dynamo", None), "eval_frame", None),
        "_debug_get_cache_entry_list",
        None,
    )
    if entries is None:
        return None
    try:
        return bool(entries(code))
    except Exception:  # noqa: BLE001 - a private API: any change reads as "unknown"
        return None


# -- torch._dynamo (compile mode) ----------------------------------------------------------------
#
# What torch.compile did during some calls, read from dynamo's own bookkeeping. Checked against
# torch 2.13, 2.9.1 and 2.5.1 (``counters`` and ``graph_break_reasons`` exist since torch 2.0; the
# ``CompilationMetrics`` records of ``get_compilation_metrics`` since 2.2, their
# ``fail_user_frame_*`` fields in 2.5.1; their ``recompile_reason`` in 2.9.1 and 2.13 but not in
# 2.5.1, where :func:`_record_recompile_reasons` recovers it). ``torch._dynamo.explain`` is NOT
# used: it compiles the callable it is given with its own backend, so a benchmark that calls an
# already compiled function (with inductor, say) would be measured as something else, and a callable
# that never compiles anything would be compiled.


class DynamoUnavailable(RuntimeError):
    """This torch lacks the dynamo bookkeeping compile mode reads (a message says which)."""


def _dynamo_utils() -> Any:
    try:
        import torch._dynamo
        from torch._dynamo import utils
    except Exception as exc:  # noqa: BLE001 - any import failure means "no dynamo here"
        raise DynamoUnavailable(
            f"--bench-mode=compile needs torch._dynamo, which cannot be imported: {exc}"
        ) from None
    for name in (
        "counters",
        "graph_break_reasons",
        "get_compilation_metrics",
        "clear_compilation_metrics",
    ):
        if not hasattr(utils, name):
            import torch

            raise DynamoUnavailable(
                f"--bench-mode=compile reads torch._dynamo.utils.{name}, which torch "
                f"{torch.__version__} does not have (checked with torch "
                f"{TESTED_TORCH[0]}.{TESTED_TORCH[1]})"
            )
    return utils


def dynamo_reset() -> None:
    """``torch._dynamo.reset()`` (public): every code cache, guard and counter of compiled frames
    cleared, as in a fresh process. Also clears the compile records read below."""
    import torch._dynamo

    _dynamo_utils()
    torch._dynamo.reset()
    _dynamo_utils().clear_compilation_metrics()
    _recompile_reasons.clear()
    _record_recompile_reasons()


#: Recompile reasons recorded by :func:`_record_recompile_reasons`, by (file, first line, name) of
#: the recompiled code, oldest first.
_recompile_reasons: dict[tuple[str, int, str], list[str]] = {}


def _record_recompile_reasons() -> None:
    """Where ``CompilationMetrics`` has no ``recompile_reason`` (torch 2.5.1; 2.9.1 and 2.13 have
    it), record the reasons dynamo computes anyway: ``torch._dynamo.convert_frame`` calls
    ``get_and_maybe_log_recompilation_reason(cache_entry, frame)`` (private, checked with 2.5.1)
    before each recompilation and only logs its answer. That module's name for it is wrapped, once;
    the first guard failure is kept, as later torch does, and locals named as later torch names them
    (``x``, not ``L['x']``). Where either name is missing, nothing is done and recompiles read
    "unknown reason"."""
    import dataclasses

    utils = _dynamo_utils()
    metrics = getattr(utils, "CompilationMetrics", None)
    if (
        metrics is None
        or not dataclasses.is_dataclass(metrics)
        or any(f.name == "recompile_reason" for f in dataclasses.fields(metrics))
    ):
        return
    try:
        from torch._dynamo import convert_frame
    except Exception:  # noqa: BLE001 # pragma: no cover - no dynamo: nothing to record
        return
    original = getattr(convert_frame, "get_and_maybe_log_recompilation_reason", None)
    if original is None or getattr(original, "_torchbench_records", False):
        return

    def recording(cache_entry: Any, frame: Any, *args: Any, **kwargs: Any) -> Any:
        reasons = original(cache_entry, frame, *args, **kwargs)
        code = getattr(frame, "f_code", None)
        if code is not None:
            key = (code.co_filename, code.co_firstlineno, code.co_name)
            first = str(reasons[0]) if reasons else "Unable to find recompilation reasons"
            # 2.5.1 names a local L['x'] where later torch says x: told as later torch tells it.
            _recompile_reasons.setdefault(key, []).append(
                re.sub(r"\bL\['([^'\]]+)'\]", r"\1", first)
            )
        return reasons

    setattr(recording, "_torchbench_records", True)
    setattr(convert_frame, "get_and_maybe_log_recompilation_reason", recording)


def dynamo_graph_count() -> int:
    """Graphs dynamo has handed to a backend in this process so far
    (``counters["stats"]["unique_graphs"]``, not cleared by ``reset``: callers take differences)."""
    return int(_dynamo_utils().counters["stats"]["unique_graphs"])


def dynamo_graph_breaks() -> list[tuple[str, list[tuple[str, int, str]]]]:
    """Graph breaks since the last reset, in order: ``(reason, user stack)``, the stack as
    ``(filename, line, function)`` outermost first. From ``utils.graph_break_reasons``, the list
    every ``GraphCompileReason(graph_break=True)`` appends itself to (cleared by ``reset``)."""
    found = []
    for reason in list(_dynamo_utils().graph_break_reasons):
        stack = [
            (
                str(getattr(frame, "filename", "?")),
                int(getattr(frame, "lineno", 0) or 0),
                str(getattr(frame, "name", "?")),
            )
            for frame in getattr(reason, "user_stack", None) or []
        ]
        found.append((str(getattr(reason, "reason", reason)), stack))
    return found


def dynamo_take_frame_compiles() -> list[dict[str, Any]]:
    """The frame compilations recorded since the last call (``get_compilation_metrics``, then
    cleared: the record is a deque of at most 64, so callers drain it after every call), as
    plain dicts of the fields compile mode reads; runtime records (lazy backward, autotuning) left
    out."""
    utils = _dynamo_utils()
    records = utils.get_compilation_metrics()
    utils.clear_compilation_metrics()
    taken = []
    for record in records:
        if getattr(record, "is_runtime", False) or getattr(record, "co_name", None) is None:
            continue
        frame: dict[str, Any] = {
            name: getattr(record, name, None)
            for name in (
                "compile_id",
                "co_name",
                "co_filename",
                "co_firstlineno",
                "cache_size",
                "recompile_reason",
                "fail_type",
                "fail_reason",
                "fail_user_frame_filename",
                "fail_user_frame_lineno",
            )
        }
        if frame["recompile_reason"] is None and (frame["cache_size"] or 0) > 0:
            recorded = _recompile_reasons.get(
                (frame["co_filename"], frame["co_firstlineno"], frame["co_name"])
            )
            if recorded:
                frame["recompile_reason"] = recorded.pop(0)
        taken.append(frame)
    return taken


# -- pytest -------------------------------------------------------------------------------------


def fixture_argnames(item: Any) -> tuple[str, ...]:
    """The test function's own arguments (what pytest passes to it): ``item._fixtureinfo.argnames``
    (private, pytest 3-9), else the signature's parameters that pytest filled in."""
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and hasattr(info, "argnames"):
        return tuple(info.argnames)
    import inspect  # pragma: no cover

    return tuple(
        p for p in inspect.signature(item.obj).parameters if p in item.funcargs
    )  # pragma: no cover


def terminal_width(terminalreporter: Any, default: int = 100) -> int:
    """The terminal's width: ``terminalreporter._tw.fullwidth`` (private), else ``default``."""
    writer = getattr(terminalreporter, "_tw", None)
    width = getattr(writer, "fullwidth", None)
    return width if isinstance(width, int) and width > 0 else default


# -- pytest-xdist -------------------------------------------------------------------------------


def xdist_worker_sys_path() -> list[str] | None:
    """The copy of ``sys.path`` that xdist hands its local (popen) workers as their whole
    ``sys.path`` (``xdist.plugin._sys_path``, private; taken when its plugin is imported, checked
    with xdist 3.5-3.8), for an entry that must reach them as it reaches this process; None
    where xdist is not imported or keeps no such copy."""
    plugin = sys.modules.get("xdist.plugin")
    found = getattr(plugin, "_sys_path", None)
    return found if isinstance(found, list) else None


def quiet_xdist_status(config: Any) -> None:
    """Under ``-q``, silence xdist's status lines on a terminal that is not a tty: its
    ``TerminalDistReporter.ensure_show_status`` (registered as ``terminaldistreporter``; checked
    with xdist 3.5-3.8) prints "bringing up nodes..." twice there, with nothing else to say.
    Nothing happens where xdist's reporter is not registered or has no such method."""
    reporter = config.pluginmanager.get_plugin("terminaldistreporter")
    if reporter is not None and callable(getattr(reporter, "ensure_show_status", None)):
        reporter.ensure_show_status = lambda: None


def keyword_matcher(expression: str) -> Callable[[str], bool]:
    """pytest's ``-k`` grammar (``and``, ``or``, ``not``, parentheses; names match as
    case-insensitive substrings) over one string: ``_pytest.mark.expression.Expression`` (private,
    pytest 7-9), else plain substring matching. ValueError for an expression pytest refuses."""
    try:
        from _pytest.mark.expression import Expression
    except ImportError:  # pragma: no cover
        return lambda text: expression.lower() in text.lower()
    try:
        compiled = Expression.compile(expression)
    except Exception as exc:  # noqa: BLE001 - pytest's ParseError moved between versions
        raise ValueError(str(exc)) from None

    def matches(text: str) -> bool:
        lowered = text.lower()

        def name_in(name: str, /, **kwargs: Any) -> bool:
            return name.lower() in lowered

        return bool(compiled.evaluate(name_in))

    return matches
