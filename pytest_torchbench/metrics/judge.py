"""A metric's judging part: its default limit and how it compares a value with its baseline's
(or judges base and head measured alternately), with the exact-count rule the counting metrics
share.

Read by the gate (``judging/judgement.py``), which applies the steps of the verdict path around
:meth:`Judging.judge`, and by the baseline source (which metrics alternate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..common.vocabulary import IMPROVEMENT, REGRESSION, UNCHANGED, Policy, Verdict
from .identity import Identity


class Judging(Identity):
    """How a metric judges: by default, the headline number, more than the limit above its
    baseline's is a regression."""

    #: Limit when the user gives none (a fraction: 0.01 is 1%).
    default_limit: ClassVar[float] = 0.1

    def judge(self, key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
        """Compare one value with its baseline's (comparable environments, limit resolved).
        The default: the headline number, more than ``limit`` above is a regression."""
        now, then = self.headline(current), self.headline(baseline)
        delta = now / then - 1.0 if then > 0 else (math.inf if now > 0 else 0.0)
        status = "regression" if delta > limit else "improvement" if delta < -limit else "unchanged"
        summary = (
            f"{self.name} {self.format_value(then)} -> {self.format_value(now)} "
            f"({format_fraction(delta)}, limit {limit * 100:g}%)"
        )
        return Verdict(key, self.name, status, then, now, limit, None, summary)

    #: With ``--bench-fail-stale``, an improvement beyond the limit fails.
    stale_fails: ClassVar[bool] = True
    #: The words of a failure message for any judged status (default: by status, "regressed"...).
    failure_words: ClassVar[str | None] = None

    #: Against a base measured in the same job, measure base and head alternately in several
    #: rounds of fresh processes and judge the pairs (:meth:`judge_rounds`): for measurements the
    #: machine moves between one minute and the next (time). Counts need one run of each.
    alternates: ClassVar[bool] = False

    def judge_rounds(
        self,
        key: str,
        rounds: Sequence[tuple[Any, Any]],
        limit: float,
        policy: Policy,
        strict: bool = False,
    ) -> Verdict:
        """Judge (base, head) values measured alternately, one pair per round (only called for a
        metric that :attr:`alternates`). ``strict``: the first rounds, where anything not plainly
        unchanged is measured again."""
        raise NotImplementedError(f"metric {self.name!r} does not alternate")


def changed_counts(
    current: Mapping[str, float], baseline: Mapping[str, float], limit: float
) -> list[tuple[str, float, float]]:
    """(name, baseline, current) of every count that changed beyond ``limit`` (relative; a count
    that was 0 changed infinitely), by name: the exact-count metrics' rule (ops, kernels)."""
    changed = []
    for name in sorted(set(current) | set(baseline)):
        now, then = current.get(name, 0.0), baseline.get(name, 0.0)
        relative = abs(now - then) / then if then else math.inf
        if now != then and relative > limit:
            changed.append((name, then, now))
    return changed


def judge_counts(
    key: str,
    metric: str,
    current: Mapping[str, float],
    baseline: Mapping[str, float],
    limit: float,
    unit: str,
    things: str,
) -> Verdict:
    """The verdict of an exact-count metric: any count that changed beyond the limit fails,
    whichever way it went (counts are exact, so a change is never noise), each listed in ``details``
    as ``name then -> now per call``. ``unit``: "calls"; ``things``: "op(s)"."""
    changed = changed_counts(current, baseline, limit)
    total_now, total_then = sum(current.values()), sum(baseline.values())
    if changed:
        status = REGRESSION if total_now >= total_then else IMPROVEMENT
    else:
        status = UNCHANGED
    summary = (
        f"{metric} {total_then:g} -> {total_now:g} {unit} per call ({len(changed)} {things} "
        "changed)"
    )
    details = [f"{name} {then:g} -> {now:g} per call" for name, then, now in changed]
    return Verdict(
        key, metric, status, total_then, total_now, limit, None, summary, details, bool(changed)
    )


def format_fraction(delta: float) -> str:
    """A relative change in a verdict summary; ``new`` when the baseline was 0."""
    if not math.isfinite(delta):
        return "new"
    return f"{delta * 100:+.1f}%" if abs(delta) >= 0.001 else f"{delta * 100:+.3f}%"
