"""The gathering side of a run: the process that owns the terminal (serial run or xdist controller).

Test processes attach their results and verdicts to the call-phase TestReport
(``report.torchbench``), which pytest and xdist already carry between processes; this plugin
collects them in ``pytest_runtest_logreport`` and, once, at the end of the session writes
baselines, the JSON report and the terminal table. Baselines are written once, by this process
only.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from .._compat import terminal_width
from ..core import explain, gate
from ..core.accept import TRAILER, Acceptance, from_trailers
from ..core.judgement import (
    NEW,
    NOT_COMPARABLE,
    REGRESSION,
    TOO_NOISY,
    UNCHANGED,
    Verdict,
    failure_message,
)
from ..core.results import BenchmarkResult, nodeid_of
from ..core.text import one_line, safe_text
from ..reports import jsonreport, junit, markdown, publish, shards, terminal
from ..store import changes
from ..store.refs import Revision, compare_revision, exists_at, git_toplevel, save_stamp
from ..store.storage import BaselineError, BaselineSet, save_set
from . import base, extensions
from .base import BaseError, MeasuredBase
from .marker import MARKER_NAME as MARKER
from .options import EXIT_INCOMPARABLE, BenchSettings
from .progress import ProgressLines
from .session import BenchSession

REPORT_ATTRIBUTE = "torchbench"


def in_ci() -> bool:
    """Whether this run is a CI job: the ``CI`` variable that GitHub Actions, GitLab CI, CircleCI,
    Travis, Buildkite and most others set, non-empty and not ``false``/``0`` (set by hand to turn
    it off)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "false", "0", "no")


def changes_only(config: pytest.Config) -> bool:
    """Whether the terminal tables show only the benchmarks whose verdict is not "unchanged" (with
    one line of counts for the rest): with ``-q``, and in CI unless ``-v`` asks for everything.
    Why: a CI log of a few hundred benchmarks buried its one regression under pages of unchanged
    rows, and the Markdown and HTML reports keep every row; locally, the full table is the point
    of running the benchmarks (docs/reports.md)."""
    verbosity = int(getattr(config.option, "verbose", 0) or 0)
    return verbosity < 0 or (in_ci() and verbosity <= 0)


