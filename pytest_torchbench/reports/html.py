"""``--bench-html=PATH``: one self-contained HTML file with plots, readable offline.

Why self-contained: the report is uploaded as a CI artifact and opened from a download folder or
an air-gapped machine, so it must not fetch anything: styles are inline, plots are SVG drawn here
in Python (no CDN, no fonts), and one small inline script sorts and filters the overview table (the
report reads fine without it). The only links that leave the file are to profiler traces
(``extras["profiles"]``: ``--bench-profile`` and ``bench_profiler``), relative to the report when
they lie beside it.

Why it stays small at suite size: a suite of 300 benchmarks in time mode has hundreds of thousands
of replicate times (thousands for a microsecond benchmark); drawn one dot each, the report ran to
megabytes.
Distributions are drawn from binned densities and quantiles instead (a fixed size per benchmark),
and unchanged benchmarks get no function bars. Bad news first: the overview table and the cards
are ordered regressions first; the header badges count tests (each under its worst verdict).

Per benchmark: the distribution of current against baseline wall times (density, quartiles,
median, 5th-95th percentiles: a shift of the whole shape is a real change, one outlier is not),
bars of the instruction and op-count deltas, and the functions whose instruction counts changed
most (the function-level explanation of a regression).
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import math
import os
import urllib.parse
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path

from .. import __version__
from ..common.text import finite, natural_key, safe_number, safe_text
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
    Bars,
    Distribution,
    Heading,
    Verdict,
    time_unit,
)
from ..judging.results import BenchmarkResult, nodeid_of
from ..metrics import registry
from ..metrics.display import Display
from .common import (
    count_tests,
    format_delta,
    format_value,
    group_of,
    metric_rank,
    metric_value,
    profiles_of,
    safe_delta,
    status_rank,
    top_ops_of,
    unjudged,
    unmeasured_failures,
    verdicts_by_key,
    waived,
    worst_status,
)

_COLORS = {
    REGRESSION: "#c62828",
    IMPROVEMENT: "#2e7d32",
    UNCHANGED: "#607d8b",
    NOT_COMPARABLE: "#8d6e63",
    NEW: "#1565c0",
    MISSING: "#6a1b9a",
    NOISY: "#ef6c00",
    TOO_NOISY: "#9e9d24",
    ACCEPTED: "#00838f",
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
.card.regression{border-left:5px solid #c62828}.card.noisy{border-left:5px solid #ef6c00}.card.improvement{border-left:5px solid #2e7d32}
.meta{color:#5b6475;font-size:12px;margin-bottom:6px}
.plots{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}
.plot{flex:1 1 460px;min-width:320px}.plot h3{font-size:12px;text-transform:uppercase;letter-spacing:.04em;color:#5b6475;margin:8px 0 2px}
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
svg .t{font-size:10px;text-anchor:middle;fill:#5b6475} svg .r{font-size:11px;text-anchor:end;fill:#1d2330}
svg .o{font-size:10px;fill:#5b6475}
.controls{display:flex;gap:8px;align-items:center;margin:6px 0 8px;flex-wrap:wrap}
.controls input,.controls select{font:inherit;padding:3px 6px;border:1px solid #c5cad3;border-radius:4px}
.scroll{max-height:24em;overflow:auto;border:1px solid #e6e8ec;border-radius:4px}
#overview th{cursor:pointer;user-select:none;white-space:nowrap;position:sticky;top:0} #overview th.up:after{content:" \\25B2"}
#overview th.down:after{content:" \\25BC"}
.card.new{border-left:5px solid #1565c0}.card.missing{border-left:5px solid #6a1b9a}
footer{color:#5b6475;font-size:12px;padding:8px 28px 24px}
"""


def _anchor(key: str) -> str:
    """A stable id for a benchmark's card (hash() is salted per process; reports must not be)."""
    return "b-" + hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def _e(text: object) -> str:
    """Text from results and baselines in HTML: the reports' common rule (``safe_text``: no control
    characters, no workflow commands), then HTML-escaped (quotes too: it also fills attributes)."""
    return html.escape(safe_text(text), quote=True)


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k) covering [low, high]; never raises (a range that
    floats cannot split, such as 0 to 1e308, gives its two ends)."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0, 1.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    try:
        raw = (high - low) / max(count - 1, 1)
        magnitude = 10.0 ** math.floor(math.log10(raw))
        step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
        start = math.floor(low / step) * step
    except (OverflowError, ValueError, StopIteration):
        return [low, high]
    if not all(math.isfinite(v) for v in (raw, step, start, start + count * step)):
        return [low, high]
    ticks = [round(start, 12)]
    while ticks[-1] < high - step * 1e-9 and len(ticks) < 40:  # the last tick covers ``high``
        ticks.append(round(start + len(ticks) * step, 12))
    return ticks


