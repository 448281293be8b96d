"""Where a run's baselines come from: a saved set, the entries committed at a revision, or that
revision measured in this job (or taken from the cache), benchmark by benchmark.

The controller asks this object, as xdist's ``DSession`` asks its scheduling object: which
baseline a result is judged against (:meth:`BaselineSource.choose`, then :attr:`entries`), the
alternated rounds it is judged on (:attr:`rounds`), why a benchmark was not judged at the base
(:meth:`not_judged_at_base`), the options that make a child pytest judge alike
(:meth:`judging_options`), and how to name the source in every report (:meth:`describe`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from ..common.text import safe_text
from ..common.vocabulary import NEW, NOT_COMPARABLE, TOO_NOISY, UNCHANGED, Verdict
from ..judging import gate
from ..judging.results import BenchmarkResult, nodeid_of
from ..metrics.judge import Judging
from ..metrics.time_gate import measured_in_turns
from ..store import changes
from ..store.refs import Revision, compare_revision, exists_at, git_toplevel
from ..store.storage import BaselineSet
from . import base, children
from .base import BaseError, BaseRequest, MeasuredBase
from .children import invocation_of
from .options import BenchSettings
from .progress import ProgressLines
from .session import BenchSession
from .workers import runs_tests_in_workers


class BaselineSource:
    """The baselines a run judges against, and where each came from (``--bench-compare``,
    ``--bench-base``)."""

    def __init__(
        self,
        config: pytest.Config,
        settings: BenchSettings,
        baseline: BaselineSet | None,
        session: BenchSession | None,
        revision: Revision | None,
        notes: list[str],
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
        #: The measuring side of this process: the environment facts the base is cached under.
        self.session = session
        #: The run's notes, shared with the controller: a measured base says how, in order.
        self.notes = notes
        self.measured: MeasuredBase | None = None
        #: Why the base was measured in this job (auto mode: the first committed entry that could
        #: not serve, or the first result that failed against its committed entry).
        self.measure_reason = ""
        #: Why REV could not be measured to judge again a result that failed against its
        #: committed entry (``recheck``): not tried again in this session.
        self.recheck_problem = ""
        #: Where each judged benchmark's baseline came from (key -> words), with a revision only.
        self.origins: dict[str, str] = {}
        self._exists_at_revision: dict[str, bool] = {}
        #: Per benchmark key, per metric that alternates: the (base, head) values of the rounds
        #: measured alternately (``--bench-rounds``), judged instead of one run against one.
        self.rounds: dict[str, dict[str, list[tuple[Any, Any]]]] = {}
        #: Benchmarks sent to be measured again (:meth:`undecided_tests`): key -> how many passes
        #: of extra rounds were for it. A benchmark is judged on its first rounds and those passes
        #: only: a sibling sharing its test (several recordings in one test) runs in a pass made
        #: for another and must not be judged on rounds it was not sent for.
        self.again_passes: dict[str, int] = {}
        #: Benchmarks with no baseline because their test failed in the base run of REV
        #: (key -> why): not new, but not judged (:meth:`not_judged_at_base`).
        self.failed_at_base: dict[str, str] = {}
        #: The lines edited since the baseline's revision (asked of git at the first failure).
        self._changes: changes.ChangedLines | None = None
        self._changes_asked = False

    @property
    def entries(self) -> dict[str, BenchmarkResult] | None:
        """The entries judged against, by key; None when nothing is compared."""
        return self.baseline.entries if self.baseline is not None else None

    def describe(self) -> str | None:
        """Where the baselines came from, for every report: the set's source, and with a revision
        how many were committed at it and how many measured from it (or cached)."""
        if self.baseline is None:
            return None
        if self.revision is None:
            return self.baseline.source
        where = f"git {self.revision.label}"
        return f"{where}: {base.describe(self.origins.values()) or 'nothing compared'}"

    # -- which baseline a result gets ------------------------------------------------------------

    def choose(self, result: BenchmarkResult) -> None:
        """Decide where ``result``'s baseline comes from (``--bench-base``): the entry committed at
        REV when it is there and comparable with this result, else REV measured in this job (once,
        for the whole selection, at the first result that needs it: :mod:`base`)."""
        if self.revision is None or self.baseline is None or result.key in self.origins:
            return
        committed_words = self._committed_words()
        why = (
            self.needs_measuring(result) if self.settings.base == "auto" else "--bench-base=measure"
        )
        if not why:
            if self.committed is not None and result.key in self.committed.entries:
                self.origins[result.key] = committed_words
            return
        if self.measured is None:
            self.measure_reason = why
        measured = self.measure()
        if self._take_measured(result, measured):
            return
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

    def _committed_words(self) -> str:
        """The origin of an entry judged as committed at REV (``origins``)."""
        assert self.revision is not None
        return f"committed at {self.revision.label}"

    def _take_measured(self, result: BenchmarkResult, measured: MeasuredBase) -> bool:
        """Judge ``result`` against REV as measured here, where that measured it; whether it did."""
        assert self.baseline is not None
        entry = measured.entries.get(result.key)
        if entry is None:
            return False
        self.baseline.entries[result.key] = entry
        self.origins[result.key] = measured.origin()
        self._take_rounds(result, measured)
        return True

    def recheck(self, result: BenchmarkResult) -> bool:
        """In auto mode, take REV measured in this job for ``result``, which failed against the
        entry committed at REV; whether its baseline changed. Why: a committed set can predate
        REV's last change (its record job not run yet, or failed), and only REV measured says
        what REV's code does; a passing benchmark keeps its committed entry, so the base is
        measured only on a red run. A base that cannot be measured, or measured nothing for it,
        leaves the committed entry, said in a note."""
        if (
            self.revision is None
            or self.settings.base != "auto"
            or self.recheck_problem
            or self.origins.get(result.key) != self._committed_words()
        ):
            return False
        label = self.revision.label
        if self.measured is None:
            self.measure_reason = (
                f"{result.key} failed against its committed baseline, which may predate the "
                f"code of {label}"
            )
        try:
            measured = self.measure()
        except pytest.UsageError as exc:
            self.measure_reason = ""
            self.recheck_problem = str(exc)
            self.notes.append(
                f"the base {label} could not be measured here to judge again what failed "
                f"against its committed baselines, so those stand: {exc}"
            )
            return False
        key = safe_text(result.key)
        if not self._take_measured(result, measured):
            self.notes.append(
                f"{key}: the base run of {label} measured nothing for it, so it is judged "
                "against its committed entry"
            )
            return False
        self.notes.append(
            f"{key}: judged against {label} measured here: it failed against its entry "
            f"committed there (a set committed before {label}'s code last changed: re-record it)"
        )
        return True

    def _take_rounds(self, result: BenchmarkResult, measured: MeasuredBase) -> None:
        """The alternated rounds of ``result``'s metrics that alternate, judged instead of one
        run against one."""
        from ..metrics import registry

        for metric in result.metrics:
            found = registry.find(metric, Judging)
            pairs = (
                measured.pairs(result.key, metric, self.again_passes.get(result.key, 0))
                if found is not None and found.alternates
                else []
            )
            if pairs:
                self.rounds.setdefault(result.key, {})[metric] = pairs

    def head_measured(self, result: BenchmarkResult) -> BenchmarkResult:
        """``result`` with the values of its metrics that alternate taken from the head of the
        first round that measured it on both sides (of the first head round that measured it,
        for a benchmark new in this checkout), where the base was measured in rounds: the figures
        its verdict pairs, not this session's, which measured briefly (called only then:
        ``judges_on_rounds_only`` and no ``--bench-save``)."""
        from ..metrics import registry

        measured = self.measured
        if measured is None or not measured.rounds:
            return result
        taken = {}
        for metric in result.metrics:
            found = registry.find(metric, Judging)
            if found is None or not found.alternates:
                continue
            # the head of the first round with both sides; of a benchmark new here, its first head
            pairs = base.round_pairs(measured.rounds, result.key, metric)
            heads = (
                h.entries[result.key].metrics for _, h in measured.rounds if result.key in h.entries
            )
            head = pairs[0][1] if pairs else next((m[metric] for m in heads if metric in m), None)
            if head is not None:
                taken[metric] = head
        return dataclasses.replace(result, metrics={**result.metrics, **taken}) if taken else result

    def judges_on_rounds_only(self) -> bool:
        """Whether every benchmark of this run is judged on alternated rounds (or is new), so
        that this session's own time figures serve nothing and may be brief: the base was
        measured in rounds, no committed entry can serve instead (``--bench-base=measure``, or
        nothing committed at REV), and nothing is saved (``--bench-save`` keeps this session's
        own figures, measured as a plain run measures them)."""
        measured = self.measured
        return (
            measured is not None
            and bool(measured.rounds)
            and not self.settings.save
            and (
                self.settings.base == "measure"
                or self.committed is None
                or not self.committed.entries
            )
        )

    def needs_measuring(self, result: BenchmarkResult) -> str:
        """Why the committed entry of ``result`` cannot serve ("" when it can): it is missing (and
        its test file exists at REV: a benchmark new in this change has no base to measure), it
        lacks a metric, or it was measured where the environment facts that decide comparability
        differ (named, so that the run can say why it measured the base)."""
        from ..judging.judgement import environment_differences

        entry = self.committed.entries.get(result.key) if self.committed is not None else None
        if entry is None:
            if not self.module_at_revision(result.module):
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

    def module_at_revision(self, module: str) -> bool:
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

    def not_judged_at_base(self, result: BenchmarkResult, verdicts: list[Verdict]) -> list[Verdict]:
        """A benchmark whose test failed in the base run of REV (a session fixture that only one
        session can hold, a fixed port or a lock, or a test broken at REV) has no baseline, yet is
        not new: its "new" verdicts become "not comparable", saying why, so that the closing block
        names it and CI hears of it (``closing.py``) instead of passing it as new."""
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
            elif verdict.status == NOT_COMPARABLE and not verdict.failed:  # committed elsewhere
                verdict = dataclasses.replace(verdict, details=[*verdict.details, why])
            changed.append(verdict)
        return changed

    # -- the base measured from REV --------------------------------------------------------------

    def measure(self) -> MeasuredBase:
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
                + self.because()
            )
        request = self._request()
        try:
            base.check_head_imports(
                self.revision.toplevel.resolve(), f"--bench-compare={self.revision.ref}"
            )
            self.measured = base.measure(
                request,
                invocation_of(self.config, self.settings),
                undecided=self.undecided_tests,
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
        self.notes.append(
            f"the base {self.revision.label}: {_how(self.measured)}, "
            f"{len(self.measured.entries.entries)} benchmark result(s){self.because()}"
        )
        return self.measured

    def _request(self) -> BaseRequest:
        """What the base measurement is asked for: REV, the modes and their environment facts,
        the cache, the build step, and how many alternated rounds."""
        assert self.revision is not None
        environment = {}
        if self.session is not None:
            for mode in self.settings.modes:
                facts = self.session.environment(mode, 1).facts
                environment.update({f"{mode}.{k}": v for k, v in facts.items()})
        from ..metrics import registry

        # Metrics the machine moves from minute to minute (time) are measured alternately with
        # the head in rounds; counting modes alone need one run of the base.
        alternate = any(
            getattr(registry.find(m, Judging), "alternates", False) for m in self.settings.modes
        )
        return BaseRequest(
            revision=self.revision,
            modes=tuple(self.settings.modes),
            environment=environment,
            cache_root=self.settings.output_dir / "bases"
            if self.settings.output_dir
            else self.settings.rootdir / ".torchbench" / "bases",
            prepare=self.settings.base_prepare,
            rounds=self.settings.rounds if alternate else 1,
            in_workers=runs_tests_in_workers(self.config),
        )

    def because(self) -> str:
        """Why auto mode measured the base rather than use what is committed at REV (escaped:
        test ids and facts come from files)."""
        if self.settings.base != "auto" or not self.measure_reason:
            return ""
        return f"; because {safe_text(self.measure_reason)}"

    def undecided_tests(
        self, rounds: list[tuple[BaselineSet, BaselineSet]], at_once: bool = False
    ) -> list[str]:
        """The tests (node ids, their file relative to the folder pytest was started in) of the
        benchmarks whose alternated rounds did not decide a metric that alternates. ``at_once``
        (the rounds of the whole selection, fewer than the first rounds asked for): any verdict
        but unchanged at ``base.AT_ONCE`` of the limit, judged strictly, or rounds not measured in
        turns; those tests alone get the rest of the first rounds. Otherwise: any verdict
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
        from ..judging.judgement import limit_for
        from ..metrics import registry

        def argument(result: BenchmarkResult, key: str) -> str:
            path, sep, rest = (result.nodeid or nodeid_of(key)).partition("::")
            return self.test_argument(self.settings.rootdir / path) + sep + rest

        in_turns = base.first_in_turns(rounds, self.settings.rounds)
        size = base.pass_rounds(self.settings.rounds, in_turns)
        passes = max(len(rounds) - self.settings.rounds, 0) // size
        tests: dict[str, None] = {}
        keys = dict.fromkeys(key for _, head in rounds for key in head.entries)
        for key in keys:
            if self.again_passes.get(key, 0) != passes:  # passed earlier, or only measured along
                continue
            head_entries = [head.entries[key] for _, head in rounds if key in head.entries]
            policy = gate.policy_for(head_entries[-1], self.settings.policy)
            for metric in head_entries[-1].metrics:
                found = registry.find(metric, Judging)
                if found is None or not found.alternates:
                    continue
                pairs = base.round_pairs(rounds, key, metric)
                if not pairs:
                    continue
                if at_once and len(pairs) < base.at_once_rounds(self.settings.rounds):
                    # a round it failed in: one pair has no other to agree with
                    tests[argument(head_entries[-1], key)] = None
                    continue
                # judged as the verdict will be: strictly on the first rounds alone (here, or where
                # the pass before added none: ``rounds_unfinished``), then anything but unchanged
                # is taken; on more rounds, what they cannot decide
                strict = at_once or len(pairs) <= self.settings.rounds
                limit = limit_for(metric, policy) * (base.AT_ONCE if at_once else 1.0)
                verdict = found.judge_rounds(key, pairs, limit, policy, strict=strict)
                status = verdict.status
                if at_once and (not measured_in_turns(pairs) or verdict.limit != limit):
                    # apart, rounds do not share the machine's moments; and at once, unchanged
                    # means at 70% of the limit, never at an own limit
                    status = TOO_NOISY
                if (status != UNCHANGED) if strict else (status == TOO_NOISY):
                    if not at_once:  # the first rounds completed are no pass of extra rounds
                        self.again_passes[key] = passes + 1
                    tests[argument(head_entries[-1], key)] = None
        return list(tests)

    def rounds_unfinished(self, key: str) -> bool:
        """Whether ``key`` was to be measured again and its extra rounds added nothing (the test
        failed or was skipped there): then its first rounds are judged strictly, as they were
        when it was picked, not by the looser rule meant for all its rounds."""
        measured = self.measured
        if measured is None or key not in self.again_passes:
            return False
        return all(
            len(pairs) <= measured.first_rounds for pairs in self.rounds.get(key, {}).values()
        )

    def test_argument(self, path: Path) -> str:
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

    # -- what a child pytest and a failure's call sites are told ---------------------------------

    def judging_options(self, keys: Iterable[str]) -> list[str]:
        """The baseline options of a re-run (explain, confirm) of the tests of ``keys``: the
        measured base's folder when all of them were judged against it, else --bench-compare."""
        compare = self.settings.compare or ""
        measured = self.measured
        if measured is not None and all(self.origins.get(k) == measured.origin() for k in keys):
            compare = str(measured.folder)
        options = children.judging_options(
            compare,
            self.settings.baselines_dir,
            self.config.option.bench_fail,
            self.settings.policy.strict_environment,
        )
        return [*options, "--bench-base=stored"] if self.revision is not None else options

    def changed_lines(self) -> changes.ChangedLines | None:
        """Which lines changed since what ``--bench-compare`` names (its git revision, or a saved
        set's last commit; in the re-run for call sites, what its run handed down), for tagging a
        failure's call sites; None where git cannot say. Asked of git once."""
        if not self._changes_asked:
            self._changes_asked = True
            try:
                self._changes = self._ask_changed_lines()
            except (OSError, ValueError):
                self._changes = None
        return self._changes

    def _ask_changed_lines(self) -> changes.ChangedLines | None:
        compare = self.settings.compare
        rootdir = self.settings.rootdir
        handed = children.changed_since()
        if handed is not None:
            toplevel = git_toplevel(rootdir)
            return changes.ChangedLines(toplevel, *handed, rootdir) if toplevel else None
        revision = self.revision or (
            compare_revision(compare, self.settings.baselines_dir, Path.cwd()) if compare else None
        )
        if revision is not None:
            return changes.for_revision(
                revision.toplevel, revision.commit, revision.revision, rootdir
            )
        if not compare:
            return None
        folder = next(
            (f for f in (self.settings.baselines_dir / compare, Path(compare)) if f.is_dir()),
            None,
        )
        return changes.for_saved_set(folder, rootdir) if folder is not None else None


