"""Every child pytest a run starts, and how: the base measured from a revision (its children are
started by ``base.py`` through :func:`pytest_launcher` and :func:`stop`), the confirmation of a
slowdown in a fresh process, and the re-run that explains failures measured in other processes.
All are given the same :class:`Invocation` (:func:`invocation_of`) and started the way the run
was (:func:`pytest_launcher`).

Why a second pytest to explain: a failed verdict is explained by re-running the benchmark's
callable (``Explaining.explain``: op call sites). In a serial run the judging process holds that
callable at the end of the test's call phase and re-runs it at once
(``session.BenchSession.explain``). Under xdist, and in instructions mode (whose tests run in
valgrind workers), the judging process is the controller: the callable lives in a worker that has
moved on, xdist has no way to ask it afterwards, and a worker must not read baselines to judge for
itself (a worker that loaded them has a different heap, which moves instruction counts). So at the
end of the session the controller runs the failed tests once more, natively and serially, in one
pytest process measuring only the metrics to explain (``--bench-mode=ops --bench-compare=<the
same baseline>``), whose serial run explains them in-process, and reads the details from its
``--bench-json``. Cost: nothing when no such verdict failed; otherwise one pytest start
(importing torch) plus those tests.

Confirming (``Explaining.confirms_failures``, time): a regression that one process measured
stands only when a fresh process measures it too, because the spread that matters for wall time
is between processes. That re-run is made at once, for the one test, before its report is final
(the test's outcome must be right when the terminal, ``-x`` and JUnit see it), through the same
:func:`rerun`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from ..common.text import safe_text
from ..common.vocabulary import REGRESSION, Verdict
from ..judging.judgement import failure_message
from ..metrics.explaining import Explaining

if TYPE_CHECKING:
    from .baseline_source import BaselineSource
    from .options import BenchSettings


#: Options of the user's command line the re-run leaves out (``True``: takes a value): the cache
#: plugin's (the re-run runs without the cache, so as to write none), the debugger's (nobody is at
#: the re-run's stdin), and ``--basetemp`` (pytest empties that folder when it starts: the user's
#: run's temporary files would be gone).
_LEFT_OUT = {
    "--lf": False,
    "--last-failed": False,
    "--ff": False,
    "--failed-first": False,
    "--nf": False,
    "--new-first": False,
    "--sw": False,
    "--stepwise": False,
    "--sw-skip": False,
    "--stepwise-skip": False,
    "--sw-reset": False,
    "--stepwise-reset": False,
    "--cache-clear": False,
    "--lfnf": True,
    "--last-failed-no-failures": True,
    "--pdb": False,
    "--trace": False,
    "--basetemp": True,
}
#: Of those, the options of the cache plugin (and its stepwise), which a process started with
#: ``-p no:cacheprovider`` does not know: given in the user's ``PYTEST_ADDOPTS`` or ini ``addopts``,
#: which such a process reads too, they would end it with a usage error (exit 4).
CACHE_OPTIONS = {
    name: takes
    for name, takes in _LEFT_OUT.items()
    if name not in ("--pdb", "--trace", "--basetemp")
}
#: Set in the re-run's environment. The re-run reads the user's ini file (``addopts``) and
#: environment like the run that started it, so without this it would save the baselines, write
#: the Markdown, HTML and JUnit reports and the CI job summary, traces, and call the report hooks a
#: second time, with only its own few tests. With it, its one output is its ``--bench-json``.
RERUN_ENV = "TORCHBENCH_EXPLAIN_RERUN"
#: Seconds the re-run may take: a torch import and a few tests, generously.
TIMEOUT = 300.0


def in_rerun() -> bool:
    """Whether this pytest is the end-of-session re-run (it then writes only its JSON)."""
    return os.environ.get(RERUN_ENV) == "1"


#: Set in the re-run for call sites: "COMMIT LABEL", the revision whose edited lines the sites are
#: tagged with (``store/changes.py``). The re-run cannot find it itself: a base measured in this
#: job is handed to it as a folder, which names no revision.
CHANGED_SINCE_ENV = "TORCHBENCH_RERUN_CHANGED_SINCE"


def rerun_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for the re-run: marked as the re-run, without the CI job summary
    file (GitHub Actions' ``GITHUB_STEP_SUMMARY``), which the re-run would append to; ``extra``
    added."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("GITHUB_STEP_SUMMARY", CHANGED_SINCE_ENV)
    }
    env[RERUN_ENV] = "1"
    env.update(extra or {})
    return env


def changed_since() -> tuple[str, str] | None:
    """In the re-run for call sites: (commit, label) of :data:`CHANGED_SINCE_ENV`, else None."""
    value = os.environ.get(CHANGED_SINCE_ENV, "") if in_rerun() else ""
    commit, _, label = value.partition(" ")
    return (commit, label) if commit and label else None


def remove_options(args: Sequence[str], options: Mapping[str, bool]) -> list[str]:
    """``args`` without the options named in ``options`` (name -> whether it takes a value, given
    as ``--name value`` or ``--name=value``)."""
    kept: list[str] = []
    skipping = False
    for arg in map(str, args):
        if skipping:
            skipping = False
            continue
        name, has_value, _ = arg.partition("=")
        if name in options:
            skipping = options[name] and not has_value
            continue
        kept.append(arg)
    return kept


def passed_through(args: Sequence[str], positional: Sequence[str] = ()) -> list[str]:
    """The user's command line ``args`` for the re-run: every option as given, in order (a
    conftest's own, such as ``--device cpu`` or ``--runslow``, included: without them a test may
    not run, or run otherwise, and a conftest may refuse to start), less ``positional`` (the paths
    and node ids pytest parsed from it, ``config.option.file_or_dir``: the re-run names the failed
    tests instead; each removed once, from the end, where a value equal to one is least likely)
    and the options of ``_LEFT_OUT``. The re-run's own options come after these, and win."""
    kept = remove_options(args, _LEFT_OUT)
    for value in reversed([str(p) for p in positional]):
        where = next((i for i in range(len(kept) - 1, -1, -1) if kept[i] == value), None)
        if where is not None:
            del kept[where]
    return kept


