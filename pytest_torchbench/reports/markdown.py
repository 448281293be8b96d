"""Markdown summary: for GitHub Actions job summaries (``GITHUB_STEP_SUMMARY``) and ``--bench-markdown``.

Why this layout: a reviewer opening a pull request's checks wants the bad news first, so
regressions come first, each with its explanation (the functions whose instruction counts changed,
the aten ops whose call counts changed) folded under ``<details>`` so the page stays short; then
improvements, environments that did not match, new and missing benchmarks; the full table last and
folded. Only plain GitHub-flavoured Markdown and the ``<details>`` element are used, both rendered
by GitHub's job summary.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from ..judgement import IMPROVEMENT, MISSING, NEW, NOT_COMPARABLE, REGRESSION, UNCHANGED, Verdict, format_seconds
from ..results import BenchmarkResult
from . import terminal

_SECTIONS = (
    (REGRESSION, "Regressions", ":red_circle:"),
    (IMPROVEMENT, "Improvements", ":green_circle:"),
    (NOT_COMPARABLE, "Not comparable (different environment)", ":grey_question:"),
    (NEW, "New benchmarks (no baseline)", ":new:"),
    (MISSING, "Missing (in the baseline, not measured)", ":ghost:"),
)

#: Metrics whose verdict details explain a regression of any metric of the same benchmark.
_EXPLAINING = (("instructions", "Functions (instructions per run)"), ("ops", "aten ops (calls per run)"))


def _escape(text: str) -> str:
    """Table cells: a ``|`` would end the cell, a newline the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def _value(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    if metric == "time":
        return format_seconds(value)
    if metric in ("instructions", "memory"):
        return f"{value:,.0f}"
    return f"{value:g}"


def _delta(verdict: Verdict) -> str:
    delta = verdict.delta
    if delta is None:
        return "-"
    return f"{delta * 100:+.1f}%" if abs(delta) >= 0.001 else f"{delta * 100:+.3f}%"


def _explanation(key: str, verdict: Verdict, by_key: dict[str, list[Verdict]]) -> list[str]:
    """The folded block under one regression: its own details, then function- and op-level ones."""
    blocks: list[tuple[str, list[str]]] = []
    if verdict.metric not in dict(_EXPLAINING) and verdict.details:
        blocks.append((f"{verdict.metric} details", verdict.details))
    for metric, title in _EXPLAINING:
        for other in by_key.get(key, []):
            if other.metric == metric and other.details and other.status not in (NOT_COMPARABLE,):
                blocks.append((title, other.details))
    if not blocks:
        return []
    lines = ["", "<details><summary>Why: " + ", ".join(t for t, _ in blocks) + "</summary>", ""]
    for title, details in blocks:
        lines += [f"**{title}**", "", "```", *details, "```", ""]
    lines += ["</details>", ""]
    return lines


def render(
    results: Sequence[BenchmarkResult],
    verdicts: Sequence[Verdict],
    baseline_name: str | None,
    baseline_source: str | None = None,
    title: str = "torchbench",
) -> str:
    """The whole summary as one Markdown string (ends with a newline)."""
    failed = [v for v in verdicts if v.failed]
    counts = {status: sum(1 for v in verdicts if v.status == status) for status, _, _ in _SECTIONS}
    lines = [f"## {title}", ""]
    if baseline_name is None:
        lines.append(f"{len(results)} benchmark(s) measured; no baseline to compare with.")
    else:
        state = ":x: **failed**" if failed else ":white_check_mark: passed"
        parts = [f"{counts[s]} {label.split(' (')[0].lower()}" for s, label, _ in _SECTIONS if counts[s]]
        lines.append(
            f"{state}: {len(results)} benchmark(s) against baseline `{baseline_name}`"
            + (f" ({_escape(baseline_source)})" if baseline_source else "")
            + (": " + ", ".join(parts) if parts else ": no changes beyond the limits")
            + "."
        )
    lines.append("")
    by_key: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        by_key.setdefault(verdict.key, []).append(verdict)
    for status, heading, icon in _SECTIONS:
        chosen = [v for v in verdicts if v.status == status]
        if not chosen:
            continue
        lines += [f"### {icon} {heading} ({len(chosen)})", ""]
        if status in (REGRESSION, IMPROVEMENT):
            for verdict in chosen:
                flag = " **FAILED**" if verdict.failed else ""
                lines.append(
                    f"- `{_escape(verdict.key)}` **{verdict.metric}** {_value(verdict.metric, verdict.baseline)}"
                    f" → {_value(verdict.metric, verdict.current)} ({_delta(verdict)}, limit "
                    f"{verdict.limit * 100:g}%){flag}"
                )
                lines.append(f"  <br>{_escape(verdict.summary)}")
                if status == REGRESSION:
                    lines += ["  " + line if line else "" for line in _explanation(verdict.key, verdict, by_key)]
            lines.append("")
        else:
            lines += ["| benchmark | metric | note |", "| --- | --- | --- |"]
            for verdict in chosen:
                flag = " (FAILED)" if verdict.failed else ""
                lines.append(f"| `{_escape(verdict.key)}` | {verdict.metric} | {_escape(verdict.summary)}{flag} |")
            lines.append("")
    if results:
        table = terminal.render_tables(results, verdicts, baseline_name, width=100)
        unchanged = sum(1 for v in verdicts if v.status == UNCHANGED)
        lines += [
            f"<details><summary>All results ({len(results)} benchmark(s), {unchanged} unchanged verdict(s))</summary>",
            "", "```", *table, "```", "", "</details>", "",
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def write(path: Path, text: str, append: bool = False) -> None:
    """Write (or, for GITHUB_STEP_SUMMARY, append: other steps own the rest of that file)."""
    path = Path(path)
    if append:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
        return
    from ..storage import atomic_write_many

    atomic_write_many({path: text})


def step_summary_path() -> Path | None:
    """GitHub Actions sets GITHUB_STEP_SUMMARY to a file each step may append Markdown to."""
    value = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    return Path(value) if value else None