def _how(measured: MeasuredBase) -> str:
    """How the base was measured, for its note: alternately in rounds, from the cache, or once."""
    if measured.rounds:
        first_pass, later = measured.extra_rounds()
        completing = measured.completing_rounds()
        again = (
            f", {completing} more of the benchmarks those did not call unchanged at once"
            if completing
            else ""
        )
        again += (
            f", then {first_pass} more rounds of the benchmarks those found changed "
            "or could not decide"
            if first_pass
            else ""
        )
        again += f" and {later} more of those still undecided" if later else ""
        at_once = (
            f", {measured.pairs_at_once} rounds at a time, each on a CPU of its own"
            if measured.pairs_at_once > 1
            else ""
        )
        order = (
            f"each round's base and head at once, in 10 ms turns on one CPU{at_once}; "
            "base first, then head first, ..."
            if measured.in_turns
            else "base, head; head, base; ..."
        )
        return (
            f"measured alternately with this checkout in {measured.rounds_at_once} rounds "
            f"of fresh processes ({order}){again}, in {measured.seconds:.1f} s; time is "
            "judged on the fastest call of each side in each round"
        )
    if measured.cached:
        return f"taken from the cache ({measured.folder.parent.parent})"
    if measured.tests_failed:
        return (
            f"measured in this job in {measured.seconds:.1f} s, not cached: "
            f"{measured.tests_failed} of its tests failed"
        )
    return (
        f"measured in this job in {measured.seconds:.1f} s, "
        f"cached in {measured.folder.parent.parent}"
    )
