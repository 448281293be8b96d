"""Writing the optional end-of-session reports (Markdown, GitHub job summary, HTML).

Why a separate step with its own error handling: a target that cannot be written is one ``ERROR``
note and the other reports are still written; the caller turns such a note into its exit status
for a report that was asked for and not written (4, in pytest as in the ``torchbench`` command).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from ..common.vocabulary import Verdict
from ..judging.results import BenchmarkResult
from . import html, markdown


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    """What a run (or a merge of shards, or a comparison) ended with, as every report shows it:
    its results and verdicts, the baselines judged against (entries, the set's name as shown, and
    where they came from), and the benchmark tests pytest failed, which every report counts as
    failed. Built once, with keywords, and handed to each report."""

    results: Sequence[BenchmarkResult]
    verdicts: Sequence[Verdict]
    baseline_entries: Mapping[str, BenchmarkResult] | None = None
    baseline_name: str | None = None
    baseline_source: str | None = None
    failed_tests: Collection[str] = ()


@dataclasses.dataclass(frozen=True)
class ReportTargets:
    """Where the optional reports go (None: not asked), and how their option is spelt in an error
    line (``--bench-`` in pytest, ``--`` in the command line)."""

    markdown_path: Path | None = None
    html_path: Path | None = None
    step_summary: Path | None = None
    option_prefix: str = "--bench-"


def write_reports(outcome: RunOutcome, targets: ReportTargets) -> list[str]:
    """Write what was asked; return notes for the terminal (written files, one line per error)."""
    notes: list[str] = []
    if not outcome.results and not outcome.verdicts and not outcome.failed_tests:
        return notes
    if targets.markdown_path is not None or targets.step_summary is not None:
        notes.extend(_write_markdown(outcome, targets))
    html_path = targets.html_path
    if html_path is not None:
        try:
            html.write(
                html_path,
                html.render(
                    outcome.results,
                    outcome.verdicts,
                    outcome.baseline_entries,
                    outcome.baseline_name,
                    outcome.baseline_source,
                    page=html.HtmlPage(base=Path(html_path).absolute().parent),
                    failed_tests=outcome.failed_tests,
                ),
            )
            notes.append(f"HTML report written to {html_path}")
        except OSError as exc:
            notes.append(
                f"ERROR: {targets.option_prefix}html={html_path}: cannot write ({_reason(exc)})"
            )
    return notes


def _write_markdown(outcome: RunOutcome, targets: ReportTargets) -> list[str]:
    """The Markdown summary, to its file and appended to the CI job summary."""
    notes: list[str] = []
    text = markdown.render(
        outcome.results,
        outcome.verdicts,
        outcome.baseline_name,
        outcome.baseline_source,
        failed_tests=outcome.failed_tests,
    )
    if targets.markdown_path is not None:
        try:
            markdown.write(targets.markdown_path, text)
            notes.append(f"Markdown summary written to {targets.markdown_path}")
        except OSError as exc:
            notes.append(
                f"ERROR: {targets.option_prefix}markdown={targets.markdown_path}: "
                f"cannot write ({_reason(exc)})"
            )
    if targets.step_summary is not None:
        try:
            markdown.write(targets.step_summary, text, append=True)
        except OSError as exc:
            # The CI's variable, not an option the user gave (a container may inherit it with its
            # file out of reach): said loudly, and the run's exit status stays the verdicts'.
            notes.append(
                f"WARNING: GITHUB_STEP_SUMMARY={targets.step_summary}: cannot append "
                f"({_reason(exc)}); the job summary is missing"
            )
    return notes


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
