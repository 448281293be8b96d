"""``--bench-html=PATH``: one self-contained HTML file with plots, readable offline.

Why self-contained: the report is uploaded as a CI artifact and opened from a download folder or
an air-gapped machine, so it must not fetch anything: styles are inline, plots are SVG drawn here
in Python (no JavaScript, no CDN, no fonts). The only links that leave the file are to profiler
traces the user recorded (``result.extras["trace"]``).

Per benchmark: the distribution of current against baseline wall times (a strip plot of the raw
replicate times over a box of quartiles: a shift of the whole cloud is a real change, one outlier is
not), bars of the instruction and op-count deltas, and the functions whose instruction counts
changed most (the function-level explanation of a regression).
"""
from __future__ import annotations

import hashlib
import html
import math
import random
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from .. import __version__
from ..judgement import IMPROVEMENT, MISSING, NEW, NOT_COMPARABLE, REGRESSION, UNCHANGED, Verdict, format_seconds, short_function_name
from ..results import BenchmarkResult

_COLORS = {
    REGRESSION: "#c62828", IMPROVEMENT: "#2e7d32", UNCHANGED: "#607d8b",
    NOT_COMPARABLE: "#8d6e63", NEW: "#1565c0", MISSING: "#6a1b9a",
}
_CURRENT, _BASELINE = "#1f77b4", "#9e9e9e"
_MORE, _LESS = "#d32f2f", "#388e3c"

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
header{background:#1d2330;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px} header p{margin:0;color:#c9d1e0}
main{padding:18px 28px;max-width:1200px}
.pills span{display:inline-block;border-radius:12px;padding:2px 10px;margin:2px 6px 2px 0;color:#fff;font-size:12px;font-weight:600}
section.card{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.12);margin:16px 0;padding:14px 18px}
section.card h2{font-size:15px;margin:0 0 6px;font-family:ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
.card.regression{border-left:5px solid #c62828}.card.improvement{border-left:5px solid #2e7d32}
.meta{color:#5b6475;font-size:12px;margin-bottom:6px}
.plots{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}
.plot{flex:1 1 420px;min-width:320px}.plot h3{font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:#5b6475;margin:8px 0 2px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e6e8ec}
th{background:#eef0f4;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;font-family:ui-monospace,Menlo,Consolas,monospace}
td.key{font-family:ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
.status{font-weight:600}
pre{background:#f3f4f7;padding:8px;border-radius:4px;overflow:auto;font-size:12px;margin:4px 0}
svg{max-width:100%;height:auto;display:block}
svg text{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif}
a{color:#1565c0}
footer{color:#5b6475;font-size:12px;padding:8px 28px 24px}
"""


def _anchor(key: str) -> str:
    """A stable id for a benchmark's card (hash() is salted per process; reports must not be)."""
    return "b-" + hashlib.sha1(key.encode()).hexdigest()[:10]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k) covering [low, high]."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks = [round(start, 12)]
    while ticks[-1] < high - step * 1e-9 and len(ticks) < 40:  # the last tick covers ``high``
        ticks.append(round(start + len(ticks) * step, 12))
    return ticks


def _time_scale(values: Iterable[float]) -> tuple[str, float]:
    largest = max((v for v in values if v > 0), default=1.0)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if largest >= scale:
            return unit, scale
    return "ns", 1e-9


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    ordered = sorted(values)

    def q(p: float) -> float:
        position = p * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    return q(0.25), q(0.5), q(0.75)


def strip_box_svg(current: Sequence[float], baseline: Sequence[float] | None, width: int = 440) -> str:
    """Per-call times of each replicate: baseline row above current row, box = quartiles."""
    rows = [("baseline", list(baseline), _BASELINE)] if baseline else []
    rows.append(("current", list(current), _CURRENT))
    everything = [v for _, values, _ in rows for v in values]
    unit, scale = _time_scale(everything)
    low, high = min(everything) / scale, max(everything) / scale
    pad = (high - low) * 0.08 or max(high * 0.05, 1e-9)
    ticks = _nice_ticks(low - pad, high + pad)
    x0, x1 = ticks[0], ticks[-1]
    left, right, row_h, top = 70, 14, 38, 8
    height = top + row_h * len(rows) + 34

    def x(value: float) -> float:
        return left + (value - x0) / ((x1 - x0) or 1.0) * (width - left - right)

    parts = [f'<svg width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="time distribution">']
    axis_y = top + row_h * len(rows) + 4
    for tick in ticks:
        tx = x(tick)
        parts.append(f'<line x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{axis_y}" stroke="#eceef2"/>')
        parts.append(f'<text x="{tx:.1f}" y="{axis_y + 14}" font-size="10" text-anchor="middle" fill="#5b6475">{tick:g}</text>')
    parts.append(f'<text x="{(left + width - right) / 2:.0f}" y="{axis_y + 28}" font-size="10" '
                 f'text-anchor="middle" fill="#5b6475">time per call ({unit})</text>')
    jitter = random.Random(0)  # deterministic: the same results give the same bytes
    for index, (name, values, color) in enumerate(rows):
        cy = top + row_h * index + row_h / 2
        scaled = [v / scale for v in values]
        q1, median, q3 = _quartiles(scaled)
        parts.append(f'<text x="{left - 8}" y="{cy + 4:.1f}" font-size="11" text-anchor="end" fill="#1d2330">{name}</text>')
        parts.append(f'<line x1="{x(min(scaled)):.1f}" y1="{cy:.1f}" x2="{x(max(scaled)):.1f}" y2="{cy:.1f}" stroke="{color}" stroke-width="1"/>')
        parts.append(f'<rect x="{x(q1):.1f}" y="{cy - 11:.1f}" width="{max(x(q3) - x(q1), 1):.1f}" height="22" '
                     f'fill="{color}" fill-opacity="0.18" stroke="{color}" rx="2"/>')
        parts.append(f'<line x1="{x(median):.1f}" y1="{cy - 13:.1f}" x2="{x(median):.1f}" y2="{cy + 13:.1f}" stroke="{color}" stroke-width="2.5"/>')
        for value in scaled:
            parts.append(f'<circle cx="{x(value):.1f}" cy="{cy + jitter.uniform(-8, 8):.1f}" r="2.6" '
                         f'fill="{color}" fill-opacity="0.75"><title>{value:.4g} {unit}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def delta_bars_svg(
    items: Sequence[tuple[str, float]], unit: str, width: int = 440, label_width: int = 190, neutral: bool = False,
) -> str:
    """Horizontal bars around zero: red for more work than the baseline, green for less
    (``neutral``: plain counts without a baseline, in one colour)."""
    if not items:
        return '<p class="meta">no changes</p>'
    bar_h, top = 18, 6
    height = top + bar_h * len(items) + 22
    largest = max(abs(v) for _, v in items) or 1.0
    mid = label_width + (width - label_width - 70) / 2
    half = (width - label_width - 70) / 2
    parts = [f'<svg width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="deltas">']
    parts.append(f'<line x1="{mid:.1f}" y1="{top - 2}" x2="{mid:.1f}" y2="{top + bar_h * len(items)}" stroke="#9aa3b2"/>')
    for index, (name, value) in enumerate(items):
        y = top + index * bar_h
        length = abs(value) / largest * half
        bx = mid if value >= 0 else mid - length
        color = _CURRENT if neutral else _MORE if value > 0 else _LESS
        short = name if len(name) <= 30 else "…" + name[-29:]
        parts.append(f'<text x="{label_width - 6}" y="{y + 13}" font-size="10.5" text-anchor="end" '
                     f'fill="#1d2330">{_e(short)}<title>{_e(name)}</title></text>')
        parts.append(f'<rect x="{bx:.1f}" y="{y + 3}" width="{max(length, 1):.1f}" height="{bar_h - 6}" fill="{color}" rx="2"/>')
        sign = "" if neutral else "+"
        text = f"{value:{sign},.0f}" if abs(value) >= 100 else f"{value:{sign}g}"
        tx = mid + length + 4 if value >= 0 else mid - length - 4
        anchor = "start" if value >= 0 else "end"
        if value < 0 and tx - 60 < label_width:
            tx, anchor = mid + 4, "start"
        parts.append(f'<text x="{tx:.1f}" y="{y + 13}" font-size="10" text-anchor="{anchor}" fill="#3b4252">{_e(text)}</text>')
    parts.append(f'<text x="{mid:.1f}" y="{height - 4}" font-size="10" text-anchor="middle" fill="#5b6475">{_e(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _status_pill(verdict: Verdict) -> str:
    color = _COLORS.get(verdict.status, "#607d8b")
    delta = verdict.delta
    text = f"{verdict.metric}: {verdict.status}"
    if delta is not None and verdict.status not in (NEW, NOT_COMPARABLE):
        text += f" {delta * 100:+.1f}%"
    if verdict.failed:
        text += " ✗"
    return f'<span style="background:{color}" title="{_e(verdict.summary)}">{_e(text)}</span>'


def _trace_link(trace: object) -> str:
    """A link to a profiler trace: URLs stay, files become file:// (or stay relative)."""
    target = str(trace)
    if "://" in target:
        href = target
    else:
        path = Path(target)
        href = path.as_uri() if path.is_absolute() else target
    return f'<a href="{_e(href)}">{_e(Path(target).name or target)}</a>'


def _card(result: BenchmarkResult, baseline: BenchmarkResult | None, verdicts: Sequence[Verdict], top: int) -> str:
    statuses = {v.status for v in verdicts}
    css = REGRESSION if REGRESSION in statuses else IMPROVEMENT if IMPROVEMENT in statuses else ""
    anchor = _anchor(result.key)
    meta = " · ".join(_e(p) for p in (result.label, result.sub_label, result.description, result.module) if p)
    parts = [f'<section class="card {css}" id="{anchor}"><h2>{_e(result.key)}</h2>',
             f'<div class="meta">{meta}</div>',
             '<div class="pills">' + "".join(_status_pill(v) for v in verdicts) + "</div>"]
    plots: list[str] = []
    time_now = result.metrics.get("time")
    if time_now is not None:
        time_then = baseline.metrics.get("time") if baseline is not None else None
        plots.append("<h3>wall time: baseline vs current (each dot one replicate)</h3>"
                     + strip_box_svg(time_now.times, time_then.times if time_then is not None else None))
    instr_now = result.metrics.get("instructions")
    instr_then = baseline.metrics.get("instructions") if baseline is not None else None
    if instr_now is not None and instr_then is not None:
        total = instr_now.instructions_per_run - instr_then.instructions_per_run
        changes = {
            name: instr_now.functions.get(name, 0.0) - instr_then.functions.get(name, 0.0)
            for name in set(instr_now.functions) | set(instr_then.functions)
        }
        ordered = sorted(((n, c) for n, c in changes.items() if round(c) != 0), key=lambda i: (-abs(i[1]), i[0]))
        ordered = [(short_function_name(n), c) for n, c in ordered]  # full names stay in the baseline
        plots.append(
            f"<h3>instructions per run: {instr_then.instructions_per_run:,.0f} → "
            f"{instr_now.instructions_per_run:,.0f} ({total:+,.0f})</h3>"
            + delta_bars_svg([("total", total)], "instructions per run", label_width=120)
            + "<h3>top changed functions (exclusive instructions per run)</h3>"
            + delta_bars_svg(ordered[:top], "instructions per run")
        )
    ops_now = result.metrics.get("ops")
    ops_then = baseline.metrics.get("ops") if baseline is not None else None
    if ops_now is not None and ops_then is not None:
        op_changes = sorted(
            ((op, ops_now.ops.get(op, 0.0) - ops_then.ops.get(op, 0.0)) for op in set(ops_now.ops) | set(ops_then.ops)),
            key=lambda i: (-abs(i[1]), i[0]),
        )
        op_changes = [(op, change) for op, change in op_changes if change != 0]
        plots.append("<h3>aten op calls per run: change vs baseline</h3>" + delta_bars_svg(op_changes[:top], "calls per run"))
    elif ops_now is not None:
        ordered_ops = sorted(ops_now.ops.items(), key=lambda i: (-i[1], i[0]))[:top]
        plots.append("<h3>aten op calls per run (no baseline)</h3>" + delta_bars_svg(ordered_ops, "calls per run", neutral=True))
    if plots:
        parts.append('<div class="plots">' + "".join(f'<div class="plot">{p}</div>' for p in plots) + "</div>")
    details = [v for v in verdicts if v.details and v.status not in (UNCHANGED,)]
    for verdict in details:
        parts.append(f"<h3 class=\"meta\">{_e(verdict.metric)}: {_e(verdict.summary)}</h3>"
                     f"<pre>{_e(chr(10).join(verdict.details))}</pre>")
    trace = result.extras.get("trace") if isinstance(result.extras, Mapping) else None
    if trace:
        traces = trace if isinstance(trace, (list, tuple)) else [trace]
        parts.append('<div class="meta">profiler trace: ' + ", ".join(_trace_link(t) for t in traces) + "</div>")
    parts.append("</section>")
    return "".join(parts)


def _overview(results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict]) -> str:
    rows = []
    by_key: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        by_key.setdefault(verdict.key, []).append(verdict)
    order = {REGRESSION: 0, IMPROVEMENT: 1, NOT_COMPARABLE: 2, NEW: 3, UNCHANGED: 4, MISSING: 5}
    keys = sorted({r.key for r in results} | set(by_key),
                  key=lambda k: (min((order.get(v.status, 9) for v in by_key.get(k, [])), default=9), k))
    for key in keys:
        for verdict in by_key.get(key) or [Verdict(key, "-", "measured")]:
            color = _COLORS.get(verdict.status, "#607d8b")
            delta = verdict.delta
            rows.append(
                f'<tr><td class="key"><a href="#{_anchor(key)}">{_e(key)}</a></td><td>{_e(verdict.metric)}</td>'
                f'<td class="status" style="color:{color}">{_e(verdict.status)}{" (failed)" if verdict.failed else ""}</td>'
                f'<td class="num">{_fmt(verdict.metric, verdict.baseline)}</td><td class="num">{_fmt(verdict.metric, verdict.current)}</td>'
                f'<td class="num">{"" if delta is None else f"{delta * 100:+.2f}%"}</td></tr>'
            )
    return ("<table><tr><th>benchmark</th><th>metric</th><th>verdict</th><th>baseline</th><th>current</th>"
            "<th>delta</th></tr>" + "".join(rows) + "</table>")


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return ""
    if metric == "time":
        return _e(format_seconds(value))
    return f"{value:,.0f}" if metric in ("instructions", "memory") else f"{value:g}"


def render(
    results: Sequence[BenchmarkResult],
    verdicts: Sequence[Verdict],
    baseline: Mapping[str, BenchmarkResult] | None,
    baseline_name: str | None,
    baseline_source: str | None = None,
    title: str = "torchbench report",
    top: int = 10,
) -> str:
    """The whole report as one HTML string; ``baseline`` maps keys to baseline entries."""
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
    failed = sum(1 for v in verdicts if v.failed)
    subtitle = (f"{len(results)} benchmark(s) compared with baseline <b>{_e(baseline_name)}</b>"
                + (f" ({_e(baseline_source)})" if baseline_source else "")
                if baseline_name else f"{len(results)} benchmark(s); no baseline")
    pills = "".join(
        f'<span style="background:{_COLORS[s]}">{counts[s]} {_e(s)}</span>'
        for s in (REGRESSION, IMPROVEMENT, NOT_COMPARABLE, NEW, MISSING, UNCHANGED) if counts.get(s)
    )
    if failed:
        pills = f'<span style="background:#b71c1c">{failed} failed</span>' + pills
    by_key: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        by_key.setdefault(verdict.key, []).append(verdict)
    rank = {REGRESSION: 0, IMPROVEMENT: 1, NOT_COMPARABLE: 2, NEW: 3}
    ordered = sorted(results, key=lambda r: (min((rank.get(v.status, 5) for v in by_key.get(r.key, [])), default=5), r.key))
    cards = "".join(_card(r, (baseline or {}).get(r.key), by_key.get(r.key, []), top) for r in ordered)
    missing = [v for v in verdicts if v.status == MISSING]
    missing_html = ""
    if missing:
        missing_html = ("<section class=\"card\"><h2>missing</h2><ul>"
                        + "".join(f"<li><code>{_e(v.key)}</code>: {_e(v.summary)}</li>" for v in missing) + "</ul></section>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<header><h1>{_e(title)}</h1><p>{subtitle}</p><div class=\"pills\" style=\"margin-top:8px\">{pills}</div></header>"
        f"<main><section class=\"card\"><h2>overview</h2>{_overview(results, verdicts)}</section>"
        f"{cards}{missing_html}</main>"
        f"<footer>pytest-torchbench {_e(__version__)} · self-contained report: no scripts, no network</footer>"
        "</body></html>\n"
    )


def write(path: Path, text: str) -> None:
    from ..storage import atomic_write_many

    atomic_write_many({Path(path): text})
