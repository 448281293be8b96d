"""A base measured in the same job: ``--bench-compare=REV`` measures the revision REV here and now
where its committed baselines are missing or not comparable (``--bench-base=auto``), or always
(``--bench-base=measure``).

How: a temporary ``git worktree add --detach`` of REV's commit, an optional user build step in it
(``--bench-base-prepare``), then one child pytest with this interpreter and environment, the
user's own command line (paths, ``-k``, ``-m``, modes and every other option, less those that
write reports or baselines: :data:`LEFT_OUT`), started in the same folder of the worktree and
saving to a set in a temporary folder. The project's code is imported from the worktree:
its top folder (and ``src/``) are put first on ``PYTHONPATH``.

Why verify the imports afterwards: an editable install (``pip install -e .``) or an installed copy
of the project can still win over ``PYTHONPATH`` (a meta-path finder inserted first, a
``sitecustomize``, a conftest that puts the checkout on ``sys.path``); the base would then be HEAD
measured twice and every change would look like no change. The child writes which modules it
imported (:func:`write_imported_modules`); a module of the project (a package found at the top of
the worktree or in its ``src/``, or any module loaded from the checkout outside the interpreter's
own folders) that did not come from the worktree refuses the base, with one line naming it.

Why the child measures the whole selection, once, at the first benchmark that needs it: which
baselines are not comparable is known only when a result arrives (a worker under valgrind has
other facts than the process that judges), and measuring once costs one pytest start instead of
one per benchmark. Measured bases are cached under the output folder, keyed by REV's commit, the
environment fingerprint, the modes, the selection and the build step: a cache step in CI makes
the next push of a pull request cost about one run instead of two; a key never matches another
commit or environment.

Time is different (``rounds`` > 1, ``--bench-rounds``): wall time moves with the machine from
one minute to the next, so a base measured before the head lets that drift decide. Base and head
are then measured alternately, each round one fresh child pytest of each (the head in the
checkout, with the same interpreter, environment and options, its top folder first on
``PYTHONPATH`` as the worktree's is for the base), the order swapped every round (ABBA), and the
controller judges each time benchmark on its paired ratios (``MeasuredBase.pairs``). Rounds are
not cached: a stored base paired with a head measured later is no pair.

The two children of a round run at once and measure in turns (``engines/duet.py``): one holds
the CPU while the other waits, handing it over every 10 ms of measuring and at the end of each
benchmark, both pinned to the same CPU. Why: a base measured minutes before its head drew its own
speed of a machine that has two (docs/design/time-gate.md, "Measured in turns");
``TORCHBENCH_ROUNDS=sequential`` runs them one after the other, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..common.statistics import RoundPairs
from ..common.text import one_line, safe_text
from ..engines import duet
from ..reports.shards import describe_origins
from ..store.refs import Revision
from ..store.storage import BaselineError, BaselineSet, load_set_from_folder
from .children import RERUN_ENV, Invocation, passed_through, pytest_launcher, remove_options, stop
from .importpath import first_import_outside, map_pythonpath, tree_entries
from .progress import PROGRESS_ENV, ProgressLines
from .turns import PAIR_ENV, ROUND_SHARE, SHARE_ENV, pairs_at_once, turns_wanted
from .workers import worker_args

#: Set in the base run's environment: the folder where each of its processes writes the modules
#: it imported (:func:`write_imported_modules`). Its presence also stops a base run from measuring
#: a base of its own.
MODULES_ENV = "TORCHBENCH_BASE_MODULES"
#: Set in each child of a base measurement: it leaves as soon as pytest is done
#: (:func:`leave_when_done`).
QUICK_EXIT_ENV = "TORCHBENCH_QUICK_EXIT"
#: The child saves its results as this set, in a folder of its own.
SET_NAME = "base"
#: Options of the user's command line the base run leaves out (True: takes a value), beyond the
#: controller's own (``workers.CONTROLLER_ONLY_OPTIONS``: baselines, judging, reports) and those
#: :func:`children.passed_through` leaves out (cache, debugger, basetemp): other report files and
#: the output folder (the base run writes its own, temporary).
LEFT_OUT = {
    "--bench-output": True,
    "--bench-profile": False,
    "--junitxml": True,
    "--junit-xml": True,
    "--result-log": True,
    "--html": True,
    "--json-report-file": True,
}
#: Alternated rounds: after the first rounds, at most this many times as many rounds again, in
#: passes (:func:`pass_rounds`) each of the tests all the rounds so far could not decide. Why
#: twice: a benchmark whose speed flips between states over a machine's windows of load is often
#: still undecided after one where a second decides it (docs/design/time-gate.md).
EXTRA_PASSES = 2
#: :data:`EXTRA_PASSES` for rounds taken in turns: four times as many rounds again. Why more: a
#: pass of 2 rounds in turns costs mostly its children's start, and small calls whose processes
#: draw one of two speeds straddled the limit after 12 rounds in A/A runs; their rounds drawn
#: again were too noisy less often at 20 rounds, and passed about as many real changes
#: (docs/design/time-gate.md, "Twenty rounds in turns").
EXTRA_PASSES_IN_TURNS = 4
#: In turns, of the first ``--bench-rounds`` rounds every benchmark gets :func:`at_once_rounds`;
#: the rest measure only the tests whose rounds so far do not call unchanged at this share of the
#: limit (all paired ratios within it). Why: on a quiet 2-core machine, in turns, an unchanged
#: benchmark's paired ratios lie within a few percent, so most of a suite is told in two rounds;
#: what a change or a disturbed round moves past 70% of the limit gets every round as before
#: (docs/design/time-gate.md, "At once").
AT_ONCE = 0.7
#: Exit statuses of the base run that still give results: tests passed, some failed at REV (what
#: measured still counts), none collected (the selection does not exist at REV).
USABLE_EXITS = (0, 1, 5)


def at_once_rounds(rounds: int) -> int:
    """Of ``rounds`` first rounds, those of the whole selection: half, at least 2 (a single
    round's pair has no other to agree with)."""
    return min(rounds, max(2, rounds // 2))


def pass_rounds(rounds: int, in_turns: bool) -> int:
    """The rounds of one pass of extra rounds after ``rounds`` first rounds: in turns, as many as
    those of the whole selection (:func:`at_once_rounds`); one side after the other, ``rounds``.
    Why smaller in turns: a pass is mostly for one or two benchmarks, so what it costs is its
    children's start, round by round (docs/design/time-gate.md, "Faster blocks, kept")."""
    return at_once_rounds(rounds) if in_turns else max(rounds, 1)


def extra_passes(rounds: int, in_turns: bool) -> int:
    """How many passes of :func:`pass_rounds` make the extra rounds a benchmark may get:
    :data:`EXTRA_PASSES_IN_TURNS` x ``rounds`` in turns, else :data:`EXTRA_PASSES` x ``rounds``."""
    times = EXTRA_PASSES_IN_TURNS if in_turns else EXTRA_PASSES
    return times * max(rounds, 1) // pass_rounds(rounds, in_turns)


def first_in_turns(rounds: Sequence[tuple[BaselineSet, BaselineSet]], first: int) -> bool:
    """Whether the ``first`` rounds of ``rounds`` took turns: what sizes the passes after them,
    the same when asked after them and at the end. Why not all rounds: a pass of a CPU test alone
    can take turns where the whole selection did not (a CUDA test earlier in the process leaves
    its measurements unpinned), which would resize the passes already measured."""
    return recorded_in_turns(rounds[:first])


def recorded_in_turns(rounds: Sequence[tuple[BaselineSet, BaselineSet]]) -> bool:
    """Whether ``rounds``' measurements took turns (engines/duet.py): told by what they
    recorded, not by what was asked (children whose tests ran in xdist workers, or
    ``TORCHBENCH_ROUNDS=sequential``, measured one side after the other)."""
    for pair in rounds:
        for measured_set in pair:
            for result in measured_set.entries.values():
                if any(getattr(metric, "turns", None) for metric in result.metrics.values()):
                    return True
    return False


class BaseError(BaselineError):
    """The base could not be measured, or was measured from the wrong code: one line, exit 4."""


@dataclasses.dataclass
class MeasuredBase:
    """A base measured from REV (or found in the cache): its entries and where they are."""

    revision: Revision
    entries: BaselineSet
    folder: Path  # the set folder (``--bench-compare=<folder>`` reads it again)
    cached: bool
    seconds: float  # what measuring took (0 for a cache hit)
    #: Measured alternately (``--bench-rounds``): per round, (the base's set, the head's set); the
    #: base ran first in rounds 1, 3, ... and second in rounds 2, 4, ... (ABBA). Empty: one-shot.
    rounds: list[tuple[BaselineSet, BaselineSet]] = dataclasses.field(default_factory=list)
    #: The first rounds (``--bench-rounds``): the first :attr:`rounds_at_once` of the whole
    #: selection, the others of the tests those could not call unchanged at once (none, where
    #: they called every benchmark unchanged); the rounds after them measured only the tests the
    #: first ones could not decide.
    first_rounds: int = 0
    rounds_at_once: int = 0
    #: Tests of REV that failed in a base run, and its skipped benchmark tests (node id ->
    #: ``failed: <error>`` or ``skipped: <reason>``, one line): a benchmark of such a test that
    #: has no entry is not new. A base in which a test failed is never served from the cache (a
    #: lock or port held at the time may be free the next time); skips are cached with it.
    unmeasured: dict[str, str] = dataclasses.field(default_factory=dict)
    #: ``; whole output in PATH`` where the output of the base run with those tests was kept.
    failure_log: str = ""
    #: The most rounds whose pairs measured at once, each on a CPU of its own.
    pairs_at_once: int = 1

    @property
    def tests_failed(self) -> int:
        """How many of :attr:`unmeasured` failed (not skipped): any keeps the base out of the
        cache."""
        return failed_count(self.unmeasured)

    @property
    def in_turns(self) -> bool:
        """Whether the rounds' measurements took turns (:func:`recorded_in_turns`)."""
        return recorded_in_turns(self.rounds)

    @property
    def pass_size(self) -> int:
        """The rounds of a pass of extra rounds (:func:`pass_rounds`), told by the first rounds
        (:func:`first_in_turns`)."""
        return pass_rounds(self.first_rounds, first_in_turns(self.rounds, self.first_rounds))

    def origin(self) -> str:
        where = f"{self.revision.label}"
        if self.rounds:
            first_pass, later = self.extra_rounds()
            parts = []
            if self.completing_rounds():
                parts.append(
                    f"+{self.completing_rounds()} for the benchmarks they did not call unchanged "
                    "at once"
                )
            if first_pass:
                parts.append(
                    f"+{first_pass} for the benchmarks they found changed or could not decide"
                )
            if later:
                parts.append(f"+{later} for those still undecided")
            again = ", ".join(parts)
            return (
                f"measured from {where} in this job alternately with this checkout, "
                f"{self.rounds_at_once} rounds" + (f" ({again})" if again else "")
            )
        return (
            f"cached measurement of {where}"
            if self.cached
            else f"measured from {where} in this job"
        )

    def completing_rounds(self) -> int:
        """The first rounds measured after those of the whole selection, only of the tests those
        did not call unchanged at once (0 where none was needed)."""
        return max(min(len(self.rounds), self.first_rounds) - self.rounds_at_once, 0)

    def extra_rounds(self) -> tuple[int, int]:
        """The rounds measured after the first ones: those of the first pass (the benchmarks those
        found changed, to confirm, or could not decide), and those of the passes after it (what
        was still undecided)."""
        more = max(len(self.rounds) - self.first_rounds, 0)
        first_pass = min(more, self.pass_size)
        return first_pass, more - first_pass

    def pairs(self, key: str, metric: str, passes: int) -> RoundPairs:
        """(base, head) values of ``metric`` of benchmark ``key``, one per round that measured it
        on both sides, in round order: of the rounds of the whole selection and of the first
        ``passes`` passes of extra rounds, those that were for this benchmark (a pass re-runs
        whole tests, so a benchmark sharing its test with one sent again is measured along).
        A benchmark none of those rounds recorded (a test that records it only now and then)
        keeps the rounds it has: they are all its alternated evidence, and few of them are judged
        strictly."""
        kept = round_pairs(self.rounds[: self.first_rounds + self.pass_size * passes], key, metric)
        return kept if kept else round_pairs(self.rounds, key, metric)


def failed_count(unmeasured: Mapping[str, str]) -> int:
    """The tests of a base run's ``unmeasured`` (node id -> ``failed: ...`` / ``skipped: ...``)
    that failed."""
    return sum(why.startswith("failed:") for why in unmeasured.values())


def round_pairs(
    rounds: Sequence[tuple[BaselineSet, BaselineSet]], key: str, metric: str
) -> RoundPairs:
    """(base, head) values of ``metric`` of benchmark ``key`` in ``rounds``, one per round that
    measured it on both sides, in round order, numbered by their round (``rounds[0]`` is 1)."""
    found, numbers = [], []
    for number, (base_set, head_set) in enumerate(rounds, start=1):
        then, now = base_set.entries.get(key), head_set.entries.get(key)
        if (
            then is not None
            and now is not None
            and metric in then.metrics
            and metric in now.metrics
        ):
            found.append((then.metrics[metric], now.metrics[metric]))
            numbers.append(number)
    return RoundPairs(found, numbers)


def selection_args(args: Sequence[str], positional: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the options the base run gets, the paths and node ids it gets), from the user's command
    line: everything that selects and measures, nothing that writes reports or baselines."""
    options = remove_options(
        passed_through(worker_args(args, keep_xdist=True), positional), LEFT_OUT
    )
    return options, [str(p) for p in positional]


def _map_path(value: str, toplevel: Path, worktree: Path) -> str:
    """An absolute path into the checkout, as the same path in the worktree; anything else as is."""
    if not os.path.isabs(value):
        return value
    path, sep, rest = value.partition(
        "::"
    )  # a node id: only its file is a path (ids may hold "//")
    try:
        relative = Path(path).resolve().relative_to(toplevel.resolve())
    except (ValueError, OSError):
        return value
    return str(worktree / relative) + sep + rest


def _interpreter_folders() -> list[Path]:
    """Where the interpreter's own and installed modules live (a virtualenv inside the checkout
    included): modules from there are not the project's checkout, even inside its folder."""
    folders = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)}
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            folders.add(Path(sysconfig.get_paths()[name]))
        except KeyError:
            continue
    return [f.resolve() for f in folders]


