"""``torchbench history`` as text, JSON, CSV and one self-contained HTML page (a line per
benchmark and metric, steps marked with their commit, creep and environment breaks shown)."""

from __future__ import annotations

import csv
import datetime
import html
import io
import json
from collections.abc import Sequence
from typing import Any

from ..common.text import natural_key, safe_number, safe_text
from ..common.vocabulary import format_percent
from ..judging.history import UP, Point, Series
from ..metrics import registry
from ..metrics.display import Display

__all__ = ["ordered", "text_lines", "to_json", "to_csv", "to_html"]


def ordered(series: Sequence[Series]) -> list[Series]:
    """Series with a step up or creep first, then those with any mark, then the rest; natural order
    within."""

    def rank(s: Series) -> int:
        if any(p.step == UP for p in s.points) or any(drift > 0 for *_, drift in s.creep):
            return 0
        return 1 if s.steps or s.creep or any(p.breaks for p in s.points) else 2

    return sorted(series, key=lambda s: (rank(s), natural_key(s.key), s.metric))


def _value(metric: str, number: float) -> str:
    found = registry.find(metric, Display)
    return found.format_value(number) if found is not None else safe_number(number)


def _commit(point_or_commit: Any) -> str:
    commit = getattr(point_or_commit, "commit", point_or_commit)
    return f"{commit.sha[:12]} ({safe_text(commit.subject)[:72]})"


def text_lines(series: Sequence[Series], set_name: str, commits: int) -> list[str]:
    """The terminal's account: one line of counts, then each step, creep and break."""
    steps = sum(len(s.steps) for s in series)
    creeping = sum(1 for s in series if s.creep)
    lines = [
        f"history of baseline set '{safe_text(set_name)}': {commits} commit(s), {len(series)} "
        f"series; {steps} step(s) beyond the limit, {creeping} creeping"
    ]
    for s in ordered(series):
        name = f"{safe_text(s.key)} [{s.metric}]"
        for before, point in zip((None, *s.points), s.points):
            if point.step is not None and point.change is not None:
                lines.append(
                    f"  step   {name}: {format_percent(point.change)} (limit {s.limit * 100:g}%) "
                    f"to {_value(s.metric, point.value)} at {_commit(point)}"
                )
            if point.breaks and before is not None:
                lines.append(
                    f"  break  {name}: environment changed at {_commit(point)} "
                    f"({safe_text(_changed_facts(before, point))}): not compared across it"
                )
        for first, last, drift in s.creep:
            lines.append(
                f"  creep  {name}: {format_percent(drift)} from {first.sha[:12]} to "
                f"{last.sha[:12]} in steps that each stayed within {s.limit * 100:g}%"
            )
    return lines


def _changed_facts(before: Point, after: Point) -> str:
    """``torch: 2.13.0+cpu -> 2.14.0+cpu``: the facts that differ across a break."""
    then = dict(before.environment)
    return "; ".join(
        f"{k}: {then.get(k, '-')} -> {v}" for k, v in after.environment if then.get(k, "-") != v
    )


def _point_json(point: Point) -> dict[str, Any]:
    return {
        "commit": point.commit.sha,
        "time": point.commit.time,
        "subject": point.commit.subject,
        "value": point.value,
        "spread": point.spread,
        "environment": dict(point.environment),
        "change": point.change,
        "step": point.step,
        "environment_break": point.breaks,
    }


def to_json(series: Sequence[Series], set_name: str, skipped: Sequence[str]) -> str:
    return json.dumps(
        {
            "set": set_name,
            "skipped_commits": list(skipped),
            "series": [
                {
                    "key": s.key,
                    "metric": s.metric,
                    "limit": s.limit,
                    "points": [_point_json(p) for p in s.points],
                    "creep": [
                        {"from": a.sha, "to": b.sha, "change": drift} for a, b, drift in s.creep
                    ],
                }
                for s in ordered(series)
            ],
        },
        indent=1,
        sort_keys=True,
    )


def to_csv(series: Sequence[Series]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "key",
            "metric",
            "commit",
            "date",
            "subject",
            "value",
            "spread",
            "change",
            "mark",
            "environment",
        ]
    )
    for s in ordered(series):
        for p in s.points:
            mark = f"step {p.step}" if p.step else "environment break" if p.breaks else ""
            date = datetime.datetime.fromtimestamp(p.commit.time, datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M"
            )
            writer.writerow(
                [
                    s.key,
                    s.metric,
                    p.commit.sha,
                    date,
                    p.commit.subject,
                    repr(p.value),
                    "" if p.spread is None else repr(p.spread),
                    "" if p.change is None else repr(p.change),
                    mark,
                    ";".join(f"{k}={v}" for k, v in p.environment),
                ]
            )
    return out.getvalue()


