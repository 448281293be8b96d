"""Op counts: deterministic per-iteration counts of ``aten::`` ops, and where the user's code calls
them.

Unlike times, op counts do not move with machine load, so they can be compared exactly against a
baseline, and a difference explains *why* something got slower (one more ``aten::clone``, one more
``aten::copy_``). :func:`op_call_sites` answers the next question, *which line*: it is run only
for a benchmark whose op counts already failed the gate, because tagging every torch call costs.
"""

from __future__ import annotations

import collections
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, record_function

from ..sites import Site, chain_name, locate, user_frame
from ..sites import skipped_dirs as _skipped_dirs
from .iterations import CallHooks, Windows, profiler_output_silenced, record, representative
from .options import ProfilerOptions

__all__ = ["DEFAULT_OP_PREFIXES", "SITE_MARKER", "count_ops", "op_call_sites", "user_frame"]

#: Only events with one of these prefixes are counted as ops. ``aten::`` covers every dispatcher op
#: of core PyTorch, nested ones included; it excludes the iteration marker, ``[memory]`` events,
#: ``ProfilerStep#N``, autograd bookkeeping ranges (``autograd::engine::...``, ``*Backward0``) and
#: runtime calls such as ``cudaLaunchKernel``, whose number or presence depends on the profiler or
#: the driver rather than on the code under test.
DEFAULT_OP_PREFIXES: tuple[str, ...] = ("aten::",)

#: Prefix of the ``record_function`` ranges :func:`op_call_sites` wraps around each torch call made
#: from user code; the rest of the name is the call site (``path:line in function``).
SITE_MARKER = "torchbench::site "

#: Why an op has no call site when no tagged range holds it: it was dispatched without a torch
#: function call the torch function mode sees (from C++, a C extension, a hook torch runs itself).
NOT_SEEN = "site unknown: not called through torch's Python API"


def _op_key(ev: Any, by_shape: bool) -> str:
    if by_shape:
        return f"{ev.name} {list(ev.input_shapes) if ev.input_shapes is not None else []}"
    return str(ev.name)


def _per_iteration_counts(
    events: Sequence[Any], *, by_shape: bool, prefixes: tuple[str, ...]
) -> list[collections.Counter[str]]:
    """One Counter per iteration marker (see ``iterations``: an op belongs to the marker whose
    window contains its start)."""
    windows = Windows.of_events(events)
    counters: list[collections.Counter[str]] = [collections.Counter() for _ in range(len(windows))]
    for ev in events:
        if not ev.name.startswith(prefixes):
            continue
        i = windows.index(ev.time_range.start)
        if i is not None:
            counters[i][_op_key(ev, by_shape)] += 1
    return counters


def count_ops(
    fn: Callable[[], object],
    *,
    iterations: int = 3,
    warmup: int = 1,
    by_shape: bool = False,
    prefixes: tuple[str, ...] = DEFAULT_OP_PREFIXES,
    before_region: Callable[[], object] | None = None,
    before_each: Callable[[], object] | None = None,
) -> dict[str, float]:
    """Count the ``aten::`` ops one call of ``fn`` dispatches, nested ops included.

    ``fn`` is first called ``warmup`` times without the profiler (lazy initialisation, caches), then
    ``iterations`` times under a CPU-only profiler, each call inside its own marker. The counts are
    those of one iteration (see ``iterations.representative``), so they do not depend on
    ``iterations`` nor on anything the profiler does outside the markers. Counting *nested* ops
    gives the most explanatory diff (``aten::linear`` -> ``aten::addmm`` -> ``aten::copy_``), at the
    price that one extra top-level op can show up as several changed lines.

    With ``by_shape`` the keys carry the input shapes, e.g. ``"aten::add [[4, 4], [4, 4], []]"``.
    Returns a dict sorted by key; values are floats (for storage alongside other metrics) holding
    integers. ``before_region`` (e.g. seeding) runs before the warm-up and before the profiled
    iterations, outside any iteration marker; ``before_each`` before every call (:func:`record`).
    """
    prof = record(
        fn,
        iterations=iterations,
        warmup=warmup,
        what="count_ops",
        options=ProfilerOptions(activities=(ProfilerActivity.CPU,), record_shapes=by_shape),
        hooks=CallHooks(before_region=before_region, before_each=before_each),
    )
    counters = _per_iteration_counts(prof.events(), by_shape=by_shape, prefixes=prefixes)
    if len(counters) != iterations:  # pragma: no cover - would mean the profiler lost our markers
        raise RuntimeError(
            f"profiler recorded {len(counters)} iteration markers for {iterations} iterations"
        )
    chosen = representative(counters)
    return {key: float(chosen[key]) for key in sorted(chosen)}


