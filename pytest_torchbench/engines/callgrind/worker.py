"""The counted workers' launch: valgrind's command line, the pinned and padded environment, the
deterministic allocator, what a worker does before its tests, and reading a region's dump natively
in the controller (far faster than under valgrind). No pytest, and no metric: the metric that
counts says what a region's counts make (:meth:`CallgrindLaunch.value_json`) and which plans its
baseline holds (:meth:`CallgrindLaunch.plans`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..launch import LaunchUnavailable, WorkerLaunch
from .plans import PLANS_VARIABLE, load_test_plan, write_plans

#: The CPython function a miss of the type attribute cache calls (``_PyType_Lookup`` on a miss walks
#: the MRO's dicts here). Its inclusive cost is kept apart from the count: which (type, name) pairs
#: collide in the cache's 4,096 slots follows the types' version tags and the names' addresses,
#: i.e. everything the process did before, not the benchmark's work.
TYPE_CACHE_MISS = "find_name_in_mro"
#: The functions that look attributes up in that cache (``_PyType_LookupRef`` on 3.13). Their own
#: (exclusive) cost is kept apart from the count with the misses: on a miss they hash again, fill
#: the slot and swap its name's reference, and that alone failed a small benchmark of a
#: Python-heavy library when a collision appeared (docs/design/counting.md, "Type-cache misses
#: are kept apart"). On hits their cost follows the number of lookups, as the rest of the count does
#: (what that hides: the same document). The last two are 3.14's, from its headers, not measured.
TYPE_CACHE_LOOKUPS = (
    "_PyType_Lookup",
    "_PyType_LookupRef",
    "_PyType_LookupRefAndVersion",
    "_PyType_LookupStackRefAndVersion",
)


@dataclasses.dataclass(frozen=True)
class DumpCounts:
    """What one region's dump holds, as the metric reads it: instructions by function (exclusive),
    their total, and the type cache's share kept apart."""

    exclusive: Mapping[str, int]
    total: int
    type_cache_misses: int
    type_cache_lookups: int


#: Tells a counted worker where its Callgrind dumps go (set in the counted environment).
DUMP_DIR_VARIABLE = "TORCHBENCH_CALLGRIND_DIR"


def dump_dir() -> str:
    dump_dir = os.environ.get(DUMP_DIR_VARIABLE)
    if not dump_dir:
        from . import collect

        raise collect.NotUnderValgrind(
            "instruction counting runs in workers that pytest-torchbench launches under valgrind; "
            "this process was not (run pytest with --bench-mode=instructions)"
        )
    return dump_dir


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-torchbench"