def project_packages(worktree: Path) -> set[str]:
    """Top-level names of the project: packages (folders with ``__init__.py``) at the top of the
    worktree and in its ``src/``, and modules in ``src/``."""
    names: set[str] = set()
    for folder in (worktree, worktree / "src"):
        if not folder.is_dir():
            continue
        for child in folder.iterdir():
            if child.is_dir() and (child / "__init__.py").is_file() and child.name.isidentifier():
                names.add(child.name)
            elif folder.name == "src" and child.suffix == ".py" and child.stem.isidentifier():
                names.add(child.stem)
    return names


def wrong_import(
    modules: Mapping[str, str], worktree: Path, checkout: Path
) -> tuple[str, str] | None:
    """The first module of the project that the base run imported from elsewhere than the
    worktree, as (name, file); None when every one came from the worktree."""
    worktree = worktree.resolve()
    own = project_packages(worktree)
    worktree_text, checkout_text = str(worktree), str(checkout.resolve())
    interpreter = [str(folder) for folder in _interpreter_folders()]
    resolved = _Resolved()
    for name, file in sorted(modules.items()):
        if not os.path.isabs(file):
            continue  # not a file the module was loaded from (torch.classes says "_classes.py")
        path = resolved(file)
        if path is None or _within(path, worktree_text):
            continue
        if name.partition(".")[0] in own:
            return name, file
        if _within(path, checkout_text) and not any(_within(path, f) for f in interpreter):
            return name, file
    return None