def _time_scale(values: Iterable[float]) -> tuple[str, float]:
    unit, scale = time_unit(max((v for v in values if v > 0 and math.isfinite(v)), default=1.0))
    return unit.replace("us", "\u00b5s"), scale


def _quantile(ordered: Sequence[float], p: float) -> float:
    """Linear-interpolated quantile of sorted values (numpy's default method)."""
    position = p * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


#: Bins of the density outline: enough to show two modes, few enough to stay small.
_BINS = 28


def _density_outline(
    scaled: Sequence[float], x: Callable[[float], float], axis: tuple[float, float], cy: float
) -> tuple[str, int]:
    """The violin's path around the row's middle ``cy``, and how many values fall off the axis
    ``axis`` (its first and last tick) and so are not in it."""
    x0, x1 = axis
    span = (x1 - x0) or 1.0
    counts = [0] * _BINS
    outside = 0
    for value in scaled:
        if value < x0 or value > x1:
            outside += 1
            continue
        counts[min(int((value - x0) / span * _BINS), _BINS - 1)] += 1
    smooth = [
        (counts[max(i - 1, 0)] + 2 * counts[i] + counts[min(i + 1, _BINS - 1)]) / 4
        for i in range(_BINS)
    ]
    peak = max(smooth) or 1.0
    xs = [x(x0 + (i + 0.5) * span / _BINS) for i in range(_BINS)]
    upper = " ".join(f"{px:.1f} {cy - 13 * h / peak:.1f}" for px, h in zip(xs, smooth))
    lower = " ".join(
        f"{px:.1f} {cy + 13 * h / peak:.1f}" for px, h in zip(reversed(xs), reversed(smooth))
    )
    return f"M{upper} L{lower}Z", outside