_W, _H, _PAD = 720.0, 170.0, 36.0
_STYLE = """body{font:14px system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin:12px 0}.card h2{font-size:15px;margin:0 0 6px}
.note{color:#555;font-size:13px}.up{color:#c62828}.down{color:#2e7d32}.creep{color:#ef6c00}svg{display:block}"""


def _chart(s: Series) -> str:
    values = [p.value for p in s.points]
    spreads = [p.spread or 0.0 for p in s.points]
    low = min(v - d / 2 for v, d in zip(values, spreads))
    high = max(v + d / 2 for v, d in zip(values, spreads))
    if high == low:
        high, low = high + (abs(high) * 0.05 or 1.0), low - (abs(low) * 0.05 or 1.0)
    n = len(s.points)

    def x(i: int) -> float:
        return _PAD + (i * (_W - 2 * _PAD) / max(n - 1, 1))

    def y(v: float) -> float:
        return _H - _PAD / 2 - (v - low) / (high - low) * (_H - _PAD)

    parts = [f'<svg width="{_W:.0f}" height="{_H:.0f}" role="img">']
    parts.append(
        f'<text x="2" y="{y(high) + 4:.1f}" '
        f'font-size="10">{html.escape(_value(s.metric, high))}</text>'
    )
    parts.append(
        f'<text x="2" y="{y(low):.1f}" font-size="10">{html.escape(_value(s.metric, low))}</text>'
    )
    segments: list[list[str]] = []
    for i, p in enumerate(s.points):
        if p.breaks:  # another environment: a line of its own, not a step
            parts.append(
                f'<line x1="{x(i) - 4:.1f}" x2="{x(i) - 4:.1f}" y1="4" y2="{_H - 4:.0f}" '
                'stroke="#8d6e63" stroke-dasharray="4 3"><title>environment changed at '
                f"{html.escape(_commit(p))}</title></line>"
            )
        if p.breaks or not segments:
            segments.append([])
        segments[-1].append(f"{x(i):.1f},{y(p.value):.1f}")
        if p.spread:
            parts.append(
                f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(p.value - p.spread / 2):.1f}" '
                f'y2="{y(p.value + p.spread / 2):.1f}" stroke="#90a4ae"/>'
            )
    d = " ".join("M" + " L".join(segment) for segment in segments)
    parts.append(f'<path d="{d}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
    for i, p in enumerate(s.points):
        color = "#c62828" if p.step == UP else "#2e7d32" if p.step else "#1f77b4"
        radius = 5 if p.step else 2.5
        change = f" ({format_percent(p.change)})" if p.change is not None else ""
        tip = f"{_commit(p)}: {_value(s.metric, p.value)}{change}"
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="{radius}" fill="{color}">'
            f"<title>{html.escape(tip)}</title></circle>"
        )
    first, last = s.points[0].commit, s.points[-1].commit
    parts.append(
        f'<text x="{_PAD:.0f}" y="{_H - 1:.0f}" font-size="10">{html.escape(first.sha[:12])}</text>'
    )
    if n > 1:
        parts.append(
            f'<text x="{x(n - 1):.0f}" y="{_H - 1:.0f}" font-size="10" text-anchor="end">'
            f"{html.escape(last.sha[:12])}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def to_html(series: Sequence[Series], set_name: str, commits: int, skipped: Sequence[str]) -> str:
    cards = []
    for s in ordered(series):
        notes = []
        for p in s.steps:
            kind = "up" if p.step == UP else "down"
            notes.append(
                f'<div class="note {kind}">step {html.escape(format_percent(p.change or 0.0))} at '
                f"{html.escape(_commit(p))}</div>"
            )
        for first, last, drift in s.creep:
            notes.append(
                f'<div class="note creep">creep {html.escape(format_percent(drift))} from '
                f"{html.escape(first.sha[:12])} to {html.escape(last.sha[:12])}, every step within "
                f"{s.limit * 100:g}%</div>"
            )
        for before, p in zip(s.points, s.points[1:]):
            if p.breaks:
                notes.append(
                    f'<div class="note">environment break at {html.escape(_commit(p))} '
                    f"({html.escape(_changed_facts(before, p))})</div>"
                )
        cards.append(
            f'<div class="card"><h2>{html.escape(s.key)} <small>{html.escape(s.metric)}, limit '
            f"{s.limit * 100:g}%</small></h2>{_chart(s)}{''.join(notes)}</div>"
        )
    skipped_html = "".join(f'<div class="note">{html.escape(line)}</div>' for line in skipped)
    header = html.escape(text_lines(series, set_name, commits)[0])
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>torchbench history: '
        f"{html.escape(set_name)}</title><style>{_STYLE}</style></head><body><h1>{header}</h1>"
        f"{skipped_html}{''.join(cards)}</body></html>\n"
    )