def failure_line(report: pytest.TestReport) -> str:
    """A failed report's error as one line (pytest's crash message: ``OSError: [Errno 98] Address
    already in use``), at most 300 characters; escaped where it is shown, not here."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = getattr(crash, "message", None) if crash is not None else None
    if not isinstance(text, str) or not text.strip():
        # No crash entry (a fixture that does not exist, say): pytest's first "E" line holds the
        # error ("E  fixture 'port' not found"); its last line is only the test's path:line.
        raw = str(report.longrepr or "").splitlines()
        lines = [line.strip() for line in raw if line.strip()]
        # unstripped: source lines are indented, so a line of code such as "E = 5" is not taken
        errors = [line[1:].strip() for line in raw if line.startswith("E ") and line[1:].strip()]
        text = errors[0] if errors else lines[-1] if lines else f"failed in {report.when}"
    return one_line(text)


def skip_reason(report: pytest.TestReport) -> str:
    """A skipped report's reason as one line (``Skipped: port 8080 in use``; an xfail's
    ``expected to fail: <reason>``)."""
    xfail = getattr(report, "wasxfail", None)
    if xfail is not None:
        return one_line(f"expected to fail: {xfail}" if xfail else "expected to fail")
    longrepr = report.longrepr
    text = (
        longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    )
    return one_line(str(text) or "skipped")


def uncompared(verdicts: list[Verdict]) -> list[Verdict]:
    """Verdicts that compared nothing and did not fail: a baseline from another environment, with
    nothing measured in its place (``--bench-strict`` fails them on their own tests already)."""
    return [v for v in verdicts if v.status == NOT_COMPARABLE and not v.failed]


def unjudged(verdicts: list[Verdict]) -> list[Verdict]:
    """Verdicts the gate could not decide: measured alternately with the base, but the rounds
    decide nothing at the limit (too noisy to judge at it)."""
    return [v for v in verdicts if v.status == TOO_NOISY and not v.failed]


#: At most this many tests' regressions are re-measured in a fresh process per session (each costs a
#: pytest start with torch): noise makes a few suspects, a real slowdown of shared code makes many
#: (docs/design/time-gate.md), and those fail unconfirmed.
MAX_CONFIRMATIONS = 25


def narrowed_modules(args: Sequence[str], invocation_dir: Path, rootpath: Path) -> set[str]:
    """The test modules (paths relative to ``rootpath``, as results name them) that the command
    line narrowed to some of their nodes (``tests/test_a.py::test_x``) and did not also name whole
    (the file itself, or a folder above it): only there can a test be absent without being gone.

    Why from the arguments: pytest collects only the nodes named, so the collected ids cannot tell
    a test left out of the run from a test removed from its file."""
    whole: list[Path] = []
    narrowed: list[Path] = []
    for arg in args:
        written, has_node, _ = str(arg).partition("::")
        absolute = Path(os.path.abspath(invocation_dir / written))
        (narrowed if has_node else whole).append(absolute)
    modules = set()
    for module in narrowed:
        if any(module == named or named in module.parents for named in whole):
            continue
        try:
            modules.add(module.relative_to(rootpath).as_posix())
        except ValueError:
            modules.add(module.as_posix())
    return modules


#: Written into the output folder the first time a run leaves it behind, as pytest does for
#: ``.pytest_cache``: measured bases, traces and plans are this machine's, never the project's.
OUTPUT_GITIGNORE = (
    "# Created by pytest-torchbench: caches and traces of this machine, not for git.\n*\n"
)


def ignore_in_git(folder: Path | None) -> None:
    """Put a ``.gitignore`` that ignores everything into ``folder`` when it exists and has none."""
    if folder is None or not folder.is_dir() or (folder / ".gitignore").exists():
        return
    try:
        (folder / ".gitignore").write_text(OUTPUT_GITIGNORE, encoding="utf-8")
    except OSError:
        pass  # a read-only folder keeps what it has; nothing else depends on it


class InterruptWatch:
    """Notes every SIGINT the process receives, whatever becomes of the KeyboardInterrupt it raises.

    Why: pytest marks a run interrupted (``pytest_keyboard_interrupt``, exit status 2) while it
    handles the KeyboardInterrupt. A second Ctrl-C (or ``timeout``'s SIGINT and then the user's)
    that arrives during that handling escapes it, and pytest then finishes the session with exit
    status 0 as if nothing happened: the partial results of a run the user stopped would be saved
    as baselines. The signal itself is the one sure sign. The previous handler still runs (it
    raises the KeyboardInterrupt); an ignored or default SIGINT is left alone.

    A SIGINT within :data:`REPEAT_WINDOW` seconds of the first is the same request to stop (a
    key pressed twice, ``timeout``'s then the user's): noted, not raised again. Raised while
    pytest formats the first one, it escaped as some 150 lines of raw traceback and a run killed
    by the signal; pressed later, when stopping seems to hang, it interrupts as usual.
    """

    REPEAT_WINDOW = 3.0

    def __init__(self) -> None:
        self.received = False
        self._first: float | None = None
        self._previous: Callable[[int, Any], Any] | None = None

    def _handler(self, signum: int, frame: Any) -> None:
        self.received = True
        now = time.monotonic()
        if self._first is not None and now - self._first < self.REPEAT_WINDOW:
            return
        self._first = now
        if self._previous is not None:
            self._previous(signum, frame)

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # Python's rule: handlers are set from the main thread only
        previous = signal.getsignal(signal.SIGINT)
        if callable(previous):
            self._previous = previous
            signal.signal(signal.SIGINT, self._handler)

    def uninstall(self) -> None:
        if self._previous is not None and signal.getsignal(signal.SIGINT) == self._handler:
            signal.signal(signal.SIGINT, self._previous)
        self._previous = None


class Controller:
    def __init__(
        self,
        config: pytest.Config,
        settings: BenchSettings,
        baseline: BaselineSet | None,
        session: BenchSession | None = None,
        revision: Revision | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        #: The baselines judged against: the committed set, with entries replaced by measured ones
        #: where the base was measured (``--bench-base``); ``committed`` keeps the original.
        self.baseline = (
            dataclasses.replace(baseline, entries=dict(baseline.entries)) if baseline else None
        )
        self.committed = baseline
        #: --bench-compare's git revision when its base may be measured (auto / measure), else None.
        self.revision = revision
        self.measured: MeasuredBase | None = None
        #: Why the base was measured in this job (auto mode: the first committed entry that could
        #: not serve).
        self.measure_reason = ""
        #: Where each judged benchmark's baseline came from (key -> words), with a revision only.
        self.origins: dict[str, str] = {}
        self._exists_at_revision: dict[str, bool] = {}
        #: Per benchmark key, per metric that alternates: the (base, head) values of the rounds
        #: measured alternately (``--bench-rounds``), judged instead of one run against one.
        self.rounds: dict[str, dict[str, list[tuple[Any, Any]]]] = {}
        #: Benchmarks sent to be measured again (``_undecided_tests``): key -> how many passes of
        #: extra rounds were for it. A benchmark is judged on its first rounds and those passes
        #: only: a sibling sharing its test (several recordings in one test) runs in a pass made
        #: for another and must not be judged on rounds it was not sent for.
        self.again_passes: dict[str, int] = {}
        #: This process's measuring side: in a serial run it still holds the callable of the test
        #: being judged, so a failed verdict can be explained by re-running it (op call sites).
        self.session = session
        self.results: list[BenchmarkResult] = []
        self._key_owners: dict[str, str] = {}  # result key -> the node id of the test that made it
        self.verdicts: list[Verdict] = []
        self.modules_run: set[str] = set()
        self.nodeids_run: set[str] = set()
        self.collected: set[str] = set()  # before -k/-m deselection: a test not here was removed
        self.saved: list[Path] = []
        #: What the reports say of a save when nothing was compared (a record job's summary).
        self.saved_as: str | None = None
        #: Benchmark tests that pytest failed or errored (any phase, with or without results).
        self.failed_tests: set[str] = set()
        #: Every test that failed, benchmark or not (a crashed xdist worker's report has no
        #: markers), with its first failure's error, one line each (``--bench-json``'s
        #: ``failed_test_errors``): what a measured base tells of a benchmark that failed at REV.
        self.failure_lines: dict[str, str] = {}
        #: Benchmark tests that were skipped, with the reason (``--bench-json``'s
        #: ``skipped_tests``).
        self.skip_reasons: dict[str, str] = {}
        #: Benchmarks with no baseline because their test failed in the base run of REV
        #: (key -> why): not new, but not judged (:meth:`_not_judged_at_base`).
        self.failed_at_base: dict[str, str] = {}
        self.notes: list[str] = []
        #: The lines edited since the baseline's revision (asked of git at the first failure).
        self._changes: changes.ChangedLines | None = None
        self._changes_asked = False
        self._acceptance: Acceptance | None = None
        #: The block that ends the run when benchmarks were compared with nothing (see
        #: :meth:`_gate_held`), and whether it turned the exit status.
        self.uncompared_block: list[str] = []
        self.interrupted = False
        self._sigint = InterruptWatch()  # a Ctrl-C that escapes pytest's handling still counts
        self._pending_properties: dict[str, list[tuple[str, object]]] = {}  # JUnit, per test
        self._confirmations = (
            0  # fresh processes started to confirm regressions (MAX_CONFIRMATIONS)
        )
        self._confirm_stalled: str | None = None  # why no more are started (one timed out)
        # Failed reports with verdicts whose explanation needs a re-run in another process:
        # (report, all its verdicts, refresh command, those verdicts, their nodeid by key).
        self._to_explain: list[
            tuple[pytest.TestReport, list[Verdict], str, list[Verdict], dict[str, str]]
        ] = []

    # -- gathering -------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Any:
        """Judge a test's results before anyone else sees its report.

        A wrapper runs before every plain implementation, so when a regression turns the report
        into a failure, the session's failure count, -x/--maxfail, xdist, the terminal and
        JUnit all see the failed report.
        """
        payload: dict[str, Any] | None = getattr(report, REPORT_ATTRIBUTE, None)
        if report.when == "call":
            self.nodeids_run.add(report.nodeid)
            # its module ran even when the test recorded nothing (it failed): a benchmark that
            # was selected, ran and produced nothing is missing, whatever else ran beside it
            self.modules_run.add(report.nodeid.split("::", 1)[0])
        if report.failed:
            self.failure_lines.setdefault(report.nodeid, failure_line(report))
        if report.failed and MARKER in report.keywords:
            self.failed_tests.add(
                report.nodeid
            )  # an error in any phase: the reports say failed too
        if report.skipped and MARKER in report.keywords:
            self.skip_reasons.setdefault(report.nodeid, skip_reason(report))
        if report.when == "teardown" and report.nodeid in self._pending_properties:
            report.user_properties = [
                *report.user_properties,
                *self._pending_properties.pop(report.nodeid),
            ]
        if report.when == "call" and payload and payload.get("results"):
            self._judge_report(report, payload)
        return (yield)

    def _accepting(self) -> Acceptance:
        """The run's accepts: ``--bench-accept``, then the ``Bench-Accept:`` trailers of the
        commits since the baseline's (the revision compared with, or a saved set's last commit);
        git is asked once, at the first regression or at the end."""
        if self._acceptance is None:
            since = self._line_changes()
            trailers = (
                changes.trailers_since(since.toplevel, since.commit, TRAILER)
                if since is not None
                else []
            )
            from ..metrics import registry

            specs, problems = from_trailers(trailers, registry.names())
            self._acceptance = Acceptance([*self.settings.accepts, *specs], problems)
        return self._acceptance

    def _line_changes(self) -> changes.ChangedLines | None:
        """Which lines changed since what ``--bench-compare`` names (its git revision, or a saved
        set's last commit; in the re-run for call sites, what its run handed down), for tagging a
        failure's call sites; None where git cannot say."""
        if not self._changes_asked:
            self._changes_asked = True
            compare = self.settings.compare
            rootdir = self.settings.rootdir
            handed = explain.changed_since()
            try:
                if handed is not None:
                    toplevel = git_toplevel(rootdir)
                    self._changes = (
                        changes.ChangedLines(toplevel, *handed, rootdir) if toplevel else None
                    )
                    return self._changes
                revision = self.revision or (
                    compare_revision(compare, self.settings.baselines_dir, Path.cwd())
                    if compare
                    else None
                )
                if revision is not None:
                    self._changes = changes.for_revision(
                        revision.toplevel, revision.commit, revision.revision, rootdir
                    )
                elif compare:
                    folder = next(
                        (
                            f
                            for f in (self.settings.baselines_dir / compare, Path(compare))
                            if f.is_dir()
                        ),
                        None,
                    )
                    self._changes = (
                        changes.for_saved_set(folder, rootdir) if folder is not None else None
                    )
            except (OSError, ValueError):
                self._changes = None
        return self._changes

    def _judge_report(self, report: pytest.TestReport, payload: dict[str, Any]) -> None:
        """Call the gate on this test's results (their marker limits travel with them) and turn
        the report into a failure when a verdict failed; JUnit properties wait for teardown."""
        results = [BenchmarkResult.from_json(r) for r in payload["results"]]
        clashes = self._key_clashes(results)
        results = [r for r in results if r.key not in clashes]
        for result in results:
            self._choose_baseline(result)
        self.results.extend(results)
        self.modules_run.update(r.module for r in results)
        baseline = self.baseline.entries if self.baseline is not None else None
        verdicts: list[Verdict] = []
        elsewhere: list[Verdict] = []
        properties: list[tuple[str, object]] = []
        judged_results = [
            (
                result,
                self._not_judged_at_base(
                    result,
                    gate.judge(
                        result,
                        baseline,
                        self.settings.policy,
                        self._review,
                        self.rounds.get(result.key),
                        self._rounds_unfinished(result.key),
                    ),
                ),
            )
            for result in results
        ]
        self._confirm(report.nodeid, [v for _, judged in judged_results for v in judged])
        if any(v.failed and v.status == REGRESSION for _, judged in judged_results for v in judged):
            judged_results = [
                (result, self._accepting().apply(judged)) for result, judged in judged_results
            ]
        for result, judged in judged_results:
            if self.session is not None and baseline is not None and any(v.failed for v in judged):
                elsewhere += self.session.explain(
                    result,
                    judged,
                    baseline.get(result.key),
                    self.settings.rootdir,
                    self._line_changes(),
                )
            properties.extend(junit.properties(result, judged, qualify=len(results) > 1))
            verdicts.extend(judged)
        self.verdicts.extend(verdicts)
        self._pending_properties[report.nodeid] = properties
        if clashes:
            report.outcome = "failed"
            report.longrepr = "\n".join(
                f"torchbench: {safe_text(key)}: this result key is also the key of a result of "
                f"{safe_text(other)} (a key is the test's id, plus ' [description]' for a named "
                "recording): rename one (its description or its parametrize id); this result was "
                "neither judged nor saved"
                for key, other in clashes.items()
            )
        if any(v.failed for v in verdicts):
            set_name = self.baseline.name if self.baseline is not None else "main"
            refresh = (
                f"pytest {report.nodeid} --bench-mode={','.join(self.settings.modes)} "
                f"--bench-save={set_name}"
            )
            report.outcome = "failed"
            message = failure_message(verdicts, refresh)
            report.longrepr = f"{report.longrepr}\n{message}" if clashes else message
            if elsewhere:
                self._to_explain.append(
                    (report, verdicts, refresh, elsewhere, {r.key: r.nodeid for r in results})
                )

    def _not_judged_at_base(
        self, result: BenchmarkResult, verdicts: list[Verdict]
    ) -> list[Verdict]:
        """A benchmark whose test failed in the base run of REV (a session fixture that only one
        session can hold, a fixed port or a lock, or a test broken at REV) has no baseline, yet is
        not new: its "new" verdicts become "not comparable", saying why, so that the closing block
        names it and CI hears of it (:meth:`_gate_held`) instead of passing it as new."""
        why = self.failed_at_base.get(result.key)
        if why is None:
            return verdicts
        changed = []
        for verdict in verdicts:
            if verdict.status == NEW:  # what a verdict hook made of it (failed, details) is kept
                verdict = dataclasses.replace(
                    verdict,
                    status=NOT_COMPARABLE,
                    summary=f"{verdict.metric}: not judged: {why}",
                    details=[why, *verdict.details],
                    failed=verdict.failed or self.settings.policy.strict_environment,
                )
            elif (
                verdict.status == NOT_COMPARABLE and not verdict.failed
            ):  # a committed entry from elsewhere
                verdict = dataclasses.replace(verdict, details=[*verdict.details, why])
            changed.append(verdict)
        return changed

    def _key_clashes(self, results: list[BenchmarkResult]) -> dict[str, str]:
        """Keys of ``results`` that a result of another test already has: {key: that test's id}.

        Why: a key is a baseline's identity, made of the node id and a description, and two tests
        can spell the same key (``test_f[a]`` with description ``b`` and a test whose id is
        ``test_f[a] [b]``). Kept, one would silently replace the other in the saved set and fail a
        later run falsely; the first test keeps the key, the later one fails, naming both."""
        clashes = {}
        for result in results:
            owner = self._key_owners.setdefault(result.key, result.nodeid)
            if owner != result.nodeid:
                clashes[result.key] = owner
        return clashes

    def _confirm(self, nodeid: str, verdicts: list[Verdict]) -> None:
        """Regressions of metrics that confirm their failures (time) are measured again in a fresh
        process before this test's report is final (``Metric.confirm``); settled in place."""
        from ..metrics import registry

        # A verdict judged on alternated rounds was measured in fresh processes already, paired.
        suspects = [
            v
            for v in verdicts
            if v.failed
            and v.status == REGRESSION
            and getattr(registry.find(v.metric), "confirms_failures", False)
            and v.metric not in self.rounds.get(v.key, {})
        ]
        if not suspects or self.settings.compare is None or explain.in_rerun():
            return
        if self._confirmations >= MAX_CONFIRMATIONS or self._confirm_stalled:
            reason = self._confirm_stalled or (
                f"{MAX_CONFIRMATIONS} slowdowns were re-measured already in this "
                "session: a change that slows this many benchmarks is not noise"
            )
            for verdict in suspects:
                registry.get(verdict.metric).confirm(verdict, None, reason)
            return
        self._confirmations += 1
        found, problem, stalled = explain.confirm(
            self.config.invocation_params.args,
            nodeid,
            suspects,
            self.settings.rootdir,
            self._judging_options(v.key for v in suspects),
            Path(self.config.invocation_params.dir),
            self.config.pluginmanager.hasplugin("xdist"),
            getattr(self.config.option, "file_or_dir", None) or (),
        )
        if (
            stalled
        ):  # a fixture waiting on what this process holds would make each of them wait as long
            self._confirm_stalled = (
                f"earlier in this session {problem} ({safe_text(nodeid)}): no more are started"
            )
        for verdict in suspects:
            registry.get(verdict.metric).confirm(
                verdict, found.get((verdict.key, verdict.metric)), problem
            )

    # -- the base: committed at REV, or measured from REV ----------------------------------------

    def _choose_baseline(self, result: BenchmarkResult) -> None:
        """Decide where ``result``'s baseline comes from (``--bench-base``): the entry committed at
        REV when it is there and comparable with this result, else REV measured in this job (once,
        for the whole selection, at the first result that needs it: :mod:`base`)."""
        if self.revision is None or self.baseline is None or result.key in self.origins:
            return
        committed_words = f"committed at {self.revision.label}"
        why = (
            self._needs_measuring(result)
            if self.settings.base == "auto"
            else "--bench-base=measure"
        )
        if not why:
            if self.committed is not None and result.key in self.committed.entries:
                self.origins[result.key] = committed_words
            return
        if self.measured is None:
            self.measure_reason = why
        measured = self._measure_base()
        entry = measured.entries.get(result.key)
        if entry is not None:
            self.baseline.entries[result.key] = entry
            self.origins[result.key] = measured.origin()
            from ..metrics import registry

            for metric in result.metrics:
                found = registry.find(metric)
                pairs = (
                    measured.pairs(result.key, metric, self.again_passes.get(result.key, 0))
                    if found is not None and found.alternates
                    else []
                )
                if pairs:
                    self.rounds.setdefault(result.key, {})[metric] = pairs
        else:
            if (
                self.settings.base == "auto"
                and self.committed is not None
                and result.key in self.committed.entries
            ):
                self.origins[result.key] = committed_words
            unmeasured = measured.unmeasured.get(result.nodeid)
            if unmeasured is not None:  # not new: its test is at REV and measured nothing there
                self.failed_at_base[result.key] = (
                    f"the base run of {self.revision.label} measured nothing "
                    f"for it: {unmeasured}{measured.failure_log}"
                )

    def _needs_measuring(self, result: BenchmarkResult) -> str:
        """Why the committed entry of ``result`` cannot serve ("" when it can): it is missing (and
        its test file exists at REV: a benchmark new in this change has no base to measure), it
        lacks a metric, or it was measured where the environment facts that decide comparability
        differ (named, so that the run can say why it measured the base)."""
        from ..core.judgement import environment_differences

        entry = self.committed.entries.get(result.key) if self.committed is not None else None
        if entry is None:
            if not self._module_at_revision(result.module):
                return ""
            return (
                "no baselines are committed there"
                if self.committed is None or not self.committed.entries
                else f"{result.key} has no committed entry"
            )
        for metric in result.metrics:
            if metric not in entry.metrics:
                return f"the committed entry of {result.key} has no {metric}"
            differences = environment_differences(
                metric, result.environments.get(metric), entry.environments.get(metric)
            )
            if differences:
                return (
                    f"the committed {metric} baselines are not comparable "
                    f"({'; '.join(differences)})"
                )
        return ""

    def _module_at_revision(self, module: str) -> bool:
        assert self.revision is not None
        if module not in self._exists_at_revision:
            try:
                relative = self.settings.rootdir.resolve().relative_to(
                    self.revision.toplevel.resolve()
                )
            except ValueError:
                self._exists_at_revision[module] = True
            else:
                self._exists_at_revision[module] = exists_at(
                    self.revision.commit, (relative / module).as_posix(), self.revision.toplevel
                )
        return self._exists_at_revision[module]

    def _measure_base(self) -> MeasuredBase:
        """REV measured in this job (or cached), once per session; a base that cannot be measured,
        or was measured from the wrong code, stops the run with one line (exit 4)."""
        if self.measured is not None:
            return self.measured
        assert self.revision is not None and self.baseline is not None
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"torchbench: the base {safe_text(self.revision.label)}: "
                "measuring it in a temporary git worktree (or taking it from the cache)"
                + self._because()
            )
        environment = {}
        if self.session is not None:
            for mode in self.settings.modes:
                environment.update(
                    {f"{mode}.{k}": v for k, v in self.session.environment(mode, 1).facts.items()}
                )
        from ..metrics import registry

        # Metrics the machine moves from minute to minute (time) are measured alternately with
        # the head in rounds; counting modes alone need one run of the base.
        alternate = any(getattr(registry.find(m), "alternates", False) for m in self.settings.modes)
        rounds = self.settings.rounds if alternate else 1
        try:
            base.check_head_imports(
                self.revision.toplevel.resolve(), f"--bench-compare={self.revision.ref}"
            )
            self.measured = base.measure(
                self.revision,
                self.config.invocation_params.args,
                getattr(self.config.option, "file_or_dir", None) or (),
                Path(self.config.invocation_params.dir),
                self.settings.modes,
                environment,
                self.settings.output_dir / "bases"
                if self.settings.output_dir
                else self.settings.rootdir / ".torchbench" / "bases",
                self.settings.base_prepare,
                rounds=rounds,
                undecided=self._undecided_tests,
                progress=ProgressLines(
                    reporter.write_line
                    if reporter is not None and self.config.get_verbosity() >= 0
                    else None
                ),
            )
        except BaseError as exc:
            raise pytest.UsageError(safe_text(exc)) from None  # idempotent on escaped text
        if self.settings.base == "measure":
            self.baseline.entries.clear()  # REV as measured here is the whole baseline
        if self.measured.rounds:
            first_pass, later = self.measured.extra_rounds()
            again = (
                f", then {first_pass} more rounds of the benchmarks those found changed "
                "or could not decide"
                if first_pass
                else ""
            )
            again += f" and {later} more of those still undecided" if later else ""
            order = (
                "each round's base and head at once, in 10 ms turns on one CPU; "
                "base first, then head first, ..."
                if self.measured.in_turns
                else "base, head; head, base; ..."
            )
            how = (
                f"measured alternately with this checkout in {self.measured.rounds_of_all} rounds "
                f"of fresh processes ({order}){again}, in {self.measured.seconds:.1f} s; time is "
                "judged on the fastest call of each side in each round"
            )
        elif self.measured.cached:
            how = f"taken from the cache ({self.measured.folder.parent.parent})"
        elif self.measured.tests_failed:
            how = (
                f"measured in this job in {self.measured.seconds:.1f} s, not cached: "
                f"{self.measured.tests_failed} of its tests failed"
            )
        else:
            how = (
                f"measured in this job in {self.measured.seconds:.1f} s, "
                f"cached in {self.measured.folder.parent.parent}"
            )
        self.notes.append(
            f"the base {self.revision.label}: {how}, "
            f"{len(self.measured.entries.entries)} benchmark result(s){self._because()}"
        )
        return self.measured

    def _because(self) -> str:
        """Why auto mode measured the base rather than use what is committed at REV (escaped:
        test ids and facts come from files)."""
        if self.settings.base != "auto" or not self.measure_reason:
            return ""
        return f"; because {safe_text(self.measure_reason)}"

    def _undecided_tests(self, rounds: list[tuple[BaselineSet, BaselineSet]]) -> list[str]:
        """The tests (node ids, their file relative to the folder pytest was started in) of the
        benchmarks whose alternated rounds did not decide a metric that alternates: any verdict
        but unchanged, judged strictly (unchanged only where both views of the rounds say so), at
        the benchmark's limit as recorded with its result (else the run's). A change is measured
        again too, as a regression against a stored baseline is confirmed in a fresh process:
        four rounds can all be disturbed (docs/design/time-gate.md). After a pass of extra
        rounds (``rounds`` then holds more than the first ones): those of the benchmarks sent
        for every pass so far that all their rounds, judged as the verdict will be, still cannot
        decide (a sibling of theirs in the same test, measured along, is not considered).

        Why relative: both sides run from the same relative folder (the head in the checkout, the
        base in its worktree), and pytest reads a ``[`` in an argument as the start of a
        parameter id, so an absolute path through a folder named with one (``/ci/job[3]/repo``)
        selected nothing."""
        from ..core.judgement import limit_for
        from ..metrics import registry

        passes = max(len(rounds) - self.settings.rounds, 0) // max(self.settings.rounds, 1)
        tests: dict[str, None] = {}
        keys = dict.fromkeys(key for _, head in rounds for key in head.entries)
        for key in keys:
            if self.again_passes.get(key, 0) != passes:  # passed earlier, or only measured along
                continue
            head_entries = [head.entries[key] for _, head in rounds if key in head.entries]
            policy = gate.policy_for(head_entries[-1], self.settings.policy)
            for metric in head_entries[-1].metrics:
                found = registry.find(metric)
                if found is None or not found.alternates:
                    continue
                pairs = base.round_pairs(rounds, key, metric)
                if not pairs:
                    continue
                # judged as the verdict will be: strictly on the first rounds alone (here, or where
                # the pass before added none: ``_rounds_unfinished``), then anything but unchanged
                # is taken; on more rounds, what they cannot decide
                strict = len(pairs) <= self.settings.rounds
                status = found.judge_rounds(
                    key, pairs, limit_for(metric, policy), policy, strict=strict
                ).status
                if (status != UNCHANGED) if strict else (status == TOO_NOISY):
                    self.again_passes[key] = passes + 1
                    path, sep, rest = (head_entries[-1].nodeid or nodeid_of(key)).partition("::")
                    tests[self._test_argument(self.settings.rootdir / path) + sep + rest] = None
        return list(tests)

    def _rounds_unfinished(self, key: str) -> bool:
        """Whether ``key`` was to be measured again and its extra rounds added nothing (the test
        failed or was skipped there): then its first rounds are judged strictly, as they were
        when it was picked, not by the looser rule meant for all its rounds."""
        measured = self.measured
        if measured is None or key not in self.again_passes:
            return False
        return all(
            len(pairs) <= measured.rounds_of_all for pairs in self.rounds.get(key, {}).values()
        )

    def _test_argument(self, path: Path) -> str:
        """``path`` as the extra rounds name it: relative to the folder pytest was started in,
        both resolved, when it lies in the repository (the base runs from the same relative
        folder of its worktree); absolute otherwise (a file outside the repository is not in the
        worktree either: ``base._map_path`` leaves it as is), or where no relative path exists
        (another drive)."""
        try:
            resolved = path.resolve()
            here = Path(self.config.invocation_params.dir).resolve()
            toplevel = self.revision.toplevel.resolve() if self.revision is not None else None
            if (
                toplevel is not None
                and resolved.is_relative_to(toplevel)
                and here.is_relative_to(toplevel)
            ):
                return Path(os.path.relpath(resolved, here)).as_posix()
        except (OSError, ValueError):
            pass
        return str(path)

    def _judging_options(self, keys: Iterable[str]) -> list[str]:
        """The baseline options of a re-run (explain, confirm) of the tests of ``keys``: the
        measured base's folder when all of them were judged against it, else --bench-compare."""
        compare = self.settings.compare or ""
        measured = self.measured
        if measured is not None and all(self.origins.get(k) == measured.origin() for k in keys):
            compare = str(measured.folder)
        options = explain.judging_options(
            compare,
            self.settings.baselines_dir,
            self.config.option.bench_fail,
            self.settings.policy.strict_environment,
        )
        return [*options, "--bench-base=stored"] if self.revision is not None else options

    def _review(
        self, result: BenchmarkResult, verdicts: Any, baseline: BenchmarkResult | None
    ) -> None:
        """The gate's verdict hook: pytest_torchbench_verdict implementations."""
        extensions.review_verdicts(self.config, result, verdicts, baseline)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: a worker reports the test ids it collected, so removed tests can be told apart.

        Optional: xdist defines this hook, and a run with ``-p no:xdist`` (pytest-benchmark's
        advice) or without xdist installed must not fail on it."""
        self.collected.update(getattr(node, "workeroutput", {}).get("torchbench_collected", ()))
        if error == "keyboard-interrupt":
            self.interrupted = True

    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True

    def pytest_sessionstart(self) -> None:
        self._sigint.install()

    def pytest_unconfigure(self) -> None:
        self._sigint.uninstall()
        ignore_in_git(self.settings.output_dir)

    # -- the end ---------------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.baseline is not None:
            narrowed = narrowed_modules(
                self.config.args, self.config.invocation_params.dir, self.config.rootpath
            )
            in_scope = gate.missing_scope(
                self.baseline.entries, self.modules_run, self.nodeids_run, self.collected, narrowed
            )
            self.verdicts.extend(
                gate.missing(in_scope, (r.key for r in self.results), self.settings.modes)
            )
        if self.interrupted or self._sigint.received or exitstatus == pytest.ExitCode.INTERRUPTED:
            if self.settings.save:
                self.notes.append("run interrupted: baselines were not written")
            return
        self._explain_elsewhere()
        if self.baseline is not None and not explain.in_rerun():
            self.notes.extend(self._accepting().closing_lines())
        self._gate_held(session)
        crashed = self.crashed_tests()
        measured = [r for r in self.results if r.metrics]  # a profile alone is no baseline
        if crashed and self.settings.save:
            self.notes.append(
                f"a test process died while running {', '.join(crashed)}: "
                f"baseline set '{self.settings.save}' was not written"
            )
        elif self.settings.save and measured:
            folder = self.settings.baselines_dir / self.settings.save
            try:
                self.saved = save_set(folder, measured, stamp=save_stamp(folder))
            except (BaselineError, OSError) as exc:
                self.notes.append(f"ERROR: baselines not written: {exc}")
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
            else:
                self.saved_as = (
                    f"saved as baseline set '{self.settings.save}' "
                    f"({len(self.saved)} file(s) changed)"
                )
                self.notes.append(
                    f"saved {len(measured)} benchmark result(s) to baseline set "
                    f"'{self.settings.save}' ({folder}; {len(self.saved)} file(s) changed)"
                )
        elif self.settings.save:
            self.notes.append(
                f"no benchmark results: baseline set '{self.settings.save}' left as it was"
            )
        if self.settings.json_path is not None:
            meta = {
                "modes": list(self.settings.modes),
                "compared_with": self._source(),
                "baseline_origins": dict(sorted(self.origins.items()))
                if self.revision is not None
                else None,
                "base_rounds": self.measured.rounds_of_all
                if self.measured is not None and self.measured.rounds
                else None,
                # rounds after those, of the benchmarks they could not decide (0: none was needed)
                "base_rounds_again": len(self.measured.rounds) - self.measured.rounds_of_all
                if self.measured is not None and self.measured.rounds
                else None,
                "saved_as": self.settings.save,
                "failed_tests": sorted(self.failed_tests),
                "failed_test_errors": dict(sorted(self.failure_lines.items())),
                "skipped_tests": dict(sorted(self.skip_reasons.items())),
                "crashed_tests": sorted(self.crashed_tests()),
                # What `torchbench merge` checks across shards and draws their HTML report from.
                "baseline": self.baseline.shown_as if self.baseline is not None else None,
                "policy": {
                    "limits": dict(sorted(self.settings.policy.limits.items())),
                    "strict": self.settings.policy.strict_environment,
                    "fail_stale": self.settings.policy.fail_stale,
                },
                "baseline_entries": shards.baseline_entries_json(
                    self.baseline.entries, [r.key for r in self.results]
                )
                if self.baseline is not None
                else None,
            }
            try:
                jsonreport.write(self.settings.json_path, self.results, self.verdicts, meta)
            except OSError as exc:
                self.notes.append(
                    f"ERROR: --bench-json={self.settings.json_path}: cannot write ({exc})"
                )
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if (
            self.settings.benchmark_json_path is not None
        ):  # pytest-benchmark's format, for its users' CI
            from ..reports import benchmark_json

            try:
                benchmark_json.write(
                    self.settings.benchmark_json_path,
                    self.results,
                    save_stamp(self.settings.benchmark_json_path.parent)["commit"],
                )
            except OSError as exc:
                self.notes.append(
                    f"ERROR: --benchmark-json={self.settings.benchmark_json_path}: "
                    f"cannot write ({exc})"
                )
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
        # Markdown / job summary / HTML, then the users' report hooks: errors are notes only.
        self.notes.extend(
            publish.write_reports(
                self.results,
                self.verdicts,
                self.baseline.entries if self.baseline is not None else None,
                self.baseline.shown_as if self.baseline is not None else None,
                self._source() if self.baseline is not None else self.saved_as,
                self.settings.markdown_path,
                self.settings.html_path,
                markdown.step_summary_path(),
                failed_tests=self.failed_tests,
            )
        )
        # The end-of-session re-run (explain.py) does not call the user's report hooks a second
        # time.
        error = (
            None
            if explain.in_rerun()
            else extensions.report(self.config, self.results, self.verdicts)
        )
        if error:
            self.notes.append(error)

    def _source(self) -> str | None:
        """Where the baselines came from, for every report: the set's source, and with a revision
        how many were committed at it and how many measured from it (or cached)."""
        if self.baseline is None:
            return None
        if self.revision is None:
            return self.baseline.source
        where = f"git {self.revision.label}"
        return f"{where}: {base.describe(self.origins.values()) or 'nothing compared'}"

    def _gate_held(self, session: pytest.Session) -> None:
        """Nothing passes silently: benchmarks whose baseline could not be compared (and had
        nothing measured in its place) are named in one block with the facts that differ; in CI
        the run exits :data:`EXIT_INCOMPARABLE` unless ``--bench-allow-incomparable`` accepts it.
        Benchmarks too noisy to judge at their limit (paired rounds that spread more than it) are
        named the same way and count the same: the gate could not judge them either.

        Why fail CI: a gate whose every comparison is "not comparable" (another runner image,
        another torch build) passes every pull request while people believe they are protected."""
        everything = uncompared(self.verdicts)
        at_base = [v for v in everything if v.key in self.failed_at_base]
        found = [v for v in everything if v.key not in self.failed_at_base]
        noisy = unjudged(self.verdicts)
        if not found and not noisy and not at_base:
            return
        name = self.baseline.shown_as if self.baseline is not None else "?"
        lines = []
        if at_base:
            lines.append(
                f"{len({v.key for v in at_base})} benchmark(s) were compared with nothing: "
                "their test is at the base revision but failed, was skipped or did not run in the "
                "base run:"
            )
            for verdict in sorted(at_base, key=lambda v: (v.key, v.metric)):
                lines.append(
                    f"  {verdict.key} [{verdict.metric}]: "
                    f"{'; '.join(verdict.details) or verdict.summary}"
                )
        if found:
            tests = sorted({v.key for v in found})
            lines.append(
                f"{len(tests)} benchmark(s) were compared with nothing: their baseline in '{name}' "
                "comes from another environment, or was measured under other conditions "
                "(each line says which), and nothing was measured in its place:"
            )
            for verdict in sorted(found, key=lambda v: (v.key, v.metric)):
                lines.append(
                    f"  {verdict.key} [{verdict.metric}]: "
                    f"{'; '.join(verdict.details) or verdict.summary}"
                )
        if noisy:
            lines.append(
                f"{len({v.key for v in noisy})} benchmark(s) could not be judged: "
                "measured alternately with the base, their rounds decide nothing at their limit:"
            )
            for verdict in sorted(noisy, key=lambda v: (v.key, v.metric)):
                lines.append(f"  {verdict.key} [{verdict.metric}]: {verdict.summary}")
        hints = []
        if at_base:
            hints.append(
                "the base runs while this session runs: where the error is a port or a lock that a "
                "session fixture holds, let the fixture take a free port or a lock of its own; "
                "where the test is broken at the base revision, compare with a revision where it "
                "passes"
            )
        if found:
            hints.append(
                "measure the base here with --bench-compare=REV (a git revision) and "
                "--bench-base=auto, or save the baselines on this kind of machine; where a line "
                "above says what to do, do that"
            )
        if noisy:
            hints.append(
                "give the too noisy ones more rounds (--bench-rounds), measure on a quieter "
                "machine, or a limit they can hold (--bench-fail or the marker's limits=; their "
                "lines say what it would let through)"
            )
        git_hint = "; ".join(hints)
        if not in_ci():
            lines.append(f"WARNING: these were not gated; {git_hint}")
        elif self.settings.allow_incomparable:
            lines.append(
                "accepted by --bench-allow-incomparable: the run's exit status is left as it is"
            )
        else:
            lines.append(
                f"ERROR: in CI this fails the run (exit {EXIT_INCOMPARABLE}); {git_hint}, "
                "or accept it with --bench-allow-incomparable"
            )
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = EXIT_INCOMPARABLE
        self.uncompared_block = lines

    def _explain_elsewhere(self) -> None:
        """Failed verdicts of tests that ran in other processes (xdist, instructions mode's
        workers) get their explanation from one serial re-run of those tests (``core/explain.py``);
        their FAILED reports, shown after this, are rewritten with it."""
        pending = [v for *_, elsewhere, _ in self._to_explain for v in elsewhere]
        if not pending or self.settings.compare is None:
            return
        from ..metrics import registry

        nodeids = {key: nodeid for *_, by_key in self._to_explain for key, nodeid in by_key.items()}
        details, problem = explain.rerun_details(
            self.config.invocation_params.args,
            pending,
            self.settings.rootdir,
            self._judging_options(v.key for v in pending),
            Path(self.config.invocation_params.dir),
            self.config.pluginmanager.hasplugin("xdist"),
            nodeids,
            getattr(self.config.option, "file_or_dir", None) or (),
            (lines.commit, lines.label) if (lines := self._line_changes()) is not None else None,
        )
        for report, verdicts, refresh, elsewhere, _ in self._to_explain:
            for verdict in elsewhere:
                found = details.get((verdict.key, verdict.metric))
                if found is not None:
                    verdict.details = found
                else:
                    verdict.details = [
                        *verdict.details,
                        registry.get(verdict.metric).explain_elsewhere(report.nodeid),
                    ]
            report.longrepr = failure_message(verdicts, refresh)
        if problem:
            self.notes.append(problem)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        if self.results or self.verdicts or self.notes:
            terminalreporter.section("torchbench", sep="=")
        name = self.baseline.shown_as if self.baseline is not None else None
        width = terminal_width(terminalreporter)
        only_changed = changes_only(self.config)
        for line in terminal.render_tables(
            self.results, self.verdicts, name, width=min(width, 120), only_changed=only_changed
        ):
            write(line)
        if only_changed and self.results:
            write(terminal.render_counts(self.results, self.verdicts, name))
        shown = [v for v in self.verdicts if v.status != UNCHANGED]
        if self.baseline is not None:
            for line in terminal.render_verdict_lines(shown):
                write(line)
            if not shown and self.results:
                write(
                    f"no changes beyond the limits against baseline '{safe_text(name)}' "
                    f"({safe_text(self._source())})"
                )
            elif self.revision is not None and self.origins:
                write(f"baselines: {safe_text(self._source())}")
        for line in terminal.render_profiles(self.results):
            write(line)
        for line in self.uncompared_block:
            write(
                f"torchbench: {safe_text(line)}",
                red=line.startswith("ERROR"),
                yellow=line.startswith("WARNING"),
            )
        for note in self.notes:
            write(f"torchbench: {safe_text(note)}")  # notes quote files and the re-run's output

    def crashed_tests(self) -> list[str]:
        """Tests whose launched worker died mid-run: a partial run must not become a baseline."""
        from .workers import crashed_tests

        return crashed_tests(self.config)