def strip_box_svg(
    current: Sequence[float], baseline: Sequence[float] | None, width: int = 600
) -> str:
    """Per-call times, baseline row above current row, each drawn from the samples' distribution
    rather than sample by sample, so the size does not grow with the number of replicates (a 10 us
    benchmark has thousands): a density outline (violin, a histogram of ``_BINS`` bins smoothed
    over its neighbours), a box of the quartiles, the median, whiskers from the 5th to the 95th
    percentile. The axis spans the 1st to 99th percentiles of both rows together, so one outlier
    does not squash the picture; how many replicates lie outside it is written at the row's end."""
    rows = [("baseline", [v for v in baseline if finite(v)], _BASELINE)] if baseline else []
    rows.append(("current", [v for v in current if finite(v)], _CURRENT))
    rows = [row for row in rows if row[1]]
    if not rows:
        return '<p class="meta">no finite times to draw</p>'
    everything = sorted(v for _, values, _ in rows for v in values)
    unit, scale = _time_scale(everything)
    low, high = _quantile(everything, 0.01) / scale, _quantile(everything, 0.99) / scale
    pad = (high - low) * 0.08 or max(abs(high) * 0.05, 1e-9)
    ticks = _nice_ticks(low - pad, high + pad)
    x0, x1 = ticks[0], ticks[-1]
    left, right, row_h, top = 70, 80, 38, 8
    height = top + row_h * len(rows) + 34
    span = (x1 - x0) or 1.0

    def x(value: float) -> float:
        return left + (min(max(value, x0), x1) - x0) / span * (width - left - right)

    parts = [
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="time distribution"><title>shape: density of the replicates; box: quartiles; '
        f"line: median; whiskers: 5th to 95th percentile</title>"
    ]
    axis_y = top + row_h * len(rows) + 4
    for tick in ticks:
        tx = x(tick)
        parts.append(
            f'<path d="M{tx:.1f} {top}V{axis_y}" stroke="#eceef2"/>'
            f'<text x="{tx:.1f}" y="{axis_y + 14}" class="t">{tick:g}</text>'
        )
    parts.append(
        f'<text x="{(left + width - right) / 2:.0f}" y="{axis_y + 28}" class="t">time per call '
        f"({unit})</text>"
    )
    for index, (name, values, color) in enumerate(rows):
        cy = top + row_h * index + row_h / 2
        scaled = sorted(v / scale for v in values)
        q1, median, q3 = (_quantile(scaled, p) for p in (0.25, 0.5, 0.75))
        p5, p95 = _quantile(scaled, 0.05), _quantile(scaled, 0.95)
        outline, outside = _density_outline(scaled, x, (x0, x1), cy)
        parts.append(
            f'<text x="{left - 8}" y="{cy + 4:.1f}" class="r">{name}</text>'
            f'<path d="{outline}" fill="{color}" fill-opacity="0.22"/>'
            f'<path d="M{x(p5):.1f} {cy:.1f}H{x(p95):.1f}" stroke="{color}"/>'
            f'<rect x="{x(q1):.1f}" y="{cy - 5:.1f}" width="{max(x(q3) - x(q1), 1):.1f}" '
            f'height="10" fill="{color}" fill-opacity="0.5" stroke="{color}"/>'
            f'<path d="M{x(median):.1f} {cy - 11:.1f}V{cy + 11:.1f}" stroke="{color}" '
            'stroke-width="2.5">'
            f"<title>{name}: median {median:.4g} {unit}, quartiles {q1:.4g}-{q3:.4g}, "
            f"n={len(scaled)}</title></path>"
        )
        if outside:
            parts.append(
                f'<text x="{width - right + 4}" y="{cy + 4:.1f}" class="o">{outside} '
                f"off-scale<title>{outside} "
                f"replicate(s) outside the 1st-99th percentile range shown</title></text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def delta_bars_svg(
    items: Sequence[tuple[str, float]],
    unit: str,
    width: int = 440,
    label_width: int = 190,
    neutral: bool = False,
) -> str:
    """Horizontal bars around zero: red for more work than the baseline, green for less
    (``neutral``: plain counts without a baseline, in one colour)."""
    if not items:
        return '<p class="meta">no changes</p>'
    items = [(name, value) for name, value in items]
    bar_h, top = 18, 6
    height = top + bar_h * len(items) + 22
    largest = max((abs(v) for _, v in items if finite(v)), default=1.0) or 1.0
    mid = label_width + (width - label_width - 70) / 2
    half = (width - label_width - 70) / 2
    parts = [
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="deltas">'
    ]
    parts.append(
        f'<line x1="{mid:.1f}" y1="{top - 2}" x2="{mid:.1f}" y2="{top + bar_h * len(items)}" '
        'stroke="#9aa3b2"/>'
    )
    for index, (name, value) in enumerate(items):
        y = top + index * bar_h
        if not finite(value):  # NaN or inf from a baseline: a label, no bar
            parts.append(
                f'<text x="{label_width - 6}" y="{y + 13}" font-size="10.5" text-anchor="end" '
                f'fill="#1d2330">{_e(name[-30:])}</text><text x="{mid + 4:.1f}" y="{y + 13}" '
                f'font-size="10">{_e(safe_number(value))}</text>'
            )
            continue
        length = abs(value) / largest * half
        bx = mid if value >= 0 else mid - length
        color = _CURRENT if neutral else _MORE if value > 0 else _LESS
        short = name if len(name) <= 30 else "…" + name[-29:]
        parts.append(
            f'<text x="{label_width - 6}" y="{y + 13}" font-size="10.5" text-anchor="end" '
            f'fill="#1d2330">{_e(short)}<title>{_e(name)}</title></text>'
        )
        parts.append(
            f'<rect x="{bx:.1f}" y="{y + 3}" width="{max(length, 1):.1f}" height="{bar_h - 6}" '
            f'fill="{color}" rx="2"/>'
        )
        sign = "" if neutral else "+"
        text = f"{value:{sign},.0f}" if abs(value) >= 100 else f"{value:{sign}g}"
        tx = mid + length + 4 if value >= 0 else mid - length - 4
        anchor = "start" if value >= 0 else "end"
        if value < 0 and tx - 60 < label_width:
            tx, anchor = mid + 4, "start"
        parts.append(
            f'<text x="{tx:.1f}" y="{y + 13}" font-size="10" text-anchor="{anchor}" '
            f'fill="#3b4252">{_e(text)}</text>'
        )
    parts.append(
        f'<text x="{mid:.1f}" y="{height - 4}" font-size="10" text-anchor="middle" '
        f'fill="#5b6475">{_e(unit)}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _status_pill(verdict: Verdict) -> str:
    color = _COLORS.get(verdict.status, "#607d8b")
    delta = safe_delta(verdict)
    text = f"{verdict.metric}: {verdict.status}"
    if delta is not None and verdict.status not in (NEW, NOT_COMPARABLE):
        text += f" {format_delta(delta)}"
    if verdict.failed:
        text += " ✗"
    elif waived(verdict):
        text += " (waived)"
    return f'<span style="background:{color}" title="{_e(verdict.summary)}">{_e(text)}</span>'


def _trace_href(trace: object, base: Path | None) -> str:
    """Where a trace link points: http(s) URLs stay; a file beside the report (``base``, the
    report's folder) becomes a relative link, so report and traces can be uploaded and opened
    together; other absolute files become file:// URLs; anything else is percent-quoted (no
    ``javascript:``)."""
    target = str(trace)
    if target.startswith(("https://", "http://", "file://")):
        return target
    path = Path(target)
    if path.is_absolute():
        if base is not None:
            try:
                return urllib.parse.quote(os.path.relpath(path, base).replace(os.sep, "/"))
            except ValueError:  # another drive (Windows)
                pass
        return path.as_uri()
    return urllib.parse.quote(target.replace(os.sep, "/"))


def _profiles_html(result: BenchmarkResult, base: Path | None) -> str:
    """Each profile of a result (``--bench-profile``, ``bench_profiler``): a link to its trace and
    its top ops by self CPU time."""
    parts = []
    for profile in profiles_of(result):
        trace = profile.get("trace")
        source = _e(profile.get("source") or "profile")
        if trace:
            link = (
                f'<a href="{_e(_trace_href(trace, base))}">{_e(Path(str(trace)).name or trace)}</a>'
            )
        else:
            link = f"no trace ({_e(profile.get('error') or 'not written')})"
        rows = "".join(
            f"<tr><td>{_e(name)}</td><td>{_e(calls)}</td><td>{_e(self_us)}</td></tr>"
            for name, calls, self_us in top_ops_of(profile)
        )
        table = (
            f"<table><thead><tr><th>op</th><th>calls</th><th>self CPU (us)</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            if rows
            else ""
        )
        parts.append(f'<div class="meta">profiler trace ({source}): {link}</div>{table}')
    return "".join(parts)


def _draw(part: Heading | Distribution | Bars) -> str:
    """One part of a metric's plot (``Metric.figures``), drawn: metrics say what, this draws."""
    if isinstance(part, Heading):
        return f"<h3>{_e(part.text)}</h3>"
    if isinstance(part, Distribution):
        return strip_box_svg(part.current, part.baseline)
    kwargs = {} if part.label_width is None else {"label_width": part.label_width}
    return delta_bars_svg(part.items, part.axis, neutral=part.neutral, **kwargs)


def _card(
    result: BenchmarkResult,
    baseline: BenchmarkResult | None,
    verdicts: Sequence[Verdict],
    top: int,
    base: Path | None,
) -> str:
    status = worst_status(verdicts)
    anchor = _anchor(result.key)
    group = group_of(result)
    meta = " · ".join(
        _e(p)
        for p in (
            group and f"group {group}",
            result.label,
            result.sub_label,
            result.description,
            result.module,
        )
        if p
    )
    parts = [
        f'<section class="card {status}" id="{anchor}" data-s="{_e(status)}" data-g="{_e(group)}">'
        f'<h2>{_e(result.key)}</h2><div class="meta">{meta}</div>',
        '<div class="pills">' + "".join(_status_pill(v) for v in verdicts) + "</div>",
    ]
    plots: list[str] = []
    # A benchmark that did not change needs no function bars: its card stays short.
    changed = status in (REGRESSION, IMPROVEMENT)
    for name in sorted(result.metrics, key=metric_rank):
        found = registry.find(name, Display)
        if found is None:
            continue
        then = baseline.metrics.get(name) if baseline is not None else None
        for plot in found.figures(result.metrics[name], then, changed, top):
            plots.append("".join(_draw(part) for part in plot))
    if plots:
        parts.append(
            '<div class="plots">'
            + "".join(f'<div class="plot">{p}</div>' for p in plots)
            + "</div>"
        )
    for verdict in (v for v in verdicts if v.details and v.status != UNCHANGED):
        parts.append(
            f'<h3 class="meta">{_e(verdict.metric)}: {_e(verdict.summary)}</h3>'
            f"<pre>{_e_lines(verdict.details)}</pre>"
        )
    parts.append(_profiles_html(result, base))
    parts.append("</section>")
    return "".join(parts)


def _overview(
    results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict], grouped: bool
) -> str:
    """One sortable, filterable table: a row per benchmark and metric, regressions first. Cells
    carry their sort value in ``data-v`` (numbers sort as numbers, text as text)."""
    results_by_key = {r.key: r for r in results}
    rows: list[tuple[int, str, str, int, str]] = []
    entries: list[tuple[str, Verdict]] = [(v.key, v) for v in verdicts]
    entries.extend((result.key, verdict) for result, verdict in unjudged(results, verdicts))
    for key, verdict in entries:
        found = results_by_key.get(key)
        current = verdict.current
        if current is None and found is not None and verdict.metric in found.metrics:
            try:
                current = metric_value(verdict.metric, found.metrics[verdict.metric])
            except (KeyError, AttributeError, TypeError, ValueError):
                current = None
        delta = safe_delta(verdict)
        group = group_of(found)
        color = _COLORS.get(verdict.status, "#607d8b")
        link = f'<a href="#{_anchor(key)}">{_e(key)}</a>' if found is not None else _e(key)
        cells = [f'<td class="key" data-v="{_e(key)}">{link}</td>']
        if grouped:
            cells.append(f'<td data-v="{_e(group)}">{_e(group)}</td>')
        cells += [
            f"<td>{_e(verdict.metric)}</td>",
            f'<td class="status" data-v="{status_rank(verdict.status)}" '
            f'style="color:{color}">{_e(verdict.status)}'
            f"{' (failed)' if verdict.failed else ''}</td>",
            _num_cell(verdict.metric, verdict.baseline),
            _num_cell(verdict.metric, current),
            f'<td class="num" data-v="{_sort_number(delta)}">'
            f"{_e(format_delta(delta) if delta is not None else '')}</td>",
        ]
        rows.append(
            (
                status_rank(verdict.status) - (1 if verdict.failed else 0),
                group,
                key,
                metric_rank(verdict.metric),
                f'<tr data-s="{_e(verdict.status)}" data-g="{_e(group)}">'
                + "".join(cells)
                + "</tr>",
            )
        )
    rows.sort(key=lambda r: (r[0], r[1], natural_key(r[2]), r[3]))
    head = [
        "benchmark",
        *(["group"] if grouped else []),
        "metric",
        "verdict",
        "baseline",
        "current",
        "delta",
    ]
    return (
        '<div class="scroll"><table id="overview"><thead><tr>'
        + "".join(f'<th title="sort">{h}</th>' for h in head)
        + "</tr></thead><tbody>"
        + "".join(r[4] for r in rows)
        + "</tbody></table></div>"
    )


