"""Accepting an intended regression in the change itself: ``Bench-Accept:`` commit trailers and
``--bench-accept=SPEC``.

A pull request that must be slower (a new feature, a correctness fix) would stay red, and a team
would switch the job off. Instead the change says so where reviewers read it, in a commit:

    Bench-Accept: tests/test_perf.py::test_normalize instructions,ops -- the new check costs a copy

(test ids with ``*`` and ``?`` globs, comma-separated; metrics, comma-separated, or ``*``; a reason
after `` -- ``). CI systems that pass a pull-request label give the same text to
``--bench-accept``. A regression of a matching benchmark and metric gets its own verdict,
"accepted", with the reason and where it came from, and fails nothing; a regression of any other
benchmark or metric stays a regression; an accept that matched no regression is named at the end.
As PyTorch's dynamo ``pr_time_benchmarks`` updates its expected results in the pull request
itself, the accept lives in the change's history, and the next save on main makes the new value
the baseline.

Verdicts are never edited: :meth:`Acceptance.apply` returns new ones.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from ..common.text import one_line, safe_text
from ..common.vocabulary import ACCEPTED, REGRESSION, Verdict

__all__ = ["AcceptSpec", "AcceptError", "Acceptance", "parse_spec", "from_trailers", "TRAILER"]

#: The commit trailer's key, as ``git interpret-trailers`` writes it.
TRAILER = "Bench-Accept"
_FORM = (
    "TEST-IDS METRICS -- REASON, e.g. 'tests/test_perf.py::test_f* instructions,ops -- a copy "
    "per call'"
)


class AcceptError(ValueError):
    """An accept that cannot be read: one line saying what and how to write it."""


@dataclasses.dataclass(frozen=True)
class AcceptSpec:
    """One accept: which benchmarks (globs over test ids), which metrics (None: every one), why,
    and where it was written (``--bench-accept`` or ``Bench-Accept in 3f2a9c1e0b7d (subject)``)."""

    patterns: tuple[str, ...]
    metrics: frozenset[str] | None
    reason: str
    source: str

    def matches(self, verdict: Verdict) -> bool:
        if self.metrics is not None and verdict.metric not in self.metrics:
            return False
        nodeid = verdict.key.split(" [", 1)[0]  # a named recording's key adds " [description]"
        return any(
            _glob(pattern).fullmatch(name)
            for pattern in self.patterns
            for name in (verdict.key, nodeid)
        )

    def describe(self) -> str:
        metrics = ",".join(sorted(self.metrics)) if self.metrics is not None else "*"
        return f"{','.join(self.patterns)} {metrics}"


def _glob(pattern: str) -> re.Pattern[str]:
    """``*`` any text, ``?`` one character, everything else literal: test ids hold ``[...]``,
    which fnmatch would read as a set of characters."""
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL
    )


def parse_spec(text: str, source: str, known_metrics: Iterable[str]) -> AcceptSpec:
    """An :class:`AcceptSpec` from ``TEST-IDS METRICS -- REASON``; AcceptError (one line)
    otherwise."""
    shown = safe_text(one_line(text))
    what, sep, reason = text.partition(" -- ")
    reason = reason.strip()
    parts = what.split()
    if not sep or not reason or len(parts) != 2:
        raise AcceptError(f"{source}: {shown!r} is not an accept: write {_FORM}")
    ids, metric_text = parts
    patterns = tuple(p for p in ids.split(",") if p)
    known = set(known_metrics)
    metrics = None if metric_text == "*" else frozenset(m for m in metric_text.split(",") if m)
    unknown = sorted(metrics - known) if metrics is not None else []
    if not patterns or (metrics is not None and not metrics):
        raise AcceptError(f"{source}: {shown!r} names no test or no metric: write {_FORM}")
    if unknown:
        raise AcceptError(
            f"{source}: {shown!r} names unknown metric(s) {', '.join(map(safe_text, unknown))} "
            f"(known: {', '.join(sorted(known))})"
        )
    return AcceptSpec(patterns, metrics, one_line(reason), source)


def from_trailers(
    trailers: Iterable[tuple[str, str, str]], known_metrics: Iterable[str]
) -> tuple[list[AcceptSpec], list[str]]:
    """The accepts of ``(commit, subject, value)`` trailers, and a line for each that cannot be
    read."""
    known = list(known_metrics)
    specs, problems = [], []
    for commit, subject, value in trailers:
        source = f"{TRAILER} in {commit[:12]} ({one_line(subject, 60)})"
        try:
            specs.append(parse_spec(value, source, known))
        except AcceptError as exc:
            problems.append(f"{exc}; its regressions stay failed")
    return specs, problems


@dataclasses.dataclass
class Acceptance:
    """The accepts of a run, applied to each test's verdicts; remembers which ones matched."""

    specs: Sequence[AcceptSpec]
    #: Accepts that could not be read (one line each), said at the end: their regressions stay
    #: failed.
    problems: Sequence[str] = ()
    used: set[int] = dataclasses.field(default_factory=set)

    def apply(self, verdicts: Sequence[Verdict]) -> list[Verdict]:
        """``verdicts`` with each failed regression that an accept names replaced by an accepted
        verdict (not failed; the reason and its source first among the details)."""
        out = []
        for verdict in verdicts:
            spec_index = next(
                (i for i, spec in enumerate(self.specs) if spec.matches(verdict)), None
            )
            if spec_index is None or verdict.status != REGRESSION or not verdict.failed:
                out.append(verdict)
                continue
            self.used.add(spec_index)
            spec = self.specs[spec_index]
            out.append(
                dataclasses.replace(
                    verdict,
                    status=ACCEPTED,
                    failed=False,
                    summary=f"{verdict.summary}; accepted: {spec.reason}",
                    details=[f"accepted by {spec.source}: {spec.reason}", *verdict.details],
                )
            )
        return out

    def unmatched(self) -> list[AcceptSpec]:
        """The accepts that matched no regression in this run (a typo, or a change that was not
        slower)."""
        return [spec for i, spec in enumerate(self.specs) if i not in self.used]

    def closing_lines(self) -> list[str]:
        """What the end of the run says of the accepts: those not understood, those unused."""
        lines = [safe_text(problem) for problem in self.problems]
        lines += [
            f"{safe_text(spec.source)} matched no regression: {safe_text(spec.describe())}"
            for spec in self.unmatched()
        ]
        return lines