class _Resolved:
    """Files' real paths, each folder resolved once: a base run imports about 2,000 modules from
    a few hundred folders, and resolving every file took most of a round's bookkeeping."""

    def __init__(self) -> None:
        self._folders: dict[str, str] = {}

    def __call__(self, file: str) -> str | None:
        """``file``'s real path (as ``os.path.realpath``), or None where it cannot be read."""
        try:
            folder, base = os.path.split(file)
            if os.pardir in file.split(os.sep) or not base or os.path.islink(file):
                return os.path.realpath(file)
            if folder not in self._folders:
                self._folders[folder] = os.path.realpath(folder)
            return os.path.join(self._folders[folder], base)
        except (OSError, ValueError):
            return None


def _within(path: str, folder: str) -> bool:
    """Whether the real path ``path`` lies in the real folder ``folder`` (``inside`` on text)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def write_imported_modules() -> None:
    """In a base run (``MODULES_ENV`` set): write this process's imported modules and their files,
    for the parent to check (:func:`wrong_import`). Best effort: a write error leaves the file out,
    and the parent then has less to check, never a wrong answer."""
    folder = os.environ.get(MODULES_ENV)
    if not folder:
        return
    found = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file:
            found[name] = file
    try:
        target = Path(folder) / f"modules-{os.getpid()}.json"
        target.write_text(json.dumps(found), encoding="utf-8")
    except OSError:
        pass


class _Leaving:
    """This process's quick exit (:func:`leave_when_done`): whether it was asked for, how deep in
    nested sessions the process is (a test may run pytest in-process), and whether the outermost
    session finished."""

    wanted = False
    depth = 0
    finished = False


def take_quick_exit() -> None:
    """At this process's start: take ``QUICK_EXIT_ENV`` out of the environment, so that neither
    the processes its tests start nor its xdist workers leave early, and remember it."""
    if os.environ.pop(QUICK_EXIT_ENV, None):
        _Leaving.wanted = True


@contextlib.contextmanager
def session_depth() -> Iterator[None]:
    """Around ``pytest_cmdline_main``: one session deeper."""
    _Leaving.depth += 1
    try:
        yield
    finally:
        _Leaving.depth -= 1


def session_finished() -> None:
    """The outermost session's ``pytest_sessionfinish`` ran (pytest unconfigures after it)."""
    if _Leaving.depth == 1:
        _Leaving.finished = True


