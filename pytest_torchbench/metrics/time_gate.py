"""The time gate: how a time is judged against a stored baseline (the fastest call against a band of
saved runs, with the machine's state, its load and its speed taken into account), in alternated
rounds against a base measured in the same job, and settled by a fresh process. The rule and the
figures behind each constant: docs/design/time-gate.md. Pure functions over time values (what
``metrics/time.py``'s ``TimeMetric`` holds, read by attribute); the time metric's judge is here.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import Any

from ..common.statistics import FASTER, SAME, SLOWER, UNDECIDED, AlternatedRounds, RoundPairs
from ..common.text import finite, safe_text
from ..common.vocabulary import (
    IMPROVEMENT,
    NOISY,
    NOT_COMPARABLE,
    REGRESSION,
    TOO_NOISY,
    UNCHANGED,
    Policy,
    Verdict,
    format_percent,
    format_seconds,
)

#: A measuring thread that had a core less than this share of the wall time was disturbed by other
#: processes (load), so its times carry their noise (see time_disturbance).
QUIET_CPU_SHARE = 0.9


def time_reference(baseline: Any) -> tuple[float, list[float]]:
    """What a time is compared with: the slowest of the baseline's saved runs, and all of them.

    Each run is represented by its fastest call (see judge_time). A baseline saved several times
    in the same environment keeps the earlier runs' values: their spread is the noise between
    runs (cache and memory state, CPU frequency, neighbours), which the replicates of one run do
    not show. Comparing with the slowest of them means a run fails only when it is slower than
    every run the baseline has seen, by more than the limit.
    """
    runs = [*baseline.history, baseline.fastest]
    return max(runs), runs


def time_disturbance(current: Any, baseline: Any) -> float | None:
    """The lowest CPU share of the two measurements when below QUIET_CPU_SHARE, else None.

    CPU share = the measuring thread's CPU time over the wall time of its measurement: 1.0 means
    it had a core all the time; 0.4 means other processes had it 60% of the time, and then they
    also share its caches and memory bandwidth, which slows even its fastest calls.
    """
    shares = [m.cpu_share for m in (current, baseline) if getattr(m, "cpu_share", None) is not None]
    lowest = min(shares, default=None)
    return lowest if lowest is not None and lowest < QUIET_CPU_SHARE else None


#: Calls at least this long touch enough memory that other processes' cache and memory traffic
#: slow even the fastest of them; shorter calls have a fastest call no neighbour can move (figures:
#: docs/design/measurements.md, "Moved from the code"; benchmarks/time_designs.py reproduces them).
SHORT_CALL = 100e-6


def time_allowance(
    limit: float, disturbed_share: float | None, fastest_call: float = SHORT_CALL
) -> float:
    """The slowdown a run must exceed to fail: the limit; on a disturbed machine, for calls of
    SHORT_CALL or more, what the load alone can explain: a thread that had its core a share s of
    the time can take 1/s as long with no change to the code, so (1 + limit) / s - 1 (a 2x
    slowdown still fails above s = 0.55). The gentler limit + (1 - s) failed many times more A/A
    comparisons (docs/design/measurements.md, "Moved from the code")."""
    if disturbed_share is None or fastest_call < SHORT_CALL:
        return limit
    return (1.0 + limit) / max(disturbed_share, 0.01) - 1.0


#: On a disturbed machine a call of SHORT_CALL or more is judged on its CPU time per call: a
#: regression when it rose more than this at a CPU share of BUSY_CPU_SHARE or less. Other processes
#: take wall time from the measuring thread, not CPU time (they still share its caches and memory
#: bandwidth): under load, wall time of the same code moves by multiples while its CPU time moves by
#: a few percent (docs/design/time-gate.md, "A busy machine: CPU time"). A 2x slowdown doubles CPU
#: time whatever the load, so it fails unless the baseline's own CPU time was inflated by a third.
BUSY_CPU_LIMIT = 0.5
#: ... reached at this CPU share; between it and QUIET_CPU_SHARE the CPU-time limit rises in a
#: straight line from the limit itself, so a share of 0.89 is not judged twice as leniently as
#: one of 0.9 (at 0.9 wall time and CPU time agree and the limit applies to both).
BUSY_CPU_SHARE = 0.5


def time_cpu_limit(limit: float, disturbed_share: float) -> float:
    """The CPU-time rise that fails at CPU share ``disturbed_share`` (see BUSY_CPU_LIMIT)."""
    if BUSY_CPU_LIMIT <= limit:
        return limit
    busy = (QUIET_CPU_SHARE - disturbed_share) / (QUIET_CPU_SHARE - BUSY_CPU_SHARE)
    return limit + (BUSY_CPU_LIMIT - limit) * min(max(busy, 0.0), 1.0)


def time_cpu_change(current: Any, baseline: Any) -> float | None:
    """The change of the fastest CPU time per call, when both runs measured it."""
    now, then = getattr(current, "cpu_fastest", None), getattr(baseline, "cpu_fastest", None)
    if now is None or then is None or then <= 0:
        return None
    return float(now / then - 1.0)


#: The machine counts as slower than when the baseline was saved when the reference workload
#: (engines/reference.py) took more than this much longer per call beside the benchmark than beside
#: the baseline's measurement. Below it nothing changes. Why this threshold and not a lower one:
#: lower ones cleared no more false regressions and let fewer real slowdowns fail
#: (docs/design/time-gate.md, "A slower machine: the reference workload").
MACHINE_SLOWER = 0.25


#: The most of a slowdown a slower machine can excuse: the reference's ratio counts up to this,
#: above the slowest moments seen on a shared machine (docs/design/measurements.md, "Moved from
#: the code"); a hand-edited baseline (a reference of 1e-300 s) must not excuse everything.
MACHINE_MAX = 3.0


def machine_slowdown(current: Any, baseline: Any) -> tuple[float, float, float] | None:
    """How much slower the machine was now than when the baseline's latest run was measured, when it
    was: ``(ratio, then, now)`` of the reference workload's fastest time per call, the ratio at most
    MACHINE_MAX; else None.

    Why: a slower machine (another VM on the same physical core, the host's clock) slows every call
    while the measuring thread keeps its core (CPU share 0.99, load 1.0), so neither the load
    allowance nor the CPU time sees it, and the fresh process that re-measures a suspect runs on
    the same slow machine, so it confirms the false regression; the reference runs beside each
    measurement and is slowed too (docs/design/time-gate.md, "A slower machine").
    A faster machine now is not used the other way (a stricter limit): the reference is one small
    workload, and a benchmark's own slowdown rarely matches it closely (scaling every time by it
    failed more A/A comparisons than not using it: docs/design/measurements.md, "Moved from the
    code").
    """
    now, then = getattr(current, "reference", None), getattr(baseline, "reference", None)
    if not now or not then or now.get("probe") != then.get("probe") or then["compute"] <= 0:
        return None
    ratio = now["compute"] / then["compute"]
    if not finite(ratio) or ratio <= 1.0 + MACHINE_SLOWER:
        return None
    return min(ratio, MACHINE_MAX), then["compute"], now["compute"]


#: Two measurements were made in different machine states when the measuring thread's CPU share
#: in one was more than this many times its share in the other: on a loaded machine A/A fastest
#: calls (and their CPU times) then moved by multiples, either way, while the reference workload
#: did not follow (docs/design/time-gate.md, "Against a stored set: the machine's state").
STATE_SHARE_RATIO = 1.3
#: Without a CPU share (more than one thread, pedantic rounds) the load average per CPU is the
#: state: at this many runnable threads per CPU or more, a benchmark's threads wait for CPUs,
#: which the one-thread reference workload does not show (the same section).
FULL_LOAD_PER_CORE = 1.5

#: Which side of a comparison was measured in the worse machine state (see machine_state).
WORSE_NOW, WORSE_THEN, WORSE_BOTH = "this run", "the baseline", "both"


@dataclasses.dataclass(frozen=True)
class StateDifference:
    """How the machine's state beside this run differs from the one beside the baseline, beyond
    what the reference workload corrects: which side was worse (its times inflated by the state),
    and why, in numbers."""

    worse: str  # WORSE_NOW, WORSE_THEN or WORSE_BOTH
    reasons: tuple[str, ...]


def machine_state(current: Any, baseline: Any) -> StateDifference | None:
    """The difference of machine state between the two measurements, or None where none is seen.

    Why: the state a measurement was made in inflates its times by an amount that depends on the
    code (cache, memory bandwidth, the sibling hyperthread, threads waiting for cores), so no
    allowance corrects it; but its direction is known: the worse state only adds time. So a
    change against that direction is a real one (at least as large), and any other is not
    judged. Seen: the CPU shares of single-threaded measurements (both known; calls of SHORT_CALL
    or more, as for the load allowance); the reference
    workload when the machine was slower beside the baseline (a machine slower now is corrected
    by machine_slowdown); and, without CPU shares, the load per core when either side was full.
    A side without the figure (a baseline saved before it was kept) says nothing.
    """
    worse: set[str] = set()
    reasons: list[str] = []
    now, then = getattr(current, "cpu_share", None), getattr(baseline, "cpu_share", None)
    # calls under SHORT_CALL: a fastest call other processes do not move, whatever the share
    long_call = baseline.fastest >= SHORT_CALL
    if long_call and now is not None and then is not None and min(now, then) > 0:
        if max(now, then) / min(now, then) > STATE_SHARE_RATIO:
            worse.add(WORSE_NOW if now < then else WORSE_THEN)
            reasons.append(
                f"the measuring thread had a core {then * 100:.0f}% of its wall time beside the "
                f"baseline, {now * 100:.0f}% beside this run"
            )
    slower_then = machine_slowdown(baseline, current)
    if slower_then is not None:
        ratio, faster, slower = slower_then
        worse.add(WORSE_THEN)
        reasons.append(
            f"a reference workload took {format_seconds(slower)} per call beside the baseline, "
            f"{format_seconds(faster)} beside this run: the machine was "
            f"{format_percent(ratio - 1.0)} slower when the baseline was measured"
        )
    if now is None and then is None:
        full = _load_state(current, baseline)
        if full is not None:
            worse.add(full[0])
            reasons.append(full[1])
    if not worse:
        return None
    return StateDifference(worse.pop() if len(worse) == 1 else WORSE_BOTH, tuple(reasons))


def _load_state(current: Any, baseline: Any) -> tuple[str, str] | None:
    """Which side ran on a full machine (FULL_LOAD_PER_CORE), and the loads in words; None when
    neither did or a side's load per CPU is unknown. The runnable threads during the measurement
    where both sides have them, else the load average (which lags the machine by a minute)."""
    field, words = (
        ("runnable", "runnable threads")
        if all(getattr(m, "runnable", None) is not None for m in (current, baseline))
        else ("load", "load average")
    )
    per_core = []
    for metric in (current, baseline):
        value, cpus = getattr(metric, field, None), getattr(metric, "cpus", None)
        if value is None or not cpus:
            return None
        per_core.append(value / cpus)
    full_now, full_then = (value >= FULL_LOAD_PER_CORE for value in per_core)
    if not full_now and not full_then:
        return None
    worse = WORSE_BOTH if full_now and full_then else WORSE_NOW if full_now else WORSE_THEN
    return worse, (
        f"{words} {getattr(baseline, field):.1f} on {baseline.cpus} CPUs beside the baseline, "
        f"{getattr(current, field):.1f} on {current.cpus} beside this run "
        f"({FULL_LOAD_PER_CORE:g} or more per CPU: a benchmark not timed on one thread waits for "
        "CPUs, which the one-thread reference workload does not show)"
    )


def _state_allows(status: str, state: StateDifference) -> bool:
    """Whether a verdict of ``status`` points the way the machine's state could not have pushed
    it: slower than a baseline measured in the worse state, faster than it in a worse one now."""
    if state.worse == WORSE_THEN:
        return status in (REGRESSION, NOISY)
    if state.worse == WORSE_NOW:
        return status == IMPROVEMENT
    return False


_STATE_WORDS = {
    WORSE_NOW: "the worse state now adds time to this run",
    WORSE_THEN: "the worse state at the save added time to the baseline",
    WORSE_BOTH: "each side's state adds time of its own",
}


def _not_comparable(
    key: str, current: Any, baseline: Any, limit: float, state: StateDifference
) -> Verdict:
    """The verdict of a comparison the machine's state decides: no direction, and what to do."""
    now, then = current.fastest, baseline.fastest
    change = format_percent(now / then - 1.0) if then > 0 else "?"
    summary = (
        f"time: not comparable: the machine's state differs from the baseline's "
        f"({'; '.join(state.reasons)}); the fastest call {format_seconds(then)} -> "
        f"{format_seconds(now)} ({change}, limit {limit * 100:g}%) can be that state's doing, "
        f"not the code's ({_STATE_WORDS[state.worse]}): not judged; compare with a base measured "
        "in the same job (--bench-compare=REV), or save and compare in the same state"
    )
    details = [*state.reasons, *_time_conditions(current, baseline, None, limit)]
    return Verdict(key, "time", NOT_COMPARABLE, then, now, limit, None, safe_text(summary), details)


def judge_time(key: str, current: Any, baseline: Any, limit: float, policy: Policy) -> Verdict:
    """Compare the fastest call of each run (see the module docstring for why, with numbers); a
    verdict the machine's state could have made (machine_state) is "not comparable" instead."""
    verdict = _judge_fastest(key, current, baseline, limit)
    state = machine_state(current, baseline)
    if state is None or _state_allows(verdict.status, state):
        return verdict
    return _not_comparable(key, current, baseline, limit, state)


def _judge_fastest(key: str, current: Any, baseline: Any, limit: float) -> Verdict:
    """The fastest calls compared with the limit, the load and the machine's speed allowed for."""
    now, then = current.fastest, baseline.fastest
    delta = now / then - 1.0 if then > 0 else 0.0
    reference, runs = time_reference(baseline)
    over = now / reference - 1.0 if reference > 0 else 0.0
    disturbed = time_disturbance(current, baseline)
    allowed = time_allowance(limit, disturbed, then)
    busy = allowed > limit  # judged with the load allowance: CPU time decides too
    cpu_change = time_cpu_change(current, baseline) if busy else None
    cpu_limit = time_cpu_limit(limit, disturbed) if disturbed is not None else limit
    # A slower machine explains a slowdown of up to (1 + limit) x ratio against the latest saved
    # run, the one its reference was measured beside (not the band's slowest, nor on top of the
    # load allowance: each excuse stands alone, so they never multiply).
    slower = machine_slowdown(current, baseline)
    machine_allowed = (1.0 + limit) * slower[0] - 1.0 if slower is not None else None
    machine_change = cpu_change if cpu_change is not None else delta
    status = UNCHANGED
    explained_by_machine = False
    if over > limit:
        failing = cpu_change > cpu_limit if cpu_change is not None else over > allowed
        explained_by_machine = (
            failing and machine_allowed is not None and machine_change <= machine_allowed
        )
        status = REGRESSION if failing and not explained_by_machine else NOISY
    elif delta < -limit and now < min(runs) * (1.0 - limit):
        status = IMPROVEMENT
    summary = (
        f"time {format_seconds(then)} -> {format_seconds(now)} ({format_percent(delta)}, "
        f"limit {limit * 100:g}%; judged on the fastest block: baseline {len(baseline.raw_times)} "
        f"blocks, this run {len(current.raw_times)}; median {format_seconds(baseline.median)} -> "
        f"{format_seconds(current.median)}"
    )
    summary += _saved_runs_words(runs, over)
    if cpu_change is not None:
        summary += (
            f"; CPU time per call {format_seconds(baseline.cpu_fastest)} -> "
            f"{format_seconds(current.cpu_fastest)} ({format_percent(cpu_change)})"
        )
    summary += ")"
    details = (
        _time_conditions(
            current,
            baseline,
            disturbed if status != IMPROVEMENT else None,
            allowed,
            cpu_limit if cpu_change is not None else None,
        )
        if status != UNCHANGED
        else []
    )
    if slower is not None and machine_allowed is not None and status in (REGRESSION, NOISY):
        details.append(
            _machine_detail(
                slower,
                machine_allowed,
                by_cpu=cpu_change is not None,
                not_this_one=not (explained_by_machine or status != REGRESSION),
            )
        )
    if explained_by_machine and slower is not None and machine_allowed is not None:
        summary += (
            f": the machine itself was {format_percent(slower[0] - 1.0)} slower (a reference "
            f"workload beside it), a slowdown must exceed {machine_allowed * 100:.0f}% to fail; "
            f"not failed, rerun when the machine is back to speed"
        )
    elif status == NOISY and cpu_change is not None:
        summary += (
            f": the machine was busy, so CPU time decides and it must rise more than "
            f"{cpu_limit * 100:.0f}% to fail; not failed, rerun on a quieter machine"
        )
    elif status == NOISY:
        summary += (
            f": the machine was busy, a slowdown must exceed {allowed * 100:.0f}% "
            f"to fail; not failed, rerun on a quieter machine"
        )
    return Verdict(key, "time", status, then, now, limit, None, summary, details)


def _saved_runs_words(runs: Sequence[float], over: float) -> str:
    """The spread of the baseline's saved runs, and how far over the slowest this run is, when
    there are several."""
    if len(runs) <= 1:
        return ""
    return (
        f"; {len(runs)} saved runs {format_seconds(min(runs))}-{format_seconds(max(runs))}, "
        f"{format_percent(over)} over the slowest"
    )


def _machine_detail(
    slower: tuple[float, float, float], allowed: float, *, by_cpu: bool, not_this_one: bool
) -> str:
    """The detail line of a slower machine: the reference workload's times, and how much of a rise
    (of CPU time when ``by_cpu``, else of the fastest call) that explains."""
    ratio, before, after = slower
    capped = f" (counted as {MACHINE_MAX:g}x at most)" if after / before > MACHINE_MAX else ""
    measure = "CPU time" if by_cpu else "the fastest call"
    return (
        f"the machine was slower: a reference workload took {format_seconds(after)} per "
        f"call beside this run, {format_seconds(before)} beside the baseline's latest run "
        f"({format_percent(ratio - 1.0)}{capped}), which explains a rise of {measure} of up "
        f"to +{allowed * 100:.0f}% over that run" + (": not this one" if not_this_one else "")
    )


#: A pair of measurements counts as measured in turns from this many turns on each side (a
#: measurement of the default length takes about ten): fewer, and most of it ran alone.
MIN_TURNS = 3


def judge_time_rounds(
    key: str, rounds: Sequence[tuple[Any, Any]], limit: float, strict: bool = False
) -> Verdict:
    """Judge a time measured alternately with its base, on the fastest call of each side in each
    round (``core.statistics.AlternatedRounds``: the paired ratios and each side's fastest rounds,
    a quarter of the rounds set aside in each view).

    Why: base and head of one round ran in fresh processes on the same machine, in turns (or one
    after the other), the order swapped every round (ABBA), so a machine that is slower for a minute
    slows both sides of a pair; and noise only adds time, in windows that can cover a whole
    measurement, so a round or two of either side can be far off without the code changing. A
    change both views see fails (or is an improvement); one they see within the limit passes.
    Anything else cannot be told at this limit from these rounds: "undecided" to the controller,
    which measures more rounds of it (``undecided_time``), and at the end "too noisy", with the
    rounds' own spread, neither failed nor passed (CI counts it as "could not judge"), so that
    the user can raise the limit to what this machine can tell, instead of a gate that fails at
    random or passes in silence.
    """
    pairs = [(b.fastest, h.fastest) for b, h in rounds]
    in_turns = measured_in_turns(rounds)
    try:
        judged = AlternatedRounds(
            pairs, rounds.numbers if isinstance(rounds, RoundPairs) else None, in_turns
        )
    except ValueError:  # no round with a positive time on both sides (a timer that returned 0)
        return Verdict(
            key,
            "time",
            TOO_NOISY,
            None,
            None,
            limit,
            None,
            f"not judged: none of its {len(pairs)} alternated rounds measured a positive time on "
            "both sides (a call faster than the timer can tell?); neither failed nor passed",
            [],
        )
    decision = judged.decide(limit, strict)
    # strict one side after the other: what one view cannot tell is measured again first
    own = judged.own_limit(limit) if decision == UNDECIDED and (in_turns or not strict) else None
    if own is not None:
        decision = SAME
    status = {SLOWER: REGRESSION, FASTER: IMPROVEMENT, SAME: UNCHANGED}.get(decision, TOO_NOISY)
    change = judged.change
    then = statistics.median(judged.base)
    summary = _rounds_summary(judged, status, limit, own)
    details = _round_details(judged) if status != UNCHANGED or own is not None else []
    return Verdict(
        key,
        "time",
        status,
        then,
        then * (1.0 + change),
        own if own is not None else limit,
        None,
        safe_text(summary),
        details,
    )


def _rounds_summary(judged: AlternatedRounds, status: str, limit: float, own: float | None) -> str:
    """The verdict line of rounds: the change, or why it was not judged, and the rounds' figures."""
    change = judged.change
    then = statistics.median(judged.base)
    low, high = judged.central
    aside = judged.depth - 1
    set_aside = f", {aside} at each end set aside" if aside else ""
    how = " in turns" if judged.in_turns else ""
    rounds_text = (
        f"head/base of the fastest call over {judged.rounds} alternated rounds{how}: median "
        f"{format_percent(change)}, rounds "
        f"{format_percent(low - 1.0)}..{format_percent(high - 1.0)}{set_aside}; fastest base "
        f"{format_seconds(judged.base[0])}, head {format_seconds(judged.head[0])}"
    )
    if status == TOO_NOISY:
        return (
            f"too noisy at a {limit * 100:g}% limit: {_deciding_words(judged, limit)} "
            f"({rounds_text}); they neither agree on a change beyond the limit nor within it: not "
            "judged, neither failed nor passed; add --bench-rounds, or measure it on a quieter "
            "machine"
        )
    moved = f"time {format_seconds(then)} -> {format_seconds(then * (1.0 + change))}"
    if own is not None:
        return (
            f"{moved} ({format_percent(change)}, unchanged at its own limit of {_shown_limit(own)}"
            f": its rounds cannot tell the {limit * 100:g}% asked for on this machine; "
            f"{rounds_text})"
        )
    return f"{moved} ({format_percent(change)}, limit {limit * 100:g}%; {rounds_text})"


def _shown_limit(limit: float) -> str:
    """A limit in percent, rounded up to a tenth (the rounds decide at it, not below)."""
    return f"{math.ceil(limit * 1000 - 1e-9) / 10:g}%"


def measured_in_turns(rounds: Sequence[tuple[Any, Any]]) -> bool:
    """Whether every pair was measured in turns (each side handed the CPU over at least MIN_TURNS
    times while the other measured the same benchmark, pinned): then judged on the pairs alone."""
    return bool(rounds) and all(
        (getattr(b, "turns", None) or 0) >= MIN_TURNS
        and (getattr(h, "turns", None) or 0) >= MIN_TURNS
        for b, h in rounds
    )


def _round_details(judged: AlternatedRounds) -> list[str]:
    """One line per round, numbered as the session numbered its rounds (a round the benchmark is
    missing from, or measured no positive time in, leaves a gap), the order following the number
    (ABBA)."""
    details = []
    for number, (base, head) in zip(judged.numbers, judged.pairs):
        first = "base first" if number % 2 else "head first"
        details.append(
            f"round {number} ({first}): base {format_seconds(base)}, head "
            f"{format_seconds(head)} ({format_percent(head / base - 1.0)})"
        )
    return details


def _deciding_words(judged: AlternatedRounds, limit: float) -> str:
    """What the rounds would be called at the smallest limit that decides them, in words.

    Why say which verdict: a limit raised until the rounds decide can be the limit at which a
    real change passes as unchanged; the user is told so, with the median change, rather than
    told to raise the limit."""
    deciding = judged.deciding_limit(limit)
    if deciding is None:
        return f"no limit up to {max(10.0, limit) * 100:g}% decides them"
    decision = judged.decide(deciding)
    shown = _shown_limit(deciding)
    if decision == SAME:
        return (
            f"they would be called unchanged at a limit of {shown}, which would pass a real change "
            f"of that size (median {format_percent(judged.change)})"
        )
    word = "a regression" if decision == SLOWER else "an improvement"
    return f"they would be called {word} at a limit of {shown}"


def confirm_time(suspect: Verdict, again: Verdict | None, problem: str | None) -> Verdict:
    """A time regression fails only when a fresh process measures it too: ``suspect`` settled.

    Why: the spread that matters is between processes, and one process cannot see it. Even with
    huge pages (engines/walltime.py) a memory-bound call's fastest time moves from one process to
    the next while staying put within each. Two independent processes both that far off is much
    rarer than one, and a real slowdown is in both (docs/design/time-gate.md, "A regression is
    confirmed in a fresh process"). The re-measure runs this one test in a fresh pytest
    (``explain.confirm``), judged against the same baseline with the same rule; only what it says is
    shown, with the numbers. Only a measurement within the limit clears a slowdown: a verdict of the
    fresh process that compares nothing (the test missing or new there, the environment not
    comparable) leaves it standing, as does no verdict at all.
    """
    cleared = (
        again is not None
        and again.current is not None
        and again.status in (UNCHANGED, IMPROVEMENT, NOISY)
    )
    if again is not None and not cleared and not (again.failed and again.status == REGRESSION):
        # missing or new there (its name differed), or not comparable with the baseline: no
        # measurement against the same baseline, so no evidence either way
        problem = f"the fresh process gave no comparison for it: {safe_text(again.status)}"
        again = None
    if again is None:
        return suspect.with_details(
            after=[
                f"not re-measured in a fresh process ({problem or 'no result'}): judged on this "
                "run alone"
            ]
        )
    measured = format_seconds(again.current) if again.current is not None else "nothing"
    change = f" ({format_percent(again.delta)})" if again.delta is not None else ""
    if not cleared:
        return suspect.replace(
            summary=f"{suspect.summary}; confirmed: a fresh process measured {measured}{change}"
        )
    return suspect.replace(
        status=NOISY,
        failed=False,
        summary=(
            f"{suspect.summary}; not confirmed: a fresh process measured {measured}{change}, so "
            "not failed"
        ),
        details=(
            *suspect.details,
            "a slowdown one process measured and a fresh one did not is the spread between "
            "processes (where memory lies, the machine's state), not the code",
        ),
    )


def _time_conditions(
    current: Any,
    baseline: Any,
    disturbed: float | None,
    allowed: float,
    cpu_limit: float | None = None,
) -> list[str]:
    """What the machine was like during both measurements, in numbers a user can check."""
    lines = []
    for name, metric in (("this run", current), ("baseline", baseline)):
        parts = []
        if getattr(metric, "cpu_share", None) is not None:
            parts.append(f"had a CPU {metric.cpu_share * 100:.0f}% of its wall time")
        if getattr(metric, "load", None) is not None:
            parts.append(f"load average {metric.load:.1f}")
        if parts:
            lines.append(f"{name}: {', '.join(parts)}")
    if disturbed is not None:
        if baseline.fastest < SHORT_CALL:
            lines.append(
                f"disturbed (CPU share {disturbed * 100:.0f}% < {QUIET_CPU_SHARE * 100:.0f}%), "
                f"but calls under {format_seconds(SHORT_CALL)} have a fastest call other "
                f"processes do not move: the limit applies"
            )
        else:
            if cpu_limit is not None:
                lines.append(
                    f"disturbed (CPU share {disturbed * 100:.0f}% < {QUIET_CPU_SHARE * 100:.0f}%): "
                    f"judged on CPU time per call, which other processes do not take from the "
                    f"measuring thread; it fails beyond +{cpu_limit * 100:.0f}%"
                )
            else:
                lines.append(
                    f"disturbed (CPU share {disturbed * 100:.0f}% < {QUIET_CPU_SHARE * 100:.0f}%): "
                    f"slowdowns up to {allowed * 100:.0f}% are treated as noise"
                )
    return lines