def _sort_number(value: float | None) -> str:
    return repr(float(value)) if value is not None and finite(value) else ""


def _num_cell(metric: str, value: float | None) -> str:
    return (
        f'<td class="num" data-v="{_sort_number(value)}">'
        f"{_e(format_value(metric, value) if value is not None else '')}</td>"
    )


def _e_lines(lines: Sequence[object]) -> str:
    return "\n".join(_e(line) for line in lines)


#: Sorting (click a column head; again to reverse) and filtering (text, verdict, group) of the
#: overview table; the filter also hides the cards of rows it hides (a card with no row, such as a
#: test that only profiled, stays). No network, no libraries.
#: The URL can preset them, so a CI link can point at the bad news:
#: ``report.html?verdict=regression``, ``?q=resize&group=geometry``, ``?sort=delta&desc``.
_SCRIPT = """
(function(){
var t=document.getElementById('overview');if(!t)return;var b=t.tBodies[0];
var q=document.getElementById('q'),s=document.getElementById('fs'),g=document.getElementById('fg');
function val(r,i){var c=r.cells[i],v=c.getAttribute('data-v');if(v===null)v=c.textContent;
 var n=parseFloat(v);return v!==''&&!isNaN(n)&&isFinite(v)?n:v.toLowerCase();}
Array.prototype.forEach.call(t.tHead.rows[0].cells,function(h,i){h.addEventListener('click',function(){
 var d=h.getAttribute('data-d')==='1'?-1:1;Array.prototype.forEach.call(t.tHead.rows[0].cells,function(o){o.removeAttribute('data-d');o.className='';});
 h.setAttribute('data-d',d===1?'1':'-1');h.className=d===1?'up':'down';
 var rows=Array.prototype.slice.call(b.rows);rows.sort(function(x,y){var a=val(x,i),c=val(y,i);
  if(a===''&&c!=='')return 1;if(c===''&&a!=='')return -1;
  if(typeof a!==typeof c){a=String(a);c=String(c);}return a<c?-d:a>c?d:0;});
 rows.forEach(function(r){b.appendChild(r);});});});
function apply(){var text=q.value.toLowerCase(),st=s.value,gr=g?g.value:'',shown={},n=0;
 Array.prototype.forEach.call(b.rows,function(r){var ok=(!text||r.textContent.toLowerCase().indexOf(text)>=0)
  &&(!st||r.getAttribute('data-s')===st)&&(!gr||r.getAttribute('data-g')===gr);
  r.style.display=ok?'':'none';if(ok){n++;var a=r.querySelector('a');if(a)shown[a.getAttribute('href').slice(1)]=1;}});
 var listed={};Array.prototype.forEach.call(b.rows,function(r){var a=r.querySelector('a');if(a)listed[a.getAttribute('href').slice(1)]=1;});
 Array.prototype.forEach.call(document.querySelectorAll('section.card[id]'),function(c){c.style.display=shown[c.id]||!listed[c.id]?'':'none';});
 document.getElementById('count').textContent=n+' of '+b.rows.length+' rows';}
q.addEventListener('input',apply);s.addEventListener('change',apply);if(g)g.addEventListener('change',apply);
var p=new URLSearchParams(location.search);q.value=p.get('q')||'';s.value=p.get('verdict')||'';if(g)g.value=p.get('group')||'';
Array.prototype.forEach.call(t.tHead.rows[0].cells,function(h){if(h.textContent===p.get('sort')){h.click();if(p.has('desc'))h.click();}});
apply();
})();
"""


