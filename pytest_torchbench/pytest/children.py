"""The child pytest runs the controller starts after a test was judged: the confirmation of a
slowdown in a fresh process (at once, before the test's report is final) and the re-run that
explains failures measured in other processes (once, at the end of the session). How a child is
started and read is ``judging/explain.py``; the base measured from a revision is ``base.py``. All
three are given the same :class:`~pytest_torchbench.judging.explain.Invocation`
(:func:`invocation_of`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..common.text import safe_text
from ..common.vocabulary import REGRESSION, Verdict
from ..judging import explain
from ..judging.explain import Invocation
from ..judging.judgement import failure_message
from ..metrics.explaining import Explaining
from .options import BenchSettings

if TYPE_CHECKING:
    from .baseline_source import BaselineSource

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
        if not suspects or self.source.settings.compare is None or explain.in_rerun():
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
        found, problem, stalled = explain.confirm(
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
        (``judging/explain.py``); their FAILED reports, shown after this, are rewritten with it.
        The amended verdicts by (key, metric), and one line when the re-run gave less."""
        pending = [v for waiting in self.to_explain for v in waiting.elsewhere]
        if not pending or self.source.settings.compare is None:
            return {}, None
        from ..metrics import registry

        nodeids = {key: nodeid for w in self.to_explain for key, nodeid in w.nodeids.items()}
        lines = self.source.changed_lines()
        details, problem = explain.rerun_details(
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
                amended[(verdict.key, verdict.metric)] = (
                    verdict.replace(details=found)
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