class CallgrindLaunch(WorkerLaunch):
    """Counted workers: ``env -i <the user's environment, pinned and padded> valgrind
    --tool=callgrind --instr-atstart=no ... python``, every one launched identically (so a serial
    run and ``-n 2`` count alike by construction), and their dumps read natively here. A metric
    subclasses it to say what counts make (:meth:`value_json`) and which plans to hand over
    (:meth:`plans`)."""

    #: The run's folder (dumps, workers' stderr): ``$TMPDIR/torchbench-callgrind-<uid>-<slot>``.
    folder_prefix = "torchbench-callgrind-"

    def __init__(self) -> None:
        self.valgrind_version: str | None = None
        self.allocator: Path | None = None

    def prepare(self, python: str) -> None:
        from .. import callgrind

        try:
            self.valgrind_version = callgrind.check_valgrind()
        except (callgrind.ValgrindUnavailable, callgrind.UnsupportedPlatform) as exc:
            raise LaunchUnavailable(str(exc)) from None
        try:
            self.allocator = callgrind.build_allocator(cache_dir())
        except callgrind.AllocatorBuildError as exc:
            raise LaunchUnavailable(str(exc)) from None

    def command(
        self, python: str, folder: Path, environ: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        from .spec import CountedProcessSpec

        spec = CountedProcessSpec.build(
            python,
            folder,
            allocator=self.allocator,
            valgrind_version=self.valgrind_version,
            extra_environment={DUMP_DIR_VARIABLE: str(folder)},
        )
        return spec.command(environ)

    def finish(self, data: dict[str, Any], folder: Path) -> dict[str, Any]:
        """Read a worker's region dump here, natively (far faster than under valgrind), and delete
        it.

        Only files in this run's folder are read."""
        if not data.get("dump"):
            return data
        from .parse import (
            exclusive_cost_of,
            exclusive_counts,
            inclusive_cost_of,
            parse_callgrind_file,
        )

        path = Path(str(data["dump"]))
        if path.resolve().parent != folder.resolve():
            raise RuntimeError(f"a counted worker named a dump outside {folder}: {path}")
        parts = parse_callgrind_file(path)
        exclusive, total = exclusive_counts(parts)
        counts = DumpCounts(
            exclusive,
            total,
            type_cache_misses=inclusive_cost_of(parts, TYPE_CACHE_MISS),
            type_cache_lookups=exclusive_cost_of(parts, *TYPE_CACHE_LOOKUPS),
        )
        path.unlink()
        warmup = data.get("warmup")
        return self.value_json(
            counts, int(data["number_per_run"]), int(warmup) if warmup is not None else None
        )

    def value_json(self, counts: DumpCounts, number: int, warmup: int | None) -> dict[str, Any]:
        """The value a region's counts make (what the worker's value is replaced with): the
        metric's to say."""
        raise NotImplementedError

    def plans(self, entries: Mapping[str, Any]) -> Mapping[str, tuple[int, int]]:
        """``(number, warmup)`` by node id, of the tests of ``entries`` (a baseline set's results
        by key) whose counts the workers should repeat: the metric's to say."""
        return {}

    def hand_over(
        self, entries: Mapping[str, Any] | None, folder: Path, environ: Mapping[str, str]
    ) -> dict[str, str]:
        """:data:`PLANS_VARIABLE`: the baseline's numbers of calls, one file per test in the run's
        folder (:func:`write_plans`), so that each benchmark is counted over the number its
        baseline was. Nothing when the variable is already set: a base run or a re-run keeps its
        parent's, so the base of ``--bench-compare=REV`` counts over the same numbers as the head.
        Empty when there is no baseline, or no plan could be written (a full temporary folder):
        the numbers are then planned from the probes, as in a save.

        Why: a benchmark whose first call lies near a bucket edge otherwise picked the other
        bucket when other tests ran around it: "not comparable" in CI, where a comparison was
        wanted (docs/design/counting.md, "How many calls are counted")."""
        if PLANS_VARIABLE in environ:
            return {}
        value = ""
        if entries:
            plans = folder / "plans"
            try:
                plans.mkdir(mode=0o700)
                if write_plans(plans, self.plans(entries)):
                    value = str(plans)
            except OSError:
                pass
        return {PLANS_VARIABLE: value}

    def before_test(self, nodeid: str) -> None:
        """The test's plan, read before its heap epoch (:func:`load_test_plan`)."""
        load_test_plan(nodeid)

    def isolate(self) -> None:
        """A new heap epoch of the preloaded allocator (``callgrind.start_heap_epoch``): the test's
        allocations then get the same addresses on every run, whatever ran before it."""
        from .. import callgrind

        callgrind.start_heap_epoch()

    def collected(self) -> None:
        """The worker settles (``callgrind.spec.settle_worker``): modules that change the
        interpreter when first imported are preloaded (filelock on 3.12+, for its audit hook), every
        function imported so far is marked to be quickened at its next call, then
        ``gc.freeze()``: everything import and collection made moves to the collector's
        permanent generation, untouched by the collections before each region.

        Why the marking: a heavy benchmark is called 3-7 times, too few for CPython 3.11 to
        specialise the helpers it calls, so whether they ran specialised depended on the tests
        before it (``callgrind.quickening``). Why the freeze: the first region's ``gc.collect()``
        otherwise traverses all of torch's and pytest's objects under valgrind, a large share of
        the worker's first benchmark, against little for every later one
        (docs/design/measurements.md, "Counting in the worker"). What import left as cyclic garbage
        is then never freed: a few objects, once per worker."""
        from .. import dynamo  # noqa: F401 - so a worker's first test imports no new module
        from . import collect, spec

        spec.settle_worker()  # preloads, quickening marks, gc.freeze (callgrind.spec)
        collect.pause_on_imports()  # imports between regions run uninstrumented

    def describe(self, python: str) -> str:
        return f"valgrind --tool=callgrind {python}"

    def check_hint(self, python: str) -> str:
        return f"valgrind --tool=callgrind {python} -c pass"