@dataclasses.dataclass(frozen=True)
class HtmlPage:
    """How the page is laid out: its title, how many top ops each card lists, and ``base``, the
    folder it is written to (trace links under it become relative)."""

    title: str = "torchbench report"
    top: int = 10
    base: Path | None = None


#: The pill of each status counted in the header, in this order.
_PILL_WORDS = {
    REGRESSION: "regressed",
    TOO_NOISY: "too noisy to judge",
    NOISY: "noisy (not failed)",
    ACCEPTED: "accepted",
    IMPROVEMENT: "improved",
    NOT_COMPARABLE: "not comparable",
    NEW: "new",
    MISSING: "missing",
    UNCHANGED: "unchanged",
    "measured": "measured",
}


def render(
    results: Sequence[BenchmarkResult],
    verdicts: Sequence[Verdict],
    baseline: Mapping[str, BenchmarkResult] | None,
    baseline_name: str | None,
    baseline_source: str | None = None,
    *,
    page: HtmlPage = HtmlPage(),
    failed_tests: Collection[str] = (),
) -> str:
    """The whole report as one HTML string; ``baseline`` maps keys to baseline entries; ``page``:
    its title, top ops and folder; ``failed_tests``: the benchmark tests pytest failed (counted as
    failed; those that measured nothing are listed)."""
    counts = count_tests(results, verdicts, failed_tests)
    subtitle = _subtitle(results, baseline_name, baseline_source) + _warnings(
        unmeasured_failures(results, verdicts, failed_tests), counts
    )
    by_key = verdicts_by_key(verdicts)
    groups = sorted({group_of(r) for r in results} - {""})
    ordered = sorted(
        results,
        key=lambda r: (status_rank(worst_status(by_key.get(r.key, []))), group_of(r), r.key),
    )
    cards = "".join(
        _card(r, (baseline or {}).get(r.key), by_key.get(r.key, []), page.top, page.base)
        for r in ordered
    )
    title = page.title
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<header><h1>{_e(title)}</h1><p>{subtitle}</p>"
        f'<div class="pills" style="margin-top:8px">{_pills(counts)}</div></header>'
        f'<main><section class="card"><h2>overview (click a column to sort)</h2>'
        f"{_controls(results, verdicts, groups)}"
        f"{_overview(results, verdicts, bool(groups))}</section>"
        f"{cards}</main>"
        f"<footer>pytest-torchbench {_e(__version__)} · self-contained report: one inline "
        "script, no network</footer>"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