def leave_when_done(status: object) -> None:
    """In a child of a base measurement, once its session has returned ``status`` (after
    ``pytest_sessionfinish`` and ``pytest_unconfigure``): run the ``atexit`` handlers, flush the
    output and exit with that status at once, without the interpreter's teardown. Why: with
    torch imported the teardown costs a sizeable share of a short child's CPU time, and a gate
    starts four children per batch of rounds, on the CPUs its pairs measure on
    (docs/design/time-gate.md, "Where a gate's time goes"). Anything else (a session that raised,
    an inner session, a status that is no number) ends as usual."""
    if not _Leaving.wanted or _Leaving.depth or not _Leaving.finished:
        return
    try:
        code = int(status)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return
    _flush()
    atexit._run_exitfuncs()  # the handlers of the measured code, of multiprocessing, of logging
    _flush()
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _read_imported_modules(folder: Path) -> dict[str, str]:
    modules: dict[str, str] = {}
    for path in sorted(folder.glob("modules-*.json")):
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            modules.update({str(k): str(v) for k, v in data.items()})
    return modules


def cache_key(
    revision: Revision,
    environment: Mapping[str, Any],
    modes: Sequence[str],
    options: Sequence[str],
    paths: Sequence[str],
    where: str,
    prepare: str | None,
) -> str:
    """What a measured base depends on: REV's commit, the environment fingerprint (facts of every
    mode, the interpreter), the modes, the selection (options, paths, the folder it starts in)
    and the build step. Any difference is another key: a cache entry never serves another
    commit or environment."""
    from .. import __version__

    blob = json.dumps(
        {
            "commit": revision.commit,
            "environment": dict(environment),
            "interpreter": sys.executable,
            "modes": list(modes),
            "options": list(options),
            "paths": list(paths),
            "where": where,
            "prepare": prepare,
            "plugin": __version__,
            "set": revision.set_name,
            # what the child imports, and its sys.path[0]: PYTHONPATH, its checkout entries
            # named alike
            "pythonpath": map_pythonpath(
                os.environ.get("PYTHONPATH", ""), revision.toplevel, Path("<tree>")
            ),
            "launcher": pytest_launcher()[1:],
            # 2: a base in which a benchmark test measured nothing is no longer cached (entries of
            # format 1 may lack such a test silently, and would pass it as new); 3: the base imports
            # through the same import path as the head (importpath)
            "format": 3,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _worktree_path(parent: Path, checkout: Path) -> Path:
    """A folder for the worktree whose path is as long as the checkout's where possible: the
    length of the paths a run sees moves instruction counts by a few tenths of a percent."""
    name = "w"
    want = len(str(checkout)) - len(str(parent)) - 1
    if want > len(name):
        name = "w" * want
    return parent / name[:200]


def _tail(path: Path) -> str:
    """What a failed command printed that says why, as one line: pytest's last error line
    (``E   ImportError: ...``) when there is one, and its last line."""
    try:
        text = path.read_bytes()[-20000:].decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip().strip("=_-!")]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    shown = [*errors[-1:], *lines[-1:]]
    return safe_text(" | ".join(line.strip("=!_ ") for line in shown))


def _keep_log(path: Path, cache_root: Path, name: str = "last-failure.txt") -> str:
    """Keep a failed step's whole output beside the cache (the worktree is removed): where it is."""
    try:
        target = cache_root / name
        shutil.copyfile(path, target)
    except OSError:
        return ""
    return f"; whole output in {target}"


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        errors="replace",
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _child_environment(checkout: Path, tree: Path, modules_dir: Path) -> dict[str, str]:
    """A child's environment: this process's, with ``PYTHONPATH``'s entries in the checkout moved
    into ``tree`` (REV's worktree; the checkout itself for a round's head run). This run put the
    checkout first there (``importpath``); the child puts its own tree first the same way, so
    both sides import their own code through import paths of the same shape."""
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", RERUN_ENV)}
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = map_pythonpath(env["PYTHONPATH"], checkout, tree)
    env[MODULES_ENV] = str(modules_dir)
    return env


def _prepare_environment(env: Mapping[str, str], worktree: Path) -> dict[str, str]:
    """The build step's environment: the child's, with the worktree first on ``PYTHONPATH``
    (the step runs before any pytest could put it there)."""
    entries = tree_entries(worktree)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    front = [] if parts[: len(entries)] == entries else entries
    return {**env, "PYTHONPATH": os.pathsep.join([*front, *parts])}


@dataclasses.dataclass(frozen=True)
class BaseRequest:
    """What a base measurement is asked for beyond the command line it shares with every child
    (:class:`~pytest_torchbench.pytest.children.Invocation`): the revision, the modes and the
    environment facts the cache is keyed by, the cache's folder, the build step, the option that
    asked for it (named in its errors), and how many alternated rounds (1: one run of the base).
    Built with keywords."""

    revision: Revision
    modes: tuple[str, ...]
    environment: Mapping[str, Any]
    cache_root: Path
    prepare: str | None = None
    option: str = "--bench-compare"
    rounds: int = 1
    #: The session's tests run in xdist or launched workers (options, ini or ``PYTEST_ADDOPTS``;
    #: the children's the same): a child then holds its turn for its whole loop, unpinned, so
    #: rounds run one pair at a time.
    in_workers: bool = False

    @property
    def shown(self) -> str:
        return f"{self.option}={self.revision.ref}"


#: ``measure``'s question after rounds: given them and whether they are the first rounds of the
#: whole selection, the tests to measure in more rounds.
Undecided = Callable[[list[tuple[BaselineSet, BaselineSet]], bool], Sequence[str]]


def measure(
    request: BaseRequest,
    invocation: Invocation,
    undecided: Undecided | None = None,
    progress: ProgressLines | None = None,
) -> MeasuredBase:
    """Measure ``request.revision`` with the user's selection (or take it from the cache);
    BaseError with one line when it cannot be done or was measured from the wrong code.

    ``request.rounds`` > 1: measure REV and this checkout alternately, each round one fresh
    pytest of each in the swapped order of the round before (base, head; head, base; ...), for
    metrics whose figure the machine moves from one minute to the next (time): drift then slows
    both sides of a round, and their ratio keeps only the change of the code. Rounds are never
    cached (a cached base paired with a head measured now pairs nothing); the first round's base
    is kept under the output folder for re-runs that judge against it. ``undecided``: given the
    rounds and whether they are the first of the whole selection (:func:`at_once_rounds`), the
    tests (node ids, relative to the invocation folder or absolute) that they could not call
    unchanged at once (those alone complete the first rounds) or could not decide (those alone
    are measured in a pass of :func:`pass_rounds` rounds more, continuing the order, so that a
    benchmark the machine disturbed in a round or two is judged on more rounds, not called too
    noisy at once; up to :func:`extra_passes` times, each pass given all the rounds so far).
    ``progress`` prints a line now and then while the children run."""
    assert invocation.cwd is not None, "a base is measured from the folder pytest started in"
    revision, shown = request.revision, request.shown
    toplevel = revision.toplevel.resolve()
    try:
        where = invocation.cwd.resolve().relative_to(toplevel)
    except ValueError:
        raise BaseError(
            f"{shown}: pytest was started in {invocation.cwd}, outside the repository "
            f"{toplevel}; start it inside the repository to measure the base revision"
        ) from None
    options, paths = selection_args(invocation.args, invocation.positional)
    key = cache_key(
        revision,
        request.environment,
        request.modes,
        options,
        paths,
        where.as_posix(),
        request.prepare,
    )
    entry = request.cache_root / (key[:24] if request.rounds <= 1 else f"alternated-{key[:24]}")
    if request.rounds <= 1:
        cached = _from_cache(entry, key, revision)
        if cached is not None:
            return cached
    started = time.monotonic()
    request.cache_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="torchbench-base-")).resolve()  # as git names it
    worktree = _worktree_path(scratch, toplevel)
    try:
        _add_worktree(worktree, toplevel, shown, revision)
        measuring = _Measuring(
            request=request,
            invocation_dir=invocation.cwd,
            worktree=worktree,
            scratch=scratch,
            options=options,
            paths=paths,
            progress=progress or ProgressLines(None),
        )
        measured = measuring.run(undecided)
        _check_imports(measuring.modules_dir, worktree, toplevel, shown, revision)
        return measuring.store(measured, key, entry, started)
    finally:
        _git(["worktree", "remove", "--force", str(worktree)], toplevel)
        shutil.rmtree(scratch, ignore_errors=True)
        _git(["worktree", "prune"], toplevel)