def judging_options(compare: str, baselines_dir: Path, fail: str | None, strict: bool) -> list[str]:
    """The options that make the re-run judge as this run does: the same baseline set and folder,
    the same limits, the same strictness about environments."""
    options = [f"--bench-compare={compare}", f"--bench-baselines-dir={baselines_dir}"]
    if fail is not None:
        options.append(f"--bench-fail={fail}")
    if strict:
        options.append("--bench-strict")
    return options


def rerun_argument(path: Path, cwd: Path | None) -> str:
    """``path`` as a re-run's command line names it: relative to ``cwd`` where it can be,
    absolute otherwise (no ``cwd``; another drive).

    Why relative: pytest reads ``[`` in an argument as the start of a parameter id and refuses a
    path that holds one, and a CI job's checkout may be called ``job[3]``. Why ``path`` is not
    resolved: pytest names a test by the path it was given, so a symlinked test file resolved
    would be another node id; the re-run joins the argument to its working folder, which the
    system reports resolved, as text."""
    if cwd is not None:
        try:
            return Path(os.path.relpath(os.path.abspath(path), os.path.realpath(cwd))).as_posix()
        except (OSError, ValueError):
            pass
    return str(path)


@dataclasses.dataclass(frozen=True)
class Invocation:
    """What every child pytest of a run shares: the user's command line (``args``, and
    ``positional``, the paths and node ids pytest parsed from it), the rootdir its tests are named
    under, the folder it was started in (``cwd``: the children start there too), and whether
    xdist is installed (a re-run then asks for ``-n 0``). Built once, with keywords."""

    args: tuple[str, ...]
    rootdir: Path
    cwd: Path | None = None
    xdist: bool = False
    positional: tuple[str, ...] = ()


def rerun_command(
    invocation: Invocation,
    nodeids: Iterable[str],
    metrics: Iterable[str],
    compare: Sequence[str],
    json_path: Path,
) -> list[str]:
    """The command line of the re-run: this interpreter, the user's options
    (:func:`passed_through`), the failed tests (paths under the rootdir, named relative to the
    invocation's ``cwd``, the folder the re-run starts in: :func:`rerun_argument`), serial (``-n 0``
    when xdist is installed, over an ``addopts`` that sets ``-n``), only ``metrics``, judged as
    this run judges (``compare``: the baseline options, e.g. ``--bench-compare=main``,
    ``--bench-baselines-dir=...``, ``--bench-fail=...``), results to ``json_path``, temporary
    files beside it (not the next ``pytest-of-<user>/pytest-N``: ``pytest-current`` would point at
    the re-run's instead of the user's run's, and a few re-runs would age the run's own out)."""
    tests = []
    for nodeid in sorted(set(nodeids)):
        path, sep, rest = nodeid.partition("::")
        tests.append(rerun_argument(invocation.rootdir / path, invocation.cwd) + sep + rest)
    return [
        *pytest_launcher(),  # started as the run was: the same sys.path[0]
        *passed_through(invocation.args, invocation.positional),
        *(["-n", "0"] if invocation.xdist else []),
        "-q",
        "-p",
        "no:cacheprovider",
        f"--bench-mode={','.join(metrics)}",
        *compare,
        f"--bench-json={json_path}",
        f"--basetemp={json_path.parent / 'basetemp'}",
        *tests,
    ]


