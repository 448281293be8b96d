"""Markdown summary: for GitHub Actions job summaries (``GITHUB_STEP_SUMMARY``) and
``--bench-markdown``.

Why this layout: a reviewer opening a pull request's checks wants the bad news first, so one
Markdown table (benchmark, baseline, current, delta, verdict) lists every change, regressions first,
then improvements, environments that did not match, new and missing benchmarks; each regression's
explanation (the functions whose instruction counts changed, the aten ops whose call counts changed)
is folded under ``<details>``; the unchanged rows (most of a 300-benchmark suite) come last, folded.
Only GitHub-flavoured Markdown tables and the ``<details>`` element are used, both rendered by
GitHub's job summary. Every text from a result or a baseline goes through ``text.markdown_text``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from ..common.text import markdown_code_block, markdown_text, natural_key
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
    FAILED_BEFORE_MEASURING,
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
)

_ICONS = {
    REGRESSION: ":red_circle:",
    IMPROVEMENT: ":green_circle:",
    NOT_COMPARABLE: ":grey_question:",
    NEW: ":new:",
    MISSING: ":ghost:",
    UNCHANGED: ":white_circle:",
    NOISY: ":warning:",
    TOO_NOISY: ":grey_exclamation:",
    ACCEPTED: ":ballot_box_with_check:",
}
_WORDS = {
    REGRESSION: "regressed",
    IMPROVEMENT: "improved",
    NOT_COMPARABLE: "not comparable",
    NEW: "new",
    MISSING: "missing",
    UNCHANGED: "unchanged",
    "measured": "measured",
    NOISY: "noisy (not failed)",
    TOO_NOISY: "too noisy to judge",
    FAILED_BEFORE_MEASURING: FAILED_BEFORE_MEASURING,
    ACCEPTED: "accepted",
}

#: GitHub rejects a pull-request comment (and truncates a job summary) over 65,536 characters;
#: the summary stays under this, with room for a bot's header around it.
MAX_CHARS = 60_000
#: At most this many failed-before-measuring tests are named (pytest's own log names them all).
LISTED_FAILURES = 50


def _explaining() -> tuple[tuple[str, str], ...]:
    """Metrics whose verdict details explain a regression of any metric of the same benchmark
    (``Metric.explains``: function counts, op counts), with their titles."""
    return tuple((m.name, m.explains) for m in registry.all_metrics(Display) if m.explains)


def _escape(text: str) -> str:
    """Table cells and lines: see :func:`text.markdown_text` (control characters, workflow
    commands, Markdown and HTML syntax, ``|``)."""
    return markdown_text(text)


def _explanation(key: str, regressed: list[Verdict], by_key: dict[str, list[Verdict]]) -> list[str]:
    """The folded block under one regressed benchmark: each regressed metric's summary and details,
    then the function- and op-level explanations (shown once, whichever metric regressed)."""
    blocks: list[tuple[str, Sequence[str]]] = []
    explaining = _explaining()
    for verdict in regressed:
        if verdict.metric not in dict(explaining) and verdict.details:
            blocks.append((f"{verdict.metric} details", verdict.details))
    for metric, title in explaining:
        for other in by_key.get(key, []):
            if other.metric == metric and other.details and other.status not in (NOT_COMPARABLE,):
                blocks.append((title, other.details))
    what = ", ".join(f"{_escape(v.metric)} {format_delta(safe_delta(v))}" for v in regressed)
    lines = [f"<details><summary>{_escape(key)}: {what}</summary>", ""]
    for verdict in regressed:
        if verdict.summary:
            lines += [
                _escape(verdict.summary) + ("  " if verdict is not regressed[-1] else ""),
            ]
    lines.append("")
    for title, details in blocks:
        lines += [f"**{_escape(title)}**", "", *markdown_code_block([str(d) for d in details]), ""]
    lines += ["</details>", ""]
    return lines


def _noisy(noisy: list[Verdict], heading: str | None = None) -> list[str]:
    """Verdicts the machine made undecidable (listed, not failed): busy, slower as a whole than
    when the baseline was saved, a launch-bound benchmark's wall time with its device time held, or
    a slowdown a fresh process did not measure again; each with the
    numbers that say which, so a reader can judge whether to rerun. ``heading``: another title
    (too noisy to judge: alternated rounds that decide nothing at the limit)."""
    if not noisy:
        return []
    lines = [
        heading
        or (
            f"### Noisy ({len(noisy)}): not failed, the machine cannot be told from the code "
            "(busy, slower, launch-bound with its device time held, or not measured again in a "
            "fresh process: each says which); rerun"
        ),
        "",
    ]
    for verdict in noisy:
        lines += [
            f"<details><summary>{_escape(verdict.key)}: {_escape(verdict.metric)} "
            f"{format_delta(safe_delta(verdict))}</summary>",
            "",
            _escape(verdict.summary),
            "",
        ]
        if verdict.details:
            lines += [*markdown_code_block([str(d) for d in verdict.details]), ""]
        lines += ["</details>", ""]
    return lines


def _rows(
    results: Sequence[BenchmarkResult], verdicts: Sequence[Verdict]
) -> list[tuple[str, str, Verdict]]:
    """(group, key, verdict) for every verdict, plus a pseudo-verdict ("measured") for each metric
    of a result that was not judged (no baseline); sorted regressions first, then group, key,
    metric."""
    results_by_key = {r.key: r for r in results}
    rows = []
    for verdict in verdicts:
        result = results_by_key.get(verdict.key)
        if verdict.current is None and result is not None and verdict.metric in result.metrics:
            try:  # a new benchmark's verdict carries no value: show what was measured
                current = metric_value(verdict.metric, result.metrics[verdict.metric])
                verdict = dataclasses.replace(verdict, current=current)
            except (KeyError, AttributeError, TypeError, ValueError):
                pass
        rows.append((group_of(result), verdict.key, verdict))
    rows.extend(
        (group_of(result), result.key, verdict) for result, verdict in unjudged(results, verdicts)
    )
    rows.sort(
        key=lambda r: (status_rank(r[2].status), r[0], natural_key(r[1]), metric_rank(r[2].metric))
    )
    return rows


def _table(rows: list[tuple[str, str, Verdict]], grouped: bool) -> list[str]:
    head = ["benchmark", "metric", "baseline", "current", "delta", "verdict"]
    if grouped:
        head.insert(0, "group")
    lines = [
        "| " + " | ".join(head) + " |",
        "|"
        + "|".join(
            " --- " if h in ("benchmark", "group", "metric", "verdict") else " ---: " for h in head
        )
        + "|",
    ]
    for group, key, verdict in rows:
        status = verdict.status
        word = _WORDS.get(status, _escape(status))
        cell = f"{_ICONS.get(status, '')} {word}".strip() + (
            " **FAILED**" if verdict.failed else " (waived)" if waived(verdict) else ""
        )
        values = [
            _escape(key),
            _escape(verdict.metric),
            format_value(verdict.metric, verdict.baseline),
            format_value(verdict.metric, verdict.current),
            format_delta(safe_delta(verdict)),
            cell,
        ]
        if grouped:
            values.insert(0, _escape(group) if group else "")
        lines.append("| " + " | ".join(values) + " |")
    return lines


def _profiles(results: Sequence[BenchmarkResult]) -> list[str]:
    """One folded block listing every profile (``--bench-profile`` and ``bench_profiler``): where
    its trace is and its top ops by self CPU time."""
    profiled = [(result, profile) for result in results for profile in profiles_of(result)]
    if not profiled:
        return []
    lines = [
        f"<details><summary>Profiles ({len(profiled)}): traces and top ops by self CPU "
        "time</summary>",
        "",
    ]
    for result, profile in profiled:
        trace = profile.get("trace")
        # Escaped text, not a code span: a code span shows escapes (``\\_``, ``&lt;``) literally.
        where = (
            _escape(trace)
            if trace
            else f"no trace ({_escape(profile.get('error') or 'not written')})"
        )
        lines += [
            f"**{_escape(result.key)}** ({_escape(profile.get('source') or 'profile')}): {where}",
            "",
        ]
        rows = top_ops_of(profile)
        if rows:
            lines += ["| op | calls | self CPU (us) |", "| --- | ---: | ---: |"]
            lines += [f"| {_escape(name)} | {calls} | {self_us} |" for name, calls, self_us in rows]
            lines.append("")
    lines += ["</details>", ""]
    return lines


@dataclasses.dataclass(frozen=True)
class _Cuts:
    """What a summary leaves out to stay under the limit: the folded table of the other rows, the
    profiles, the explanations beyond ``max_why`` and the changed rows beyond ``max_changed`` (None:
    all of them)."""

    keep_rest: bool = True
    keep_profiles: bool = True
    max_why: int | None = None
    max_changed: int | None = None


def render(
    results: Sequence[BenchmarkResult],
    verdicts: Sequence[Verdict],
    baseline_name: str | None,
    baseline_source: str | None = None,
    title: str = "torchbench",
    failed_tests: Collection[str] = (),
    max_chars: int = MAX_CHARS,
) -> str:
    """The whole summary as one Markdown string (ends with a newline), at most ``max_chars`` long.

    When the full summary is longer (a large suite with many changes), the parts a reviewer needs
    least go first: the folded table of unchanged rows, then profiles, then the explanations,
    then the changes table beyond what fits; each cut is said in one line, pointing at
    ``--bench-html``/``--bench-json`` for the rest. The counts line always stays whole."""

    def attempt(cuts: _Cuts) -> str:
        return _render(
            results, verdicts, baseline_name, baseline_source, title, failed_tests, cuts=cuts
        )

    def most(limit: int, cuts: Callable[[int], _Cuts]) -> int:
        """The largest n in [0, limit] for which the summary with ``cuts(n)`` (cutting
        explanations or changed rows to n) fits; -1 when not even 0 does."""
        low, high = -1, limit
        while low < high:
            middle = (low + high + 1) // 2
            if len(attempt(cuts(middle))) <= max_chars:
                low = middle
            else:
                high = middle - 1
        return low

    for cuts in (
        _Cuts(),
        _Cuts(keep_rest=False),
        _Cuts(keep_rest=False, keep_profiles=False),
    ):
        text = attempt(cuts)
        if len(text) <= max_chars:
            return text
    lean = _Cuts(keep_rest=False, keep_profiles=False)
    whys = most(len(results) + len(verdicts), lambda n: dataclasses.replace(lean, max_why=n))
    if whys >= 0:
        return attempt(dataclasses.replace(lean, max_why=whys))
    lean = dataclasses.replace(lean, max_why=0)
    rows = most(len(results) + len(verdicts), lambda n: dataclasses.replace(lean, max_changed=n))
    return attempt(dataclasses.replace(lean, max_changed=max(rows, 0)))


def _render(
    results: Sequence[BenchmarkResult],
    verdicts: Sequence[Verdict],
    baseline_name: str | None,
    baseline_source: str | None,
    title: str,
    failed_tests: Collection[str],
    *,
    cuts: _Cuts = _Cuts(),
) -> str:
    """The whole summary as one Markdown string (ends with a newline).

    Layout: one line of counts (tests, not verdicts); a table of every verdict that is not
    "unchanged", regressions first; each regression's explanation folded under ``<details>``; then
    all the other rows folded in a second table of the same columns. A ``group`` column appears
    when any benchmark has a group (pytest-benchmark's ``benchmark.group``)."""
    counts = count_tests(results, verdicts, failed_tests)
    lines = [f"## {_escape(title)}", ""]
    lines += [_counts_line(len(results), counts, baseline_name, baseline_source), ""]
    lines += _unmeasured(unmeasured_failures(results, verdicts, failed_tests))
    rows = _rows(results, verdicts)
    grouped = any(group for group, _, _ in rows)
    changed = [r for r in rows if r[2].status not in (UNCHANGED, "measured")]
    rest = [r for r in rows if r[2].status in (UNCHANGED, "measured")]
    cut: list[str] = []
    if cuts.max_changed is not None and len(changed) > cuts.max_changed:
        cut.append(f"{len(changed) - cuts.max_changed} more changed row(s)")
        changed = changed[: cuts.max_changed]
    if changed:
        lines += ["### Regressions and other changes", "", *_table(changed, grouped), ""]
    lines += _why(changed, verdicts, cuts.max_why, cut)
    lines += _noisy_sections([verdict for _, _, verdict in changed], cuts.max_why, cut)
    if rest and not cuts.keep_rest:
        cut.append(f"{len(rest)} unchanged row(s)")
    elif rest:
        lines += _rest(
            rest,
            grouped,
            folded=bool(changed) or baseline_name is not None,
            judged=baseline_name is not None,
        )
    if cuts.keep_profiles:
        lines += _profiles(results)
    elif _profiles(results):
        cut.append("the profiles")
    if cut:
        lines += [
            f"*Left out to stay under GitHub's 65,536-character limit: {', '.join(cut)}; the "
            "`--bench-html` and `--bench-json` reports hold everything.*",
            "",
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def _counts_line(
    measured: int, counts: Mapping[str, int], baseline_name: str | None, baseline_source: str | None
) -> str:
    """The summary's first line: passed or failed, and how many tests ended with each verdict."""
    failed = counts.get("failed", 0)
    if baseline_name is None:
        return (
            f"{counts['tests']} test(s) ({measured} benchmark(s)) measured; no baseline to "
            "compare with"
            + (f"; {_escape(baseline_source)}" if baseline_source else "")
            + (f"; :x: **{failed} test(s) failed**" if failed else "")
            + "."
        )
    state = ":x: **failed**" if failed else ":white_check_mark: passed"
    parts = [
        f"{counts[s]} {_WORDS[s]}"
        for s in (
            FAILED_BEFORE_MEASURING,
            REGRESSION,
            TOO_NOISY,
            NOISY,
            ACCEPTED,
            IMPROVEMENT,
            NOT_COMPARABLE,
            NEW,
            MISSING,
            UNCHANGED,
        )
        if counts.get(s)
    ]
    return (
        f"{state}: {counts['tests']} test(s) ({measured} benchmark(s) measured) against "
        f"baseline {_escape(baseline_name)}"
        + (f" ({_escape(baseline_source)})" if baseline_source else "")
        + (": " + ", ".join(parts) if parts else "")
        + (f"; {failed} test(s) failed" if failed else "")
        + "."
    )


def _unmeasured(unmeasured: Sequence[str]) -> list[str]:
    """The benchmark tests that failed before measuring anything, the first few by name."""
    if not unmeasured:
        return []
    return [
        f"### Failed before measuring ({len(unmeasured)}): see the test log",
        "",
        *(f"- :x: {_escape(nodeid)}" for nodeid in unmeasured[:LISTED_FAILURES]),
        *(
            [f"- ... and {len(unmeasured) - LISTED_FAILURES} more"]
            if len(unmeasured) > LISTED_FAILURES
            else []
        ),
        "",
    ]


def _why(
    changed: list[tuple[str, str, Verdict]],
    verdicts: Sequence[Verdict],
    max_why: int | None,
    cut: list[str],
) -> list[str]:
    """The explanations of the regressed benchmarks, the first ``max_why`` of them (None: all);
    what is left out is added to ``cut``."""
    by_key = verdicts_by_key(verdicts)
    regressed: dict[str, list[Verdict]] = {}
    for _, key, verdict in changed:
        if verdict.status == REGRESSION:
            regressed.setdefault(key, []).append(verdict)
    if max_why is not None and len(regressed) > max_why:
        cut.append(f"the explanations of {len(regressed) - max_why} regression(s)")
        regressed = dict(list(regressed.items())[:max_why])
    if not regressed:
        return []
    lines = [f"### Why ({len(regressed)} regressed benchmark(s))", ""]
    for key, chosen in regressed.items():
        lines += _explanation(key, chosen, by_key)
    return lines


def _noisy_sections(changed: Sequence[Verdict], max_why: int | None, cut: list[str]) -> list[str]:
    """The too-noisy, noisy and accepted verdicts' details, all left out (and said in ``cut``)
    once the explanations are cut."""
    accepted = [verdict for verdict in changed if verdict.status == ACCEPTED]
    noisy = [verdict for verdict in changed if verdict.status == NOISY]
    too_noisy = [verdict for verdict in changed if verdict.status == TOO_NOISY]
    if max_why is not None:
        if noisy or too_noisy or accepted:
            cut.append(
                f"the details of {len(noisy) + len(too_noisy) + len(accepted)} noisy or accepted "
                "verdict(s)"
            )
        return []
    return [
        *_noisy(
            too_noisy,
            f"### Too noisy to judge ({len(too_noisy)}): measured alternately with the "
            "base, its rounds decide nothing at the limit; neither failed nor passed",
        ),
        *_noisy(noisy),
        *_noisy(
            accepted,
            f"### Accepted ({len(accepted)}): slower as the change says it must be; not failed",
        ),
    ]


def _rest(
    rest: list[tuple[str, str, Verdict]], grouped: bool, *, folded: bool, judged: bool
) -> list[str]:
    """The unchanged (``judged``) or merely measured rows, folded under ``<details>`` when
    ``folded``."""
    if not folded:
        return [*_table(rest, grouped), ""]
    return [
        f"<details><summary>All other results ({len(rest)} row(s): "
        + ("unchanged" if judged else "measured")
        + ")</summary>",
        "",
        *_table(rest, grouped),
        "",
        "</details>",
        "",
    ]


def write(path: Path, text: str, append: bool = False) -> None:
    """Write (or, for GITHUB_STEP_SUMMARY, append: other steps own the rest of that file).
    A path that is not a regular file raises ReportPathError (an OSError), in both cases."""
    from .paths import check_report_path

    path = check_report_path(Path(path)) or Path(path)
    if append:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
        return
    from ..store.storage import atomic_write_many

    atomic_write_many({path: text})


def step_summary_path() -> Path | None:
    """GitHub Actions sets GITHUB_STEP_SUMMARY to a file each step may append Markdown to."""
    value = os.environ.get("GITHUB_STEP_SUMMARY", "").strip()
    return Path(value) if value else None
