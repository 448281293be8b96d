"""The end-of-session table, in the spirit of torch.utils.benchmark's ``Compare``.

One block per metric and label; rows are sub-labels, columns are descriptions; each cell shows the
value trimmed to the significant figures its spread supports, and the delta against the baseline
with a mark for the verdict. Units are shared per block so columns line up and read at a glance.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..common.text import finite, safe_number, safe_text
from ..common.vocabulary import (
    ACCEPTED,
    IMPROVEMENT,
    MISSING,
    NEW,
    NOISY,
    NOT_COMPARABLE,
    REGRESSION,
    TOO_NOISY,
    UNCHANGED,
    Verdict,
)
from ..judging.results import BenchmarkResult
from ..metrics import registry
from ..metrics.display import Display
from .common import (
    STATUS_ORDER,
    count_tests,
    group_of,
    metric_rank,
    metric_value,
    profiles_of,
    safe_delta,
    waived,
)

_MARKS = {
    REGRESSION: "!",
    TOO_NOISY: "#",
    NOISY: "~",
    ACCEPTED: "^",
    IMPROVEMENT: "*",
    NOT_COMPARABLE: "?",
    NEW: "+",
}
_LEGEND = (
    "! regression   # too noisy to judge   ~ noisy (not failed)   ^ accepted   * improvement   ? "
    "not comparable   + new (no baseline)"
)


def _cell(metric_name: str, metric: object, scale: float, verdict: Verdict | None) -> str:
    """The metric's own cell text, then the delta against the baseline and the verdict's mark."""
    shown = registry.get(metric_name, Display)
    text = shown.cell(metric, scale)
    if verdict is not None:
        delta = safe_delta(verdict)
        if delta is not None and verdict.status not in (NEW, NOT_COMPARABLE):
            judged = shown.judged_cell(metric, scale)
            if judged:
                text += f", {judged}"
            text += f" ({safe_number(delta)})" if not finite(delta) else shown.cell_delta(delta)
        text += _MARKS.get(verdict.status, " ")
    return text


def _unit_title(metric_name: str, unit: str) -> str:
    found = registry.find(metric_name, Display)
    return (
        found.table_title.format(unit=unit)
        if found is not None and found.table_title
        else metric_name
    )


def _blocks(
    measured: Sequence[BenchmarkResult],
) -> dict[tuple[str, str, str], list[BenchmarkResult]]:
    """Results per table block: (group, label, module). The module is part of a block's identity
    only where the same label comes from several modules: two ``test_resize`` in different files
    are two blocks, never one merged row."""
    modules_of: dict[tuple[str, str], set[str]] = {}
    for result in measured:
        modules_of.setdefault((group_of(result), result.label), set()).add(result.module)
    blocks: dict[tuple[str, str, str], list[BenchmarkResult]] = {}
    for result in measured:
        group = group_of(result)
        module = result.module if len(modules_of[(group, result.label)]) > 1 else ""
        blocks.setdefault((group, result.label, module), []).append(result)
    # Blocks of one group and label stay together (first-seen order of groups and labels kept).
    first_seen = {key[:2]: index for index, key in reversed(list(enumerate(blocks)))}
    return dict(sorted(blocks.items(), key=lambda item: (first_seen[item[0][:2]], item[0][2])))


def _row_names(block: Sequence[BenchmarkResult]) -> dict[str, str]:
    """Key -> row name: the sub_label, unless two results of the block would share a cell; those
    rows are named by their key (what is left of it after the block's common prefix is not worth
    the ambiguity), so no result ever overwrites another's cell."""
    seen: dict[tuple[str, str], int] = {}
    for result in block:
        seen[(result.sub_label, result.description)] = (
            seen.get((result.sub_label, result.description), 0) + 1
        )
    return {r.key: r.sub_label if seen[(r.sub_label, r.description)] == 1 else r.key for r in block}


def changed(
    result: BenchmarkResult, metric_name: str, by_key: dict[tuple[str, str], Verdict]
) -> bool:
    """Whether a result's row belongs in the changes-only view: it has a verdict for the metric and
    that verdict is not "unchanged" (a regression, noisy, an improvement, new, not comparable)."""
    verdict = by_key.get((result.key, metric_name))
    return verdict is not None and verdict.status != UNCHANGED