class Rerun(NamedTuple):
    """What a re-run gave: its verdicts, or none and ``problem``, one line saying why; ``output``,
    the end of what it printed (escaped, one line), for saying why it measured less than asked;
    ``stalled``: it took over :data:`TIMEOUT` or could not start, as the next one would likely
    too."""

    verdicts: list[Verdict]
    problem: str | None
    output: str
    stalled: bool = False


def _output_tail(path: Path, returncode: int) -> str:
    """The last words the re-run printed (its short summary: ``ERROR t.py::t - OSError: ...``),
    as one line safe for a terminal (they may hold a test's colour codes)."""
    try:
        text = path.read_bytes()[-20000:].decode("utf-8", "replace")
    except OSError:
        text = ""
    words = [word for word in text.split() if word.strip("=_-")]  # not pytest's ===== rules
    return f"exit {returncode}: {safe_text(' '.join(words[-30:]))}"


def rerun(
    invocation: Invocation,
    nodeids: Iterable[str],
    metrics: Iterable[str],
    compare: Sequence[str],
    *,
    purpose: str,
    env: Mapping[str, str] | None = None,
) -> Rerun:
    """Run ``nodeids`` again in one fresh, serial pytest measuring ``metrics`` and judging them as
    this run judges (``compare``); its verdicts, or none and one line saying why (``purpose`` names
    the re-run in that line)."""
    with tempfile.TemporaryDirectory(prefix="torchbench-rerun-") as folder:
        json_path = Path(folder) / "results.json"
        command = rerun_command(invocation, nodeids, sorted(set(metrics)), compare, json_path)
        # Its output goes to a file, not a pipe: a process a test started and left running (a helper
        # server) inherits it, and reading a pipe to its end would wait for that process too, and
        # forever after a timeout (``subprocess.run`` reads on once the re-run is killed).
        output_path = Path(folder) / "output.txt"
        try:
            with open(output_path, "wb") as output:
                done = subprocess.run(
                    command,
                    cwd=invocation.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    timeout=TIMEOUT,
                    env=rerun_environment(env),
                )
        except subprocess.TimeoutExpired:
            return Rerun(
                [], f"the re-run {purpose} took over {TIMEOUT:g} s and was stopped", "", True
            )
        except OSError as exc:
            return Rerun([], f"the re-run {purpose} could not start ({safe_text(exc)})", "", True)
        printed = _output_tail(output_path, done.returncode)
        if done.returncode in (4, 5):  # pytest's usage error; no test collected
            return Rerun([], f"the re-run {purpose} ran no test ({printed})", printed)
        try:
            document: Any = json.loads(json_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return Rerun([], f"the re-run {purpose} wrote no results ({printed})", printed)
    verdicts = []
    for data in document.get("verdicts", []) if isinstance(document, dict) else []:
        if isinstance(data, dict):
            try:
                verdicts.append(Verdict.from_json(data))
            except TypeError:
                continue
    return Rerun(verdicts, None, printed)


def rerun_details(
    invocation: Invocation,
    pending: Sequence[Verdict],
    compare: Sequence[str],
    nodeid_of: dict[str, str],
    changed_since: tuple[str, str] | None = None,
) -> tuple[dict[tuple[str, str], list[str]], str | None]:
    """Re-run the tests of the ``pending`` failed verdicts; their new details by (key, metric), and
    one line saying why there are none when the re-run could not give them. ``changed_since``:
    (commit, label) whose edited lines the re-run tags (:data:`CHANGED_SINCE_ENV`)."""
    if in_rerun():
        return (
            {},
            None,
        )  # a re-run never starts another (its tests run serially and explain in-process)
    verdicts, problem, _, _ = rerun(
        invocation,
        (nodeid_of[v.key] for v in pending),
        (v.metric for v in pending),
        compare,
        purpose="for call sites",
        env={CHANGED_SINCE_ENV: " ".join(changed_since)} if changed_since else None,
    )
    if problem:
        return {}, problem
    wanted = {(v.key, v.metric) for v in pending}
    found: dict[tuple[str, str], list[str]] = {}
    for verdict in verdicts:
        where = (str(verdict.key), str(verdict.metric))
        if where in wanted and verdict.failed:
            found[where] = [str(line) for line in verdict.details]
    missing = len(wanted) - len(found)
    return found, (
        f"the re-run for call sites did not reproduce {missing} failure(s)" if missing else None
    )


def confirm(
    invocation: Invocation,
    nodeid: str,
    suspects: Sequence[Verdict],
    compare: Sequence[str],
) -> tuple[dict[tuple[str, str], Verdict], str | None, bool]:
    """Measure one test's ``suspects`` (failed verdicts of metrics that confirm their failures)
    again in a fresh process; that process's verdicts by (key, metric), one line saying why there
    are none when it could not give them (the suspects then stand as they are; the line ends with
    what the re-run printed last: a fixture's error, say), and whether it stalled
    (``Rerun.stalled``)."""
    if in_rerun():
        return {}, None, False
    verdicts, problem, output, stalled = rerun(
        invocation,
        [nodeid],
        (v.metric for v in suspects),
        compare,
        purpose="to confirm a slowdown",
    )
    wanted = {(v.key, v.metric) for v in suspects}
    found = {(v.key, v.metric): v for v in verdicts if (v.key, v.metric) in wanted}
    if problem is None and len(found) < len(wanted):
        problem = f"the re-run to confirm a slowdown measured nothing for it ({output})"
    return found, problem, stalled


#: Interpreter options whose value is the next argument (``-X dev``, ``-W error``).
_VALUED_OPTIONS = ("-X", "-W", "-Q")
#: The names pytest's own console script has.
_PYTEST_SCRIPT = re.compile(r"^(pytest|py\.test)(-\d[\d.]*)?(\.exe)?$")


def pytest_launcher() -> list[str]:
    """How this pytest was started, to start a child the same way: ``[python, *options, script]``
    for the ``pytest`` script, ``[python, *options, "-m", "pytest"]`` otherwise. Why: it decides
    ``sys.path[0]`` (the script's folder, or the current one), which the two sides of a comparison
    must share. Only the interpreter's own options are kept: a program that calls
    ``pytest.main()`` (``python run_ci.py``) or a wrapper module (``-m pdb -m pytest``,
    ``-m cProfile``) is not started again."""
    orig = list(getattr(sys, "orig_argv", []))
    extra = len(orig) - len(sys.argv)
    prefix = orig[1 : extra + 1] if extra >= 1 and orig[extra + 1 :] == sys.argv[1:] else []
    options, rest = _interpreter_options(prefix)
    if len(rest) == 1 and _PYTEST_SCRIPT.match(os.path.basename(rest[0])):
        if os.path.isfile(rest[0]):
            return [sys.executable, *options, rest[0]]
    if rest in (["-m", "pytest"], ["-mpytest"]):
        return [sys.executable, *options, *rest]
    return [sys.executable, *options, "-m", "pytest"]


def _interpreter_options(prefix: Sequence[str]) -> tuple[list[str], list[str]]:
    """The interpreter's options at the start of ``prefix``, and what follows them."""
    index = 0
    while index < len(prefix) and prefix[index].startswith("-"):
        if prefix[index].startswith(("-m", "-c")):
            break
        index += 2 if prefix[index] in _VALUED_OPTIONS else 1
    return list(prefix[:index]), list(prefix[index:])


def stop(process: subprocess.Popen[bytes]) -> None:
    """Kill a child (if it still runs) and reap it."""
    if process.poll() is None:
        process.kill()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


#: At most this many tests' regressions are re-measured in a fresh process per session (each costs a
#: pytest start with torch): noise makes a few suspects, a real slowdown of shared code makes many
#: (docs/design/time-gate.md), and those fail unconfirmed.
MAX_CONFIRMATIONS = 25


def invocation_of(config: pytest.Config, settings: BenchSettings) -> Invocation:
    """What every child of this run shares: the user's command line, the rootdir, the folder
    pytest was started in, and whether xdist is installed."""
    return Invocation(
        args=tuple(config.invocation_params.args),
        rootdir=settings.rootdir,
        cwd=Path(config.invocation_params.dir),
        xdist=config.pluginmanager.hasplugin("xdist"),
        positional=tuple(getattr(config.option, "file_or_dir", None) or ()),
    )


def still_failed(
    unexplained: Sequence[Verdict],
    reviewed: Sequence[Verdict],
    judged_details: dict[tuple[str, str], tuple[str, ...]],
) -> list[Verdict]:
    """Of the verdicts a re-run must explain, those the user's hook left failed, as the hook
    returned them; the details each had before the hook go into ``judged_details``."""
    after = {(v.key, v.metric): v for v in reviewed}
    found = []
    for verdict in unexplained:
        hooked = after.get((verdict.key, verdict.metric))
        if hooked is not None and hooked.failed:
            found.append(hooked)
            judged_details[(verdict.key, verdict.metric)] = tuple(verdict.details)
    return found


@dataclasses.dataclass(frozen=True)
class ToExplain:
    """A failed report whose explanation needs a re-run in another process: all its verdicts, the
    command that refreshes its baselines, those of its verdicts to explain, and the node id of
    each of its results by key."""

    report: pytest.TestReport
    verdicts: tuple[Verdict, ...]
    refresh: str
    elsewhere: tuple[Verdict, ...]
    nodeids: Mapping[str, str]
    #: The details each of ``elsewhere`` had before the user's hook: the lines the re-run's
    #: explanation replaces (those the hook added stay).
    judged_details: Mapping[tuple[str, str], tuple[str, ...]] = dataclasses.field(
        default_factory=dict
    )


class ChildRuns:
    """The confirmations and the explanation re-run of one session, judged as the session
    judges (the baseline options come from its :class:`BaselineSource`)."""

    def __init__(self, invocation: Invocation, source: BaselineSource) -> None:
        self.invocation = invocation
        self.source = source
        self._confirmations = 0  # fresh processes started to confirm regressions
        self._confirm_stalled: str | None = None  # why no more are started (one timed out)
        self.to_explain: list[ToExplain] = []

    def confirm(self, nodeid: str, verdicts: Sequence[Verdict]) -> dict[tuple[str, str], Verdict]:
        """Regressions of metrics that confirm their failures (time) are measured again in a fresh
        process before this test's report is final (``Metric.confirm``): the settled verdicts, by
        (key, metric)."""
        from ..metrics import registry

        # A verdict judged on alternated rounds was measured in fresh processes already, paired.
        suspects = [
            v
            for v in verdicts
            if v.failed
            and v.status == REGRESSION
            and getattr(registry.find(v.metric, Explaining), "confirms_failures", False)
            and v.metric not in self.source.rounds.get(v.key, {})
        ]
        if not suspects or self.source.settings.compare is None or in_rerun():
            return {}
        if self._confirmations >= MAX_CONFIRMATIONS or self._confirm_stalled:
            reason = self._confirm_stalled or (
                f"{MAX_CONFIRMATIONS} slowdowns were re-measured already in this "
                "session: a change that slows this many benchmarks is not noise"
            )
            return {
                (v.key, v.metric): registry.get(v.metric, Explaining).confirm(v, None, reason)
                for v in suspects
            }
        self._confirmations += 1
        found, problem, stalled = confirm(
            self.invocation,
            nodeid,
            suspects,
            self.source.judging_options(v.key for v in suspects),
        )
        if stalled:  # a fixture waiting on what this process holds would make each wait as long
            self._confirm_stalled = (
                f"earlier in this session {problem} ({safe_text(nodeid)}): no more are started"
            )
        return {
            (v.key, v.metric): registry.get(v.metric, Explaining).confirm(
                v, found.get((v.key, v.metric)), problem
            )
            for v in suspects
        }

    def explain_elsewhere(self) -> tuple[dict[tuple[str, str], Verdict], str | None]:
        """Failed verdicts of tests that ran in other processes (xdist, instructions mode's
        workers) get their explanation from one serial re-run of those tests
        (:func:`rerun_details`); their FAILED reports, shown after this, are rewritten with it.
        The amended verdicts by (key, metric), and one line when the re-run gave less."""
        pending = [v for waiting in self.to_explain for v in waiting.elsewhere]
        if not pending or self.source.settings.compare is None:
            return {}, None
        from ..metrics import registry

        nodeids = {key: nodeid for w in self.to_explain for key, nodeid in w.nodeids.items()}
        lines = self.source.changed_lines()
        details, problem = rerun_details(
            self.invocation,
            pending,
            self.source.judging_options(v.key for v in pending),
            nodeids,
            (lines.commit, lines.label) if lines is not None else None,
        )
        amended: dict[tuple[str, str], Verdict] = {}
        for waiting in self.to_explain:
            for verdict in waiting.elsewhere:
                found = details.get((verdict.key, verdict.metric))
                judged = waiting.judged_details.get((verdict.key, verdict.metric), ())
                added = [line for line in verdict.details if line not in judged]
                amended[(verdict.key, verdict.metric)] = (
                    verdict.replace(details=(*found, *added))
                    if found is not None
                    else verdict.with_details(
                        after=[
                            registry.get(verdict.metric, Explaining).explain_elsewhere(
                                waiting.report.nodeid
                            )
                        ]
                    )
                )
            verdicts = [amended.get((v.key, v.metric), v) for v in waiting.verdicts]
            waiting.report.longrepr = failure_message(verdicts, waiting.refresh)
        return amended, problem
