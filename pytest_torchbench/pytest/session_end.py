"""What the end of a session writes: the baseline set (``--bench-save``), the JSON report
(``--bench-json``), pytest-benchmark's (``--benchmark-json``), the Markdown and HTML reports and
the job summary (``reports.publish``), and the run's section of the terminal summary.

Each step answers with a :class:`Written`: the notes for the terminal and whether a file that was
asked for could not be written (the run then exits with a usage error), so that the controller
applies them in order and no step reaches into the session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..common.compat import terminal_width
from ..common.text import safe_text
from ..common.vocabulary import UNCHANGED
from ..judging.results import BenchmarkResult
from ..reports import jsonreport, publish, shards, terminal
from ..reports.publish import RunOutcome
from ..store.refs import save_stamp
from ..store.storage import BaselineError, save_set
from .baseline_source import BaselineSource
from .options import BenchSettings


@dataclasses.dataclass(frozen=True)
class Written:
    """What a step wrote: notes for the terminal, whether a file asked for could not be written,
    and for a save, the files it changed and how the reports name it."""

    notes: tuple[str, ...] = ()
    failed: bool = False
    saved: tuple[Path, ...] = ()
    saved_as: str | None = None


def save(
    settings: BenchSettings, results: Sequence[BenchmarkResult], crashed: Sequence[str]
) -> Written:
    """``--bench-save``: the measured results as a baseline set, unless a test process died
    (``crashed``: a partial run must not become a baseline)."""
    name = settings.save
    measured = [r for r in results if r.metrics]  # a profile alone is no baseline
    if crashed and name:
        return Written(
            (
                f"a test process died while running {', '.join(crashed)}: "
                f"baseline set '{name}' was not written",
            )
        )
    if name and measured:
        folder = settings.baselines_dir / name
        try:
            saved = save_set(folder, measured, stamp=save_stamp(folder))
        except (BaselineError, OSError) as exc:
            return Written((f"ERROR: baselines not written: {exc}",), failed=True)
        return Written(
            (
                f"saved {len(measured)} benchmark result(s) to baseline set "
                f"'{name}' ({folder}; {len(saved)} file(s) changed)",
            ),
            saved=tuple(saved),
            saved_as=f"saved as baseline set '{name}' ({len(saved)} file(s) changed)",
        )
    if name:
        return Written((f"no benchmark results: baseline set '{name}' left as it was",))
    return Written()


def json_meta(
    settings: BenchSettings,
    outcome: RunOutcome,
    source: BaselineSource,
    failure_lines: Mapping[str, str],
    skip_reasons: Mapping[str, str],
    crashed: Sequence[str],
) -> dict[str, Any]:
    """``--bench-json``'s facts beside the results and verdicts: what was compared and how, the
    tests that failed, were skipped or crashed, and what `torchbench merge` checks across shards
    and draws their HTML report from."""
    measured = source.measured
    rounds = measured.first_rounds if measured is not None and measured.rounds else None
    return {
        "modes": list(settings.modes),
        "compared_with": source.describe(),
        "baseline_origins": dict(sorted(source.origins.items()))
        if source.revision is not None
        else None,
        "base_rounds": rounds,
        # of those, the rounds of every benchmark; the others only of those not unchanged at once
        "base_rounds_at_once": measured.rounds_at_once
        if measured is not None and measured.rounds
        else None,
        # rounds after the first ones, of the benchmarks they could not decide (0: none needed)
        "base_rounds_again": max(len(measured.rounds) - measured.first_rounds, 0)
        if measured is not None and measured.rounds
        else None,
        "saved_as": settings.save,
        "failed_tests": sorted(outcome.failed_tests),
        "failed_test_errors": dict(sorted(failure_lines.items())),
        "skipped_tests": dict(sorted(skip_reasons.items())),
        "crashed_tests": sorted(crashed),
        "baseline": outcome.baseline_name,
        "policy": {
            "limits": dict(sorted(settings.policy.limits.items())),
            "strict": settings.policy.strict_environment,
            "fail_stale": settings.policy.fail_stale,
        },
        "baseline_entries": shards.baseline_entries_json(
            outcome.baseline_entries, [r.key for r in outcome.results]
        )
        if outcome.baseline_entries is not None
        else None,
    }


def write_json(path: Path, outcome: RunOutcome, meta: dict[str, Any]) -> Written:
    """``--bench-json``: the outcome's results and verdicts with ``meta``."""
    try:
        jsonreport.write(path, outcome.results, outcome.verdicts, meta)
    except OSError as exc:
        return Written((f"ERROR: --bench-json={path}: cannot write ({exc})",), failed=True)
    return Written()


def write_benchmark_json(path: Path, results: Sequence[BenchmarkResult]) -> Written:
    """``--benchmark-json``: pytest-benchmark's format, for its users' CI."""
    from ..reports import benchmark_json

    try:
        benchmark_json.write(path, results, save_stamp(path.parent)["commit"])
    except OSError as exc:
        return Written((f"ERROR: --benchmark-json={path}: cannot write ({exc})",), failed=True)
    return Written()


def write_reports(outcome: RunOutcome, targets: publish.ReportTargets) -> Written:
    """``--bench-markdown``, ``--bench-html`` and ``GITHUB_STEP_SUMMARY``: one that could not be
    written (its ``ERROR`` note) fails the run as a ``--bench-json`` that could not be written
    does, after every other report was written."""
    notes = publish.write_reports(outcome, targets)
    return Written(tuple(notes), failed=any(note.startswith("ERROR:") for note in notes))


def write_summary(
    terminalreporter: Any,
    outcome: RunOutcome,
    source: BaselineSource,
    closing: Sequence[str],
    notes: Sequence[str],
    *,
    only_changed: bool,
) -> None:
    """The run's section of pytest's terminal summary: the tables (only what changed, with one
    line of counts, when ``only_changed``), the verdicts that are not unchanged, where the
    baselines came from, profiles, the closing block and the run's notes."""
    write = terminalreporter.write_line
    if outcome.results or outcome.verdicts or notes:
        terminalreporter.section("torchbench", sep="=")
    name = outcome.baseline_name
    width = terminal_width(terminalreporter)
    for line in terminal.render_tables(
        outcome.results, outcome.verdicts, name, width=min(width, 120), only_changed=only_changed
    ):
        write(line)
    if only_changed and outcome.results:
        write(terminal.render_counts(outcome.results, outcome.verdicts, name))
    shown = [v for v in outcome.verdicts if v.status != UNCHANGED]
    if source.baseline is not None:
        for line in terminal.render_verdict_lines(shown):
            write(line)
        if not shown and outcome.results:
            write(
                f"no changes beyond the limits against baseline '{safe_text(name)}' "
                f"({safe_text(outcome.baseline_source)})"
            )
        elif source.revision is not None and source.origins:
            write(f"baselines: {safe_text(outcome.baseline_source)}")
    for line in terminal.render_profiles(outcome.results):
        write(line)
    for line in closing:
        write(
            f"torchbench: {safe_text(line)}",
            red=line.startswith("ERROR"),
            yellow=line.startswith("WARNING"),
        )
    for note in notes:
        write(f"torchbench: {safe_text(note)}")  # notes quote files and the re-run's output
