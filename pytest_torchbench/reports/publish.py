"""Writing the optional end-of-session reports (Markdown, GitHub job summary, HTML).

Why a separate step with its own error handling: these are conveniences around the gate, so a
target that cannot be written is one ``ERROR`` line and never changes the run's exit status — a
passing run with a typo in ``--bench-html`` must still pass, and a failing one must still fail.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from ..core.judgement import Verdict
from ..core.results import BenchmarkResult
from . import html, markdown


def write_reports(
    results: Sequence[BenchmarkResult],
    verdicts: Sequence[Verdict],
    baseline_entries: Mapping[str, BenchmarkResult] | None,
    baseline_name: str | None,
    baseline_source: str | None,
    markdown_path: Path | None,
    html_path: Path | None,
    step_summary: Path | None,
    option_prefix: str = "--bench-",
    failed_tests: Collection[str] = (),
) -> list[str]:
    """Write what was asked; return notes for the terminal (written files, one line per error).
    ``failed_tests``: benchmark tests pytest failed, which every report counts as failed."""
    notes: list[str] = []
    if not results and not verdicts and not failed_tests:
        return notes
    if markdown_path is not None or step_summary is not None:
        text = markdown.render(
            results, verdicts, baseline_name, baseline_source, failed_tests=failed_tests
        )
        if markdown_path is not None:
            try:
                markdown.write(markdown_path, text)
                notes.append(f"Markdown summary written to {markdown_path}")
            except OSError as exc:
                notes.append(
                    f"ERROR: {option_prefix}markdown={markdown_path}: cannot write ({_reason(exc)})"
                )
        if step_summary is not None:
            try:
                markdown.write(step_summary, text, append=True)
            except OSError as exc:
                notes.append(
                    f"ERROR: GITHUB_STEP_SUMMARY={step_summary}: cannot append ({_reason(exc)})"
                )
    if html_path is not None:
        try:
            html.write(
                html_path,
                html.render(
                    results,
                    verdicts,
                    baseline_entries,
                    baseline_name,
                    baseline_source,
                    base=Path(html_path).absolute().parent,
                    failed_tests=failed_tests,
                ),
            )
            notes.append(f"HTML report written to {html_path}")
        except OSError as exc:
            notes.append(f"ERROR: {option_prefix}html={html_path}: cannot write ({_reason(exc)})")
    return notes


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