def _subtitle(
    results: Sequence[BenchmarkResult], baseline_name: str | None, baseline_source: str | None
) -> str:
    """What was measured, and against which baseline."""
    measured = (
        f"{len(results)} benchmark(s) measured in "
        f"{len({nodeid_of(r.key) for r in results})} test(s)"
    )
    return (
        f"{measured}, compared with baseline <b>{_e(baseline_name)}</b>"
        + (f" ({_e(baseline_source)})" if baseline_source else "")
        + "; badges count tests"
        if baseline_name
        else f"{measured}; no baseline" + (f"; {_e(baseline_source)}" if baseline_source else "")
    )


def _warnings(unmeasured: Sequence[str], counts: Mapping[str, int]) -> str:
    """The subtitle's lines about tests that failed before measuring and tests that were noisy."""
    text = ""
    if unmeasured:
        text += (
            f'<br><b style="color:#b71c1c">{len(unmeasured)} benchmark test(s) failed before '
            "measuring</b>: "
            + ", ".join(_e(nodeid) for nodeid in unmeasured[:50])
            + (f" and {len(unmeasured) - 50} more" if len(unmeasured) > 50 else "")
            + " (see the test log)"
        )
    if counts.get(NOISY):
        text += (
            f'<br><b style="color:{_COLORS[NOISY]}">{counts[NOISY]} test(s) noisy</b>: '
            "slower than the limit, by no more than the machine explains (busy, slower than when "
            "the baseline was saved, or a launch-bound benchmark whose device time held) or not "
            "measured again by a fresh process; not failed, rerun (their cards, listed after the "
            "regressions, give the numbers)"
        )
    return text