def _from_cache(entry: Path, key: str, revision: Revision) -> MeasuredBase | None:
    """The base cached under ``entry`` when it was measured for ``key`` from REV's commit."""
    if not (entry / "base.json").is_file():
        return None
    set_folder = entry / "baselines" / SET_NAME
    try:
        meta = json.loads((entry / "base.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    if not (
        isinstance(meta, dict) and meta.get("key") == key and meta.get("commit") == revision.commit
    ):
        return None
    loaded = _load(set_folder, revision)
    skipped = meta.get("unmeasured")
    skipped = (
        {str(k): one_line(safe_text(v)) for k, v in skipped.items()}
        if isinstance(skipped, dict)
        else {}
    )
    return MeasuredBase(revision, loaded, set_folder, True, 0.0, unmeasured=skipped)


def _add_worktree(worktree: Path, toplevel: Path, shown: str, revision: Revision) -> None:
    """``git worktree add --detach`` of REV's commit at ``worktree``."""
    added = _git(
        ["worktree", "add", "--detach", "--quiet", str(worktree), revision.commit], toplevel
    )
    if added.returncode != 0:
        message = (added.stderr.strip().splitlines() or ["unknown git error"])[-1]
        raise BaseError(
            f"{shown}: cannot check out {revision.commit[:12]} in a temporary worktree: "
            f"{safe_text(message)}"
        )


class _Measuring:
    """One measurement of a base in its worktree: the build step, then one base run or the
    alternated rounds, and what they leave (the rounds' pairs, the tests that measured nothing,
    where the failed run's output was kept), then the entry it makes in the cache."""

    def __init__(
        self,
        *,
        request: BaseRequest,
        invocation_dir: Path,
        worktree: Path,
        scratch: Path,
        options: list[str],
        paths: list[str],
        progress: ProgressLines,
    ) -> None:
        self.request, self.revision, self.shown = request, request.revision, request.shown
        toplevel = self.toplevel = request.revision.toplevel.resolve()
        self.invocation_dir, self.worktree = invocation_dir, worktree
        self.scratch, self.options, self.paths, self.progress = scratch, options, paths, progress
        # the same folder of the worktree as pytest was started in (``measure`` checked it)
        self.cwd = worktree / invocation_dir.resolve().relative_to(toplevel)
        self.modules_dir = scratch / "modules-base"
        self.modules_dir.mkdir()
        self.env = _child_environment(toplevel, worktree, self.modules_dir)
        if request.prepare:
            _prepare(
                request.prepare,
                worktree,
                _prepare_environment(self.env, worktree),
                scratch / "prepare.txt",
                self.shown,
                self.revision,
                request.cache_root,
            )
        self.child_paths = []
        for value in paths:
            mapped = _map_path(value, toplevel, worktree)
            if (self.cwd / mapped.partition("::")[0]).exists():
                self.child_paths.append(mapped)
        self.results_dir = scratch / "r1-base"
        self.base_options = [_map_path(o, toplevel, worktree) for o in options]
        self.paired: list[tuple[BaselineSet, BaselineSet]] = []
        self.in_turns = False  # set by _alternated: a base not at REV measures no rounds
        self.rounds_at_once = 0
        self.pairs_at_once = 1  # the most allowed (set by _alternated)
        self.most_at_once = 1  # the most that ran
        self.unmeasured: dict[str, str] = {}
        self.failure_log = ""

    def run(self, undecided: Undecided | None) -> BaselineSet:
        """The base's set: measured once, or of the alternated rounds."""
        if (self.paths and not self.child_paths) or not self.cwd.is_dir():
            return BaselineSet(name=SET_NAME, source=self.revision.commit)  # not at REV
        if self.request.rounds <= 1:
            child = self._base_child(self.child_paths, self.results_dir)
            child.run(self.progress, f"the base {self.revision.label}")
            measured = child.result()
            self._base_failures(child)
            return measured
        return self._alternated(undecided)

    def _base_child(self, paths: Sequence[str], results_dir: Path) -> _Child:
        return _Child(
            self.revision,
            self.base_options,
            paths,
            self.cwd,
            self.env,
            results_dir,
            self.scratch,
            self.shown,
            self.request.cache_root,
            "base",
        )

    def _base_failures(self, child: _Child) -> None:
        """The tests that measured nothing in a base run; the first such run's output is kept."""
        found = child.unmeasured_tests()
        if found and not self.unmeasured:
            self.failure_log = _keep_log(
                child.output_path,
                self.request.cache_root,
                f"base-{self.revision.commit[:12]}-output.txt",
            )
        for nodeid, error in found.items():
            self.unmeasured.setdefault(nodeid, error)

    def _alternated(self, undecided: Undecided | None) -> BaselineSet:
        """The first rounds (those of the whole selection, then the rest of them for the tests
        those could not call unchanged at once), then passes of :func:`pass_rounds` rounds of the
        tests not decided yet, up to :func:`extra_passes` of them; the base's
        set of the first round, completed by the later rounds' for a benchmark it lacks."""
        try:
            self.in_turns = turns_wanted()  # read once: every round is measured the same way
            at_once = self.in_turns and not self.request.in_workers
            self.pairs_at_once = pairs_at_once() if at_once else 1
        except ValueError as exc:
            raise BaseError(f"{self.shown}: {exc}") from None
        self.head_modules = self.scratch / "modules-head"
        self.head_modules.mkdir()
        self.head_env = _child_environment(self.toplevel, self.toplevel, self.head_modules)
        if self.in_turns:  # a pair shares the machine's moments: each measurement is shorter
            self.head_env[SHARE_ENV] = self.env[SHARE_ENV] = str(ROUND_SHARE)
        rounds = self.request.rounds
        # one side after the other, a pair does not share the machine's moments: all rounds
        self.rounds_at_once = at_once_rounds(rounds) if self.in_turns else rounds
        numbers = range(1, self.rounds_at_once + 1)
        self._rounds(numbers, self.paths, self.child_paths, f" of {rounds}")
        if len(self.paired) < rounds:
            again = list(undecided(list(self.paired), True)) if undecided is not None else []
            what = f" of {rounds}, for the {len(again)} test(s) not unchanged at once"
            self._more_rounds(again, rounds - len(self.paired), what)
        in_turns = first_in_turns(self.paired, rounds)  # as the verdicts will count the passes
        for _ in range(extra_passes(rounds, in_turns)):
            again = list(undecided(list(self.paired), False)) if undecided is not None else []
            if not again:
                break
            what = f", for the {len(again)} test(s) not decided yet"
            self._more_rounds(again, pass_rounds(rounds, in_turns), what)
        # The first round's base, and for a benchmark it lacks (its test failed there) the
        # first later round's: a copy, so that no round gains pairs it did not measure.
        first = self.paired[0][0]
        measured = dataclasses.replace(first, entries=dict(first.entries))
        for base_set, _ in self.paired[1:]:
            for result_key, result in base_set.entries.items():
                measured.entries.setdefault(result_key, result)
        return measured

    def _more_rounds(self, tests: Sequence[str], count: int, what: str) -> None:
        """``count`` rounds more of ``tests`` alone (none where there are none)."""
        if not tests:
            return
        mapped = [_map_path(test, self.toplevel, self.worktree) for test in tests]
        start = len(self.paired) + 1
        self._rounds(range(start, start + count), tests, mapped, what)

    def _rounds(
        self,
        numbers: Sequence[int],
        head_paths: Sequence[str],
        base_paths: Sequence[str],
        what: str,
    ) -> None:
        """Alternated rounds, as many at once as :attr:`pairs_at_once` (in turns, each pair on a
        CPU of its own); ``what`` follows their numbers in the progress lines."""
        for start in range(0, len(numbers), self.pairs_at_once):
            batch = numbers[start : start + self.pairs_at_once]
            pairs = [self._pair(number, head_paths, base_paths) for number in batch]
            shown = f"round {batch[0]}" if len(batch) == 1 else f"rounds {batch[0]}-{batch[-1]}"
            if self.in_turns:
                _run_pairs([order for order, _ in pairs], self.progress, shown + what)
                self.most_at_once = max(self.most_at_once, len(batch))
            else:
                for first, second in (order for order, _ in pairs):
                    first.run(self.progress, shown + what)
                    second.run(self.progress, shown + what)
            for _, (base_child, head_child) in pairs:
                self._round_done(base_child, head_child)

    def _pair(
        self, number: int, head_paths: Sequence[str], base_paths: Sequence[str]
    ) -> tuple[tuple[_Child, _Child], tuple[_Child, _Child]]:
        """Round ``number``'s children: (in the order they take turns: the base first in odd
        rounds), (base, head)."""
        base_child = self._base_child(base_paths, self.scratch / f"r{number}-base")
        head_child = _Child(
            self.revision,
            self.options,
            head_paths,
            self.invocation_dir,
            self.head_env,
            self.scratch / f"r{number}-head",
            self.scratch,
            self.shown,
            self.request.cache_root,
            "head",
        )
        base_child.round_number = head_child.round_number = number
        order = (base_child, head_child) if number % 2 else (head_child, base_child)
        return order, (base_child, head_child)

    def _round_done(self, base_child: _Child, head_child: _Child) -> None:
        """A round's results, checked, paired."""
        base_set, head_set = base_child.result(), head_child.result()
        self._base_failures(base_child)
        # before more rounds
        _check_imports(self.modules_dir, self.worktree, self.toplevel, self.shown, self.revision)
        culprit = wrong_import(
            _read_imported_modules(self.head_modules), self.toplevel, self.toplevel
        )
        if culprit is not None:
            raise BaseError(
                f"{self.shown}: a head run imported {culprit[0]} "
                f"from {safe_text(culprit[1])}, not "
                f"from this checkout ({self.toplevel}); install the project editable from this "
                "checkout (pip install -e .), or use --bench-base=stored"
            )
        self.paired.append((base_set, head_set))

    def store(self, measured: BaselineSet, key: str, entry: Path, started: float) -> MeasuredBase:
        """The measured base, moved into the cache's ``entry`` at once (a rename); a base of
        rounds, or one in which a test failed, is kept there for re-runs that judge against it
        but never served as a cache entry. ``started``: when measuring began (monotonic)."""
        # A test that failed reaches no cache (a lock or port held at the time may be free the
        # next time); skipped benchmarks are cached with their reasons.
        uncacheable = failed_count(self.unmeasured) > 0
        rounds = self.request.rounds
        set_folder = entry / "baselines" / SET_NAME
        staging = self.request.cache_root / f".{key[:24]}.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "baselines").mkdir(parents=True)
        if (self.results_dir / SET_NAME).is_dir():
            shutil.copytree(self.results_dir / SET_NAME, staging / "baselines" / SET_NAME)
        else:
            (staging / "baselines" / SET_NAME).mkdir()
        seconds = time.monotonic() - started
        if not (rounds > 1 or uncacheable):
            (staging / "base.json").write_text(self._cache_meta(key, seconds), encoding="utf-8")
        shutil.rmtree(entry, ignore_errors=True)
        os.replace(staging, entry)
        measured.source = str(set_folder)
        if rounds > 1 or uncacheable:
            return MeasuredBase(
                self.revision,
                measured,
                set_folder,
                False,
                seconds,
                self.paired,
                rounds if rounds > 1 else 0,
                self.rounds_at_once,
                self.unmeasured,
                self.failure_log,
                self.most_at_once,
            )
        return MeasuredBase(
            self.revision,
            measured,
            set_folder,
            False,
            seconds,
            unmeasured=self.unmeasured,
            failure_log=self.failure_log,
        )

    def _cache_meta(self, key: str, seconds: float) -> str:
        """The cache entry's ``base.json``: what it was measured for, and what measured nothing."""
        return json.dumps(
            {
                "key": key,
                "commit": self.revision.commit,
                "revision": self.revision.revision,
                "environment": dict(self.request.environment),
                "modes": list(self.request.modes),
                "seconds": round(seconds, 1),
                "unmeasured": self.unmeasured,
            },
            indent=1,
            sort_keys=True,
            default=str,
        )


def check_head_imports(toplevel: Path, shown: str) -> None:
    """Refuse to compare this run with a measured base when it imports a package of the project
    from outside the checkout: it would not measure the code the base is compared with."""
    culprit = first_import_outside(project_packages(toplevel), toplevel)
    if culprit is not None:
        name, file = culprit
        raise BaseError(
            f"{shown}: this run imports {name} from {safe_text(file)}, not from this checkout "
            f"({safe_text(str(toplevel))}), so it would not measure the code the base is compared "
            "with: an installed copy imported before pytest started (a .pth file, sitecustomize) "
            "or an import hook ahead of sys.path shadows it; install the project editable from "
            "this checkout (pip install -e .), or use --bench-base=stored"
        )


def _check_imports(
    modules_dir: Path, worktree: Path, toplevel: Path, shown: str, revision: Revision
) -> None:
    """Refuse a base whose processes imported a module of the project from outside the worktree."""
    culprit = wrong_import(_read_imported_modules(modules_dir), worktree, toplevel)
    if culprit is not None:
        name, file = culprit
        raise BaseError(
            f"{shown}: the base run imported {name} from {safe_text(file)}, not from the worktree "
            f"of {revision.commit[:12]} ({worktree}): an installed or editable copy of the "
            "project shadows it and would measure this checkout twice; install the project "
            "non-editable outside the checkout's import path, or use --bench-base=stored"
        )


def _prepare(
    command: str,
    worktree: Path,
    env: dict[str, str],
    output_path: Path,
    shown: str,
    revision: Revision,
    cache_root: Path,
) -> None:
    with open(output_path, "wb") as output:
        done = subprocess.run(
            command,
            shell=True,
            cwd=worktree,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        why = _tail(output_path)
        raise BaseError(
            f"{shown}: --bench-base-prepare={safe_text(command)!r} failed in the worktree of "
            f"{revision.commit[:12]} (exit {done.returncode})"
            + (f": {why}" if why else "")
            + _keep_log(output_path, cache_root)
        )


@dataclasses.dataclass
class _Child:
    """One child pytest of a base measurement: how to start it, and what it left."""

    revision: Revision
    options: Sequence[str]
    paths: Sequence[str]
    cwd: Path
    env: dict[str, str]
    results_dir: Path
    scratch: Path
    shown: str
    cache_root: Path
    side: str
    returncode: int | None = None
    round_number: int = 0  # its round's, in the progress lines where rounds run at once

    @property
    def output_path(self) -> Path:
        return self.results_dir.with_name(self.results_dir.name + "-output.txt")

    @property
    def what(self) -> str:
        return (
            f"the base run of {self.revision.commit[:12]}"
            if self.side == "base"
            else "a head run of this checkout"
        )

    @property
    def progress_path(self) -> Path:
        return self.results_dir.with_name(self.results_dir.name + "-progress")

    @property
    def report_path(self) -> Path:
        return self.results_dir.with_name(self.results_dir.name + "-report.json")

    @functools.cached_property
    def _report(self) -> dict[str, Any]:
        """This child's ``--bench-json`` report, read once after it ran ({} when it wrote none: a
        run that failed as a whole is an error of its own, :meth:`result`)."""
        try:
            document = json.loads(self.report_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        return document if isinstance(document, dict) else {}

    def unmeasured_tests(self) -> dict[str, str]:
        """The tests that failed in this child (every one: a crashed worker's report names no
        marker; the caller matches benchmarks' node ids) and the benchmark tests it skipped:
        node id -> ``failed: <error>`` / ``skipped: <reason>``, escaped, one line each."""
        document = self._report
        found: dict[str, str] = {}
        for field, word in (("failed_test_errors", "failed"), ("skipped_tests", "skipped")):
            listed = document.get(field)
            if isinstance(listed, dict):
                for name, why in listed.items():
                    if isinstance(name, str):
                        # its first line, escaped, cut after escaping (which lengthens it)
                        found.setdefault(name, f"{word}: {one_line(safe_text(one_line(str(why))))}")
        return found

    def command(self) -> list[str]:
        # its own output folder and basetemp: the two children of a round run at the same time
        own = self.results_dir.name
        return [
            *pytest_launcher(),
            *self.options,
            "-p",
            "no:cacheprovider",
            f"--bench-save={SET_NAME}",
            f"--bench-baselines-dir={self.results_dir}",
            f"--bench-json={self.report_path}",
            # the user's -x or --maxfail would leave the benchmarks after a failure unmeasured
            "--maxfail=0",
            f"--bench-output={self.scratch / ('output-' + own)}",
            f"--basetemp={self.scratch / ('basetemp-' + own)}",
            *self.paths,
        ]

    def start(
        self, pair: str | None = None, pass_fds: Sequence[int] = ()
    ) -> subprocess.Popen[bytes]:
        env = dict(self.env)
        env[PROGRESS_ENV] = str(self.progress_path)
        env[QUICK_EXIT_ENV] = "1"
        if pair is not None:
            env[PAIR_ENV] = pair
        with open(self.output_path, "wb") as output:  # a file, not a pipe: see children.rerun
            return subprocess.Popen(
                self.command(),
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                pass_fds=tuple(pass_fds),
            )

    def run(self, progress: ProgressLines, what: str) -> None:
        process = self.start()
        try:
            self.returncode = _wait([process], [self], progress, what)[0]
        except BaseException:  # interrupted: the child does not outlive its worktree
            stop(process)
            raise

    def result(self) -> BaselineSet:
        if self.returncode not in USABLE_EXITS:
            raise BaseError(
                f"{self.shown}: {self.what} failed (exit {self.returncode}): "
                f"{_tail(self.output_path)}{_keep_log(self.output_path, self.cache_root)}"
            )
        crashed = self._report.get("crashed_tests")
        if isinstance(crashed, list) and crashed:
            raise BaseError(
                f"{self.shown}: in {self.what} a test process died while running "
                f"{one_line(safe_text(', '.join(str(c) for c in crashed)))}, so it saved nothing"
                f"{_keep_log(self.output_path, self.cache_root)}"
            )
        return _load(self.results_dir / SET_NAME, self.revision)


def _wait(
    processes: Sequence[subprocess.Popen[bytes]],
    children: Sequence[_Child],
    progress: ProgressLines,
    what: str,
) -> list[int]:
    """Wait for every process (``children``: theirs, for progress lines), a line now and then;
    returns as soon as the last one exits (a small round's children take a few seconds)."""
    while True:
        codes = [process.poll() for process in processes]
        if all(code is not None for code in codes):
            return [int(code) for code in codes if code is not None]
        progress.poll(
            what,
            [
                (_side(child, len(children) > 2), child.progress_path)
                for child, code in zip(children, codes)
                if code is None
            ],
        )
        running = next(process for process, code in zip(processes, codes) if code is None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            running.wait(timeout=1.0)


def _side(child: _Child, with_round: bool = False) -> str:
    side = "base" if child.side == "base" else "this checkout"
    return f"{side} (round {child.round_number})" if with_round else side


def _run_pairs(pairs: Sequence[tuple[_Child, _Child]], progress: ProgressLines, what: str) -> None:
    """Every pair's two children at once, measuring in turns (``engines/duet.py``): the first of
    a pair takes the first turn; a pair's two measure on the same CPU, each pair on its own
    (``duet.pair_cpus``). Each child holds one end of its pair's socket pair; when either exits,
    the other measures alone."""
    import socket

    cpus: list[int | None] = [*duet.pair_cpus()] or [None]
    processes: list[subprocess.Popen[bytes]] = []
    children: list[_Child] = []
    ends_of_pairs = []
    try:
        for index, (first, second) in enumerate(pairs):
            cpu = cpus[index % len(cpus)]
            ends = socket.socketpair()
            ends_of_pairs.append(ends)
            for child, end, goes_first in ((first, ends[0], True), (second, ends[1], False)):
                pair = duet.describe(end.fileno(), os.getpid(), cpu, goes_first)
                processes.append(child.start(pair, pass_fds=[end.fileno()]))
                children.append(child)
                end.close()  # the child holds it: the end of file when one exits reaches the other
        for child, code in zip(children, _wait(processes, children, progress, what)):
            child.returncode = code
    except BaseException:  # a child that could not start, or an interrupt: none outlives this
        for process in processes:
            stop(process)
        raise
    finally:
        for ends in ends_of_pairs:
            for end in ends:
                end.close()


def _load(folder: Path, revision: Revision) -> BaselineSet:
    if not folder.is_dir():
        return BaselineSet(name=SET_NAME, source=str(folder))
    try:
        return load_set_from_folder(folder, SET_NAME)
    except BaselineError as exc:
        raise BaseError(
            f"the measured base of {revision.commit[:12]} in {folder} is unreadable: {exc}; "
            "delete that folder"
        ) from None


def describe(origins: Iterable[str]) -> str:
    """``3 committed, 2 measured in this job``: the baselines of a run by where they came from
    (one wording with ``torchbench merge``, which recounts the shards' origins)."""
    return describe_origins(origins)
