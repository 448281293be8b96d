"""The gathering side of a run: the process that owns the terminal (serial run or xdist controller).

Test processes attach their results and verdicts to the call-phase TestReport
(``report.torchbench``), which pytest and xdist already carry between processes; this plugin
collects them in ``pytest_runtest_logreport`` and, once, at the end of the session writes
baselines, the JSON report and the terminal table. Baselines are written once, by this process
only.

Where a baseline comes from is its :class:`~.baseline_source.BaselineSource`'s to say, and the
child pytest runs after a test was judged are its :class:`~.children.ChildRuns`' (as xdist's
``DSession`` hands scheduling to its scheduling object); what the run ended with travels to every
report as one :class:`~pytest_torchbench.reports.publish.RunOutcome`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..common.text import safe_text
from ..common.vocabulary import IMPROVEMENT, REGRESSION, Verdict
from ..judging import gate
from ..judging.accept import TRAILER, Acceptance, from_trailers
from ..judging.judgement import failure_message
from ..judging.results import BenchmarkResult
from ..reports import junit, markdown, publish
from ..reports.publish import RunOutcome
from ..store import changes
from ..store.refs import Revision
from ..store.storage import BaselineSet
from . import children, extensions, session_end
from .baseline_source import BaselineSource
from .children import ChildRuns, ToExplain, invocation_of, still_failed
from .closing import closing_block
from .marker import MARKER_NAME as MARKER
from .options import EXIT_INCOMPARABLE, BenchSettings
from .session import BRIEF_SHARE, BenchSession
from .session_facts import (
    InterruptWatch,
    changes_only,
    failure_line,
    ignore_in_git,
    narrowed_modules,
    skip_reason,
)

REPORT_ATTRIBUTE = "torchbench"


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
        self.notes: list[str] = []
        #: Where each benchmark's baseline comes from: asked, never decided here.
        self.source = BaselineSource(config, settings, baseline, session, revision, self.notes)
        self.children = ChildRuns(invocation_of(config, settings), self.source)
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
        self._acceptance: Acceptance | None = None
        #: The block that ends the run when benchmarks were compared with nothing (``closing``).
        self.uncompared_block: list[str] = []
        #: What the run ended with, built once at its end for every report.
        self.outcome: RunOutcome | None = None
        self.interrupted = False
        self._sigint = InterruptWatch()  # a Ctrl-C that escapes pytest's handling still counts
        self._pending_properties: dict[str, list[tuple[str, object]]] = {}  # JUnit, per test

    @property
    def baseline(self) -> BaselineSet | None:
        return self.source.baseline

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
            self.failed_tests.add(report.nodeid)  # an error in any phase: the reports say failed
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
            since = self.source.changed_lines()
            trailers = (
                changes.trailers_since(since.toplevel, since.commit, TRAILER)
                if since is not None
                else []
            )
            from ..metrics import registry

            specs, problems = from_trailers(trailers, registry.names())
            self._acceptance = Acceptance([*self.settings.accepts, *specs], problems)
        return self._acceptance

    def _gate_verdicts(self, result: BenchmarkResult) -> list[Verdict]:
        """The gate's verdicts on ``result`` against the run's baselines (the user's hook comes
        last, in _judge_report)."""
        return self.source.not_judged_at_base(
            result,
            gate.judge(
                result,
                self.source.entries,
                self.settings.policy,
                None,
                self.source.rounds.get(result.key),
                self.source.rounds_unfinished(result.key),
            ),
        )

    def _rechecked(self, result: BenchmarkResult, judged: list[Verdict]) -> bool:
        """Whether ``result`` failed against an entry committed at REV (a regression, or an
        improvement with ``--bench-fail-stale``) that the run's accepts do not accept, and now
        has REV as measured here instead (``BaselineSource.recheck``)."""
        changed = [v for v in judged if v.failed and v.status in (REGRESSION, IMPROVEMENT)]
        if not changed or not any(v.failed for v in self._accepting().apply(changed)):
            return False  # nothing failed, or accepted either way: nothing to measure for it
        return self.source.recheck(result)

    def _judged(
        self, nodeid: str, results: list[BenchmarkResult]
    ) -> list[tuple[BenchmarkResult, list[Verdict]]]:
        """Each result with its verdicts: the gate's, settled by a confirmation and accepted by
        the run's accepts (``--bench-accept``, ``Bench-Accept:`` trailers); the user's hook has
        not seen them yet."""
        judged_results = [(result, self._gate_verdicts(result)) for result in results]
        judged_results = [
            (result, self._gate_verdicts(result) if self._rechecked(result, judged) else judged)
            for result, judged in judged_results
        ]
        settled = self.children.confirm(nodeid, [v for _, j in judged_results for v in j])
        judged_results = [
            (result, [settled.get((v.key, v.metric), v) for v in judged])
            for result, judged in judged_results
        ]
        if any(v.failed and v.status == REGRESSION for _, judged in judged_results for v in judged):
            judged_results = [
                (result, self._accepting().apply(judged)) for result, judged in judged_results
            ]
        return judged_results

    def _judge_report(self, report: pytest.TestReport, payload: dict[str, Any]) -> None:
        """Call the gate on this test's results (their marker limits travel with them) and turn
        the report into a failure when a verdict failed; JUnit properties wait for teardown."""
        results = [BenchmarkResult.from_json(r) for r in payload["results"]]
        clashes = self._key_clashes(results)
        results = [r for r in results if r.key not in clashes]
        for result in results:
            self.source.choose(result)
        if self.session is not None and self.source.judges_on_rounds_only():
            # its own time figures are replaced by the rounds' head's: running the test is enough
            self.session.share = BRIEF_SHARE
            results = [self.source.head_measured(result) for result in results]
        self.results.extend(results)
        self.modules_run.update(r.module for r in results)
        baseline = self.source.entries
        verdicts: list[Verdict] = []
        elsewhere: list[Verdict] = []
        judged_details: dict[tuple[str, str], tuple[str, ...]] = {}
        properties: list[tuple[str, object]] = []
        for result, judged in self._judged(report.nodeid, results):
            if self.session is not None and baseline is not None and any(v.failed for v in judged):
                judged, unexplained = self.session.explain(
                    result,
                    judged,
                    baseline.get(result.key),
                    self.settings.rootdir,
                    self.source.changed_lines(),
                )
            else:
                unexplained = []
            # The user's hook last, so it sees (and keeps) the verdict every other step settled.
            judged = self._review(result, judged, baseline.get(result.key) if baseline else None)
            elsewhere += still_failed(unexplained, judged, judged_details)
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
                self.children.to_explain.append(
                    ToExplain(
                        report=report,
                        verdicts=tuple(verdicts),
                        refresh=refresh,
                        elsewhere=tuple(elsewhere),
                        judged_details=judged_details,
                        nodeids={r.key: r.nodeid for r in results},
                    )
                )

    def _key_clashes(self, results: list[BenchmarkResult]) -> dict[str, str]:
        """Keys of ``results`` that a result of another test already has: {key: that test's id}.
        Why: two tests can spell the same key (``test_f[a]`` with description ``b``, and a test
        whose id is ``test_f[a] [b]``); kept, one would silently replace the other's baseline."""
        clashes = {}
        for result in results:
            owner = self._key_owners.setdefault(result.key, result.nodeid)
            if owner != result.nodeid:
                clashes[result.key] = owner
        return clashes

    def _review(
        self, result: BenchmarkResult, verdicts: Any, baseline: BenchmarkResult | None
    ) -> list[Verdict]:
        """pytest_torchbench_verdict implementations; none in a re-run: its parent applies them."""
        if children.in_rerun():
            return list(verdicts)
        return extensions.review_verdicts(self.config, result, verdicts, baseline)

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
        self._add_missing()
        if self.interrupted or self._sigint.received or exitstatus == pytest.ExitCode.INTERRUPTED:
            if self.settings.save:
                self.notes.append("run interrupted: baselines were not written")
            return
        self._settle(session)
        crashed = self.crashed_tests()
        saved = session_end.save(self.settings, self.results, crashed)
        self._apply(session, saved)
        if saved.saved_as is not None:
            self.saved, self.saved_as = list(saved.saved), saved.saved_as
        self.outcome = self._outcome()
        self._write_reports(session, self.outcome, crashed)

    def _add_missing(self) -> None:
        """Verdicts for the baselines in scope that no result of this run answered."""
        if self.baseline is None:
            return
        narrowed = narrowed_modules(
            self.config.args, self.config.invocation_params.dir, self.config.rootpath
        )
        in_scope = gate.missing_scope(
            self.baseline.entries, self.modules_run, self.nodeids_run, self.collected, narrowed
        )
        self.verdicts.extend(
            gate.missing(in_scope, (r.key for r in self.results), self.settings.modes)
        )

    def _settle(self, session: pytest.Session) -> None:
        """The verdicts' last words: the explanations of failures measured elsewhere, what the
        run's accepts did, and the closing block of what was not gated."""
        amended, problem = self.children.explain_elsewhere()
        if amended:
            self.verdicts = [amended.get((v.key, v.metric), v) for v in self.verdicts]
        if problem:
            self.notes.append(problem)
        if self.baseline is not None and not children.in_rerun():
            self.notes.extend(self._accepting().closing_lines())
        self._gate_held(session)

    def _write_reports(
        self, session: pytest.Session, outcome: RunOutcome, crashed: list[str]
    ) -> None:
        """Every report of ``outcome`` that was asked for: the JSON reports, Markdown, the job
        summary, HTML, then the users' report hooks (their errors are notes only)."""
        if self.settings.json_path is not None:
            meta = session_end.json_meta(
                self.settings, outcome, self.source, self.failure_lines, self.skip_reasons, crashed
            )
            self._apply(session, session_end.write_json(self.settings.json_path, outcome, meta))
        if self.settings.benchmark_json_path is not None:
            path = self.settings.benchmark_json_path
            self._apply(session, session_end.write_benchmark_json(path, outcome.results))
        targets = publish.ReportTargets(
            self.settings.markdown_path, self.settings.html_path, markdown.step_summary_path()
        )
        self._apply(session, session_end.write_reports(outcome, targets))
        # The end-of-session re-run (children.py) does not call the user's report hooks again.
        if not children.in_rerun():
            error = extensions.report(self.config, outcome.results, outcome.verdicts)
            if error:
                self.notes.append(error)

    def _outcome(self) -> RunOutcome:
        """What the run ended with, as every report shows it."""
        baseline = self.baseline
        return RunOutcome(
            self.results,
            self.verdicts,
            baseline_entries=baseline.entries if baseline is not None else None,
            baseline_name=baseline.shown_as if baseline is not None else None,
            baseline_source=self.source.describe() if baseline is not None else self.saved_as,
            failed_tests=self.failed_tests,
        )

    def _gate_held(self, session: pytest.Session) -> None:
        """Nothing passes silently (``closing.py``): in CI a block of benchmarks compared with
        nothing, or too noisy to judge, fails a run that would pass."""
        block = closing_block(
            self.verdicts,
            self.source.failed_at_base,
            self.baseline.shown_as if self.baseline is not None else "?",
            self.settings.allow_incomparable,
        )
        if block.fails_run and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = EXIT_INCOMPARABLE
        self.uncompared_block = list(block.lines)

    def _apply(self, session: pytest.Session, written: session_end.Written) -> None:
        """A step's notes, in order; a file asked for that could not be written is a usage
        error."""
        self.notes.extend(written.notes)
        if written.failed:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        session_end.write_summary(
            terminalreporter,
            self.outcome or self._outcome(),
            self.source,
            self.uncompared_block,
            self.notes,
            only_changed=changes_only(self.config),
        )

    def crashed_tests(self) -> list[str]:
        """Tests whose launched worker died mid-run: a partial run must not become a baseline."""
        from .workers import crashed_tests

        return crashed_tests(self.config)
