"""The block that ends a run whose gate held nothing back silently: benchmarks compared with
nothing, or too noisy to judge at their limit, named one per line with what to do.

Why fail CI: a gate whose every comparison is "not comparable" (another runner image, another
torch build) passes every pull request while people believe they are protected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from ..common.vocabulary import Verdict
from .options import EXIT_INCOMPARABLE
from .session_facts import in_ci, uncompared, unjudged


@dataclasses.dataclass(frozen=True)
class ClosingBlock:
    """The lines of the block, and whether they fail the run (:data:`EXIT_INCOMPARABLE`)."""

    lines: tuple[str, ...] = ()
    fails_run: bool = False


def closing_block(
    verdicts: Sequence[Verdict],
    failed_at_base: Collection[str],
    name: str,
    allow_incomparable: bool,
) -> ClosingBlock:
    """Benchmarks whose baseline could not be compared (and had nothing measured in its place) in
    one block with the facts that differ; in CI the block fails the run unless
    ``--bench-allow-incomparable`` accepts it. Benchmarks too noisy to judge at their limit (paired
    rounds that spread more than it) are named the same way and count the same: the gate could not
    judge them either. ``failed_at_base``: keys whose test failed in the base run of REV."""
    everything = uncompared(list(verdicts))
    at_base = [v for v in everything if v.key in failed_at_base]
    found = [v for v in everything if v.key not in failed_at_base]
    noisy = unjudged(list(verdicts))
    if not found and not noisy and not at_base:
        return ClosingBlock()
    lines = _named(at_base, found, noisy, name)
    git_hint = "; ".join(_hints(at_base, found, noisy))
    if not in_ci():
        lines.append(f"WARNING: these were not gated; {git_hint}")
        return ClosingBlock(tuple(lines))
    if allow_incomparable:
        lines.append(
            "accepted by --bench-allow-incomparable: the run's exit status is left as it is"
        )
        return ClosingBlock(tuple(lines))
    lines.append(
        f"ERROR: in CI this fails the run (exit {EXIT_INCOMPARABLE}); {git_hint}, "
        "or accept it with --bench-allow-incomparable"
    )
    return ClosingBlock(tuple(lines), fails_run=True)


def _named(
    at_base: list[Verdict], found: list[Verdict], noisy: list[Verdict], name: str
) -> list[str]:
    """One heading per kind, then one line per verdict of it."""
    lines = []
    if at_base:
        lines.append(
            f"{len({v.key for v in at_base})} benchmark(s) were compared with nothing: "
            "their test is at the base revision but failed, was skipped or did not run in the "
            "base run:"
        )
        for verdict in sorted(at_base, key=lambda v: (v.key, v.metric)):
            lines.append(
                f"  {verdict.key} [{verdict.metric}]: "
                f"{'; '.join(verdict.details) or verdict.summary}"
            )
    if found:
        tests = sorted({v.key for v in found})
        lines.append(
            f"{len(tests)} benchmark(s) were compared with nothing: their baseline in '{name}' "
            "comes from another environment, or was measured under other conditions "
            "(each line says which), and nothing was measured in its place:"
        )
        for verdict in sorted(found, key=lambda v: (v.key, v.metric)):
            lines.append(
                f"  {verdict.key} [{verdict.metric}]: "
                f"{'; '.join(verdict.details) or verdict.summary}"
            )
    if noisy:
        lines.append(
            f"{len({v.key for v in noisy})} benchmark(s) could not be judged: "
            "measured alternately with the base, their rounds decide nothing at their limit:"
        )
        for verdict in sorted(noisy, key=lambda v: (v.key, v.metric)):
            lines.append(f"  {verdict.key} [{verdict.metric}]: {verdict.summary}")
    return lines


def _hints(at_base: list[Verdict], found: list[Verdict], noisy: list[Verdict]) -> list[str]:
    """What to do about each kind the block names."""
    hints = []
    if at_base:
        hints.append(
            "the base runs while this session runs: where the error is a port or a lock that a "
            "session fixture holds, let the fixture take a free port or a lock of its own; "
            "where the test is broken at the base revision, compare with a revision where it "
            "passes"
        )
    if found:
        hints.append(
            "measure the base here with --bench-compare=REV (a git revision) and "
            "--bench-base=auto, or save the baselines on this kind of machine; where a line "
            "above says what to do, do that"
        )
    if noisy:
        hints.append(
            "give the too noisy ones more rounds (--bench-rounds), measure on a quieter "
            "machine, or a limit they can hold (--bench-fail or the marker's limits=; their "
            "lines say what it would let through)"
        )
    return hints