def _pills(counts: Mapping[str, int]) -> str:
    """One coloured badge per status that some test ended with, the failed ones first."""
    pills = "".join(
        f'<span style="background:{_COLORS.get(s, "#607d8b")}" '
        f'title="tests whose worst verdict is {s}">'
        f"{counts[s]} {word}</span>"
        for s, word in _PILL_WORDS.items()
        if counts.get(s)
    )
    if counts.get("failed"):
        pills = (
            '<span style="background:#b71c1c" title="tests that failed the gate">'
            f"{counts['failed']} failed</span>" + pills
        )
    return pills


def _controls(
    results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict], groups: Sequence[str]
) -> str:
    """The overview's filters: free text, one verdict, one group (when there are groups)."""
    judged = {(v.key, v.metric) for v in verdicts}
    unjudged = any((r.key, m) not in judged for r in results for m in r.metrics)
    statuses = sorted(
        {v.status for v in verdicts} | ({"measured"} if unjudged else set()), key=status_rank
    )
    return (
        '<div class="controls">'
        '<input id="q" type="search" placeholder="filter: name, metric, verdict…" size="40">'
        '<select id="fs"><option value="">every verdict</option>'
        + "".join(f'<option value="{_e(st)}">{_e(st)}</option>' for st in statuses)
        + "</select>"
        + (
            '<select id="fg"><option value="">every group</option>'
            + "".join(f'<option value="{_e(g)}">{_e(g)}</option>' for g in groups)
            + "</select>"
            if groups
            else ""
        )
        + '<span id="count" class="meta"></span></div>'
    )


def write(path: Path, text: str) -> None:
    """Atomically; a path that is not a regular file raises ReportPathError (an OSError)."""
    from ..store.storage import atomic_write_many
    from .paths import check_report_path

    target = check_report_path(path)
    assert target is not None
    atomic_write_many({target: text})