def render_tables(
    results: Sequence[BenchmarkResult],
    verdicts: Sequence[Verdict],
    baseline_name: str | None,
    width: int = 100,
    only_changed: bool = False,
) -> list[str]:
    """One block per metric, then per (group, label[, module]); rows are sub-labels, columns
    descriptions. Every text from a result goes through ``safe_text``; no value makes it raise.
    ``only_changed``: only the rows of :func:`changed` results (a metric with none has no table)."""
    by_key = {(v.key, v.metric): v for v in verdicts}
    lines: list[str] = []
    metric_names = sorted(
        {m for r in results for m in r.metrics}, key=lambda m: (metric_rank(m), m)
    )
    for metric_name in metric_names:
        measured = [
            r
            for r in results
            if metric_name in r.metrics and (not only_changed or changed(r, metric_name, by_key))
        ]
        if not measured:
            continue
        values: list[float] = []
        for result in measured:
            try:
                values.append(metric_value(metric_name, result.metrics[metric_name]))
            except (KeyError, AttributeError, TypeError, ValueError):
                pass
        found = registry.find(metric_name, Display)
        unit, scale = found.table_scale(values) if found is not None else ("", 1.0)
        delta_title = found.delta_title if found is not None else "delta"
        compared = (
            f"; {delta_title} vs baseline '{safe_text(baseline_name)}'" if baseline_name else ""
        )
        title = (
            f" torchbench {safe_text(metric_name)} ({_unit_title(metric_name, unit)}{compared}) "
        )
        lines.append(title.center(width, "-"))
        for (group, label, module), block in _blocks(measured).items():
            names = _row_names(block)
            descriptions = list(dict.fromkeys(safe_text(r.description) for r in block))
            rows = list(dict.fromkeys(safe_text(names[r.key]) for r in block))
            cells: dict[tuple[str, str], str] = {}
            for result in block:
                try:
                    text = _cell(
                        metric_name,
                        result.metrics[metric_name],
                        scale,
                        by_key.get((result.key, metric_name)),
                    )
                except (KeyError, AttributeError, TypeError, ValueError, ArithmeticError) as exc:
                    text = f"(unreadable: {safe_text(type(exc).__name__)})"
                cells[(safe_text(names[result.key]), safe_text(result.description))] = text
            row_width = max([len(r) for r in rows] + [4]) + 2
            col_widths = [
                max([len(desc)] + [len(cells.get((r, desc), "")) for r in rows]) + 2
                for desc in descriptions
            ]
            heading = " / ".join(safe_text(p) for p in (group, label) if p)
            lines.append(f"[ {heading} ]" + (f"  ({safe_text(module)})" if module else ""))
            if any(descriptions):
                lines.append(
                    " " * row_width + "|".join(d.rjust(w) for d, w in zip(descriptions, col_widths))
                )
            for row in rows:
                rendered = "|".join(
                    cells.get((row, d), "").rjust(w) for d, w in zip(descriptions, col_widths)
                )
                lines.append(f"  {row}".ljust(row_width) + rendered)
            lines.append("")
    if baseline_name and lines:
        lines.append(_LEGEND)
    return lines


def render_counts(
    results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict], baseline_name: str | None
) -> str:
    """The one line that stands for the tables in the changes-only view: how many benchmarks are
    in each state (tests, each under its worst verdict), how many the tables showed, and how to
    see them all."""
    by_key = {(v.key, v.metric): v for v in verdicts}
    shown = len({r.key for r in results if any(changed(r, name, by_key) for name in r.metrics)})
    counts = count_tests(results, verdicts)
    tests = counts.get("tests", 0)
    states = [
        f"{counts[status]} {status}" for status in (*STATUS_ORDER, "measured") if counts.get(status)
    ]
    against = f" against baseline '{safe_text(baseline_name)}'" if baseline_name else ""
    return (
        f"torchbench: {tests} benchmark(s){against}: {', '.join(states) or 'none measured'}; "
        f"tables show the {shown} changed (-v shows every benchmark)"
    )


#: Detail lines shown per verdict in the terminal: the twelve rounds of a time benchmark measured
#: alternately with the default four rounds and both passes fit; longer explanations are cut, and
#: say so, rather than flood the log.
DETAIL_LINES = 12


def render_verdict_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """One line per verdict worth reading: regressions first, then improvements, new, missing."""
    order = [REGRESSION, TOO_NOISY, NOISY, ACCEPTED, IMPROVEMENT, NOT_COMPARABLE, NEW, MISSING]
    lines = []
    for status in order:
        chosen = [v for v in verdicts if v.status == status]
        if not chosen:
            continue
        lines.append(f"{status} ({len(chosen)}):")
        for verdict in chosen:
            flag = " FAILED" if verdict.failed else " (waived by a hook)" if waived(verdict) else ""
            lines.append(f"  {safe_text(verdict.key)}: {safe_text(verdict.summary)}{flag}")
            if status in (REGRESSION, TOO_NOISY, NOISY, ACCEPTED, IMPROVEMENT):
                lines.extend(f"      {safe_text(d)}" for d in verdict.details[:DETAIL_LINES])
                if len(verdict.details) > DETAIL_LINES:
                    lines.append(
                        f"      ... {len(verdict.details) - DETAIL_LINES} more line(s): every line "
                        "is in --bench-json and --bench-html"
                    )
    return lines


def render_profiles(results: Sequence[BenchmarkResult]) -> list[str]:
    """Top ops by self CPU time per profile (``--bench-profile`` and ``bench_profiler``), and where
    its trace is."""
    profiled = [(result, profile) for result in results for profile in profiles_of(result)]
    if not profiled:
        return []
    lines = [
        " torchbench profiles (top ops by self CPU time, totals over the profiled runs) ".center(
            100, "-"
        )
    ]
    for result, profile in profiled:
        trace = profile.get("trace") or f"no trace ({profile.get('error') or 'not written'})"
        source = profile.get("source")
        lines.append(
            f"{safe_text(result.key)}: {safe_text(trace)}"
            + (f"  ({safe_text(source)})" if source else "")
        )
        for op in (
            profile.get("top_ops", [])[:5] if isinstance(profile.get("top_ops"), list) else []
        ):
            if not isinstance(op, dict):
                continue
            device = op.get("self_device_time_us")
            device_text = f"  device {safe_number(device, '.1f')} us" if device else ""
            lines.append(
                f"    {safe_text(op.get('name', '?')):<40} {safe_number(op.get('calls', 0)):>6} "
                f"calls  self {safe_number(op.get('self_cpu_time_us', 0), '.1f')} us{device_text}"
            )
    return lines