# -- call sites ------------------------------------------------------------------------------------


class _SiteMode(TorchFunctionMode):
    """Wraps every torch call made from user code in a range named after its call site.

    Why not the profiler's own ``with_stack=True``: in this torch its stacks name Python functions
    by the line they start on (the op events' own ``stack()`` is empty; their Python parents are
    function-entry events such as ``gray.py(50): grayscale_to_rgb``), not the line that called the
    op. The torch function mode sees the calling frame itself. Inside a handled call the mode is
    off (torch pops it), so each user-level call gets one range and its nested ops fall inside it.
    """

    def __init__(self, root: Path, own: tuple[str, ...] = (), caller: Site | None = None) -> None:
        super().__init__()
        self.root = root
        self.skipped = _skipped_dirs()
        self.own = own
        self.caller = caller
        self.names: dict[tuple[Site, Site | None] | str, str] = {}

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        site = locate(sys._getframe(1), self.skipped, self.own, self.caller)
        name = self.names.get(site)
        if name is None:
            name = self.names[site] = SITE_MARKER + chain_name(site, self.root)
        with record_function(name):
            return func(*args, **kwargs)


def op_call_sites(
    fn: Callable[[], object],
    *,
    root: Path,
    by_shape: bool = False,
    prefixes: tuple[str, ...] = DEFAULT_OP_PREFIXES,
    hooks: CallHooks | None = None,
    own: tuple[str, ...] = (),
    caller: Site | None = None,
) -> dict[str, list[tuple[str, int]]]:
    """Where one call of ``fn`` calls each op: op key -> [(``path:line in function``, calls)], most
    calls first. Paths are relative to ``root`` when under it.

    One warm-up call, then one call under the profiler with every torch call from user code
    tagged by its call site (:class:`_SiteMode`). An op is attributed to the site whose range
    contains its start, which also covers ops run on other threads during the call (autograd's
    backward). The op keys are :func:`count_ops`'s, so they line up with a verdict's changed ops.
    Costs a few times one plain profiled call: meant for benchmarks that already failed.
    ``hooks`` (seeding, pedantic's setup) run around both calls as :func:`record` runs them.

    ``own``: folders of the project's own packages (``sites.own_dirs``), the user's code even when
    installed; a site in one of them also names the test's line that led there (``caller`` when
    the stack does not reach the test). An op with no site gets the reason instead
    (``sites.locate``, :data:`NOT_SEEN`).
    """
    mode = _SiteMode(Path(root), own, caller)

    def tagged() -> object:
        with mode:
            return fn()

    with profiler_output_silenced():
        prof = record(
            tagged,
            iterations=1,
            warmup=1,
            what="op_call_sites",
            options=ProfilerOptions(activities=(ProfilerActivity.CPU,), record_shapes=by_shape),
            hooks=hooks,
        )
    events = prof.events()
    iteration = Windows.of_events(events)
    site_spans = [
        (ev.time_range.start, ev.time_range.end, ev.name[len(SITE_MARKER) :])
        for ev in events
        if ev.name.startswith(SITE_MARKER)
    ]
    sites = Windows((start, end) for start, end, _ in site_spans)
    names = [name for _, _, name in sorted(site_spans)]
    found: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for ev in events:
        if not ev.name.startswith(prefixes) or iteration.index(ev.time_range.start) is None:
            continue
        i = sites.index(ev.time_range.start)
        found[_op_key(ev, by_shape)][names[i] if i is not None else NOT_SEEN] += 1
    return {
        op: sorted(counter.items(), key=lambda item: (-item[1], _in_line_order(item[0])))
        for op, counter in sorted(found.items())
    }


def _in_line_order(site: str) -> list[tuple[int, str]]:
    """A sort key that puts ``a.py:9`` before ``a.py:11`` (numbers compared as numbers)."""
    return [(int(part), "") if part.isdigit() else (0, part) for part in re.split(r"(\d+)", site)]
